// bf16 GEMV for decode: y[n] = sum_k w[n,k] x[k], w bf16 row-major, x and y f32.
// Each lane loads 16 bytes (8 weights) per step; R rows per warp share the x loads; U steps of
// loads are in flight before the first use; SK warps split K inside a block.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif
#include "hfq4_common.h"

LAB_DEV float bf16_dot8(lab_u4 w, const float* x) {
  float a = lab_u2f(w.x << 16) * x[0];
  float b = lab_u2f(w.x & 0xFFFF0000u) * x[1];
  a += lab_u2f(w.y << 16) * x[2];
  b += lab_u2f(w.y & 0xFFFF0000u) * x[3];
  a += lab_u2f(w.z << 16) * x[4];
  b += lab_u2f(w.z & 0xFFFF0000u) * x[5];
  a += lab_u2f(w.w << 16) * x[6];
  b += lab_u2f(w.w & 0xFFFF0000u) * x[7];
  return a + b;
}

template <int R, int U, int SK, int WPB>
LAB_DEV void bf16_gemv(const u16* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int N, int K) {
  constexpr int SETS = WPB / SK;
  LAB_SHARED float red[WPB][R];
  const int lane = lab_lane(), warp = lab_warp();
  const int set = warp / SK, part = warp % SK;
  const int row0 = (lab_bid() * SETS + set) * R;
  const int nsteps = K / 256;
  const int per = (nsteps + SK - 1) / SK;
  const int sbeg = part * per;
  const int send = (sbeg + per < nsteps) ? sbeg + per : nsteps;
  const u16* rowp[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int row = row0 + r;
    if (row > N - 1) row = N - 1;
    rowp[r] = W + (long)row * K;
  }
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int s = sbeg; s < send; s += U) {
    lab_u4 w[U][R];
    float xv[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int ss = s + u;
      if (ss >= send) ss = send - 1;
      const int k = ss * 256 + lane * 8;
#pragma unroll
      for (int r = 0; r < R; ++r) w[u][r] = *(const lab_u4*)(rowp[r] + k);
      const lab_f4* xp = (const lab_f4*)(x + k);
      lab_f4 a = xp[0], b = xp[1];
      xv[u][0] = a.x; xv[u][1] = a.y; xv[u][2] = a.z; xv[u][3] = a.w;
      xv[u][4] = b.x; xv[u][5] = b.y; xv[u][6] = b.z; xv[u][7] = b.w;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float valid = (s + u < send) ? 1.0f : 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] += valid * bf16_dot8(w[u][r], xv[u]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = lab_warp_sum(acc[r]);
  if (SK == 1) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (row0 + r < N) y[row0 + r] = acc[r];
    }
  } else {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) red[warp][r] = acc[r];
    }
    lab_sync();
    const int t = lab_tid();
    if (t < SETS * R) {
      const int st = t / R, r = t % R;
      float v = 0.0f;
#pragma unroll
      for (int p = 0; p < SK; ++p) v += red[st * SK + p][r];
      const int row = (lab_bid() * SETS + st) * R + r;
      if (row < N) y[row] = v;
    }
  }
}

#define BF16_GEMV(name, R, U, SK, WPB)                                                            \
  LAB_KERNEL(WPB * 32) gemv_bf16_##name(const u16* __restrict__ W, const float* __restrict__ x,   \
                                        float* __restrict__ y, int N, int K) {                     \
    bf16_gemv<R, U, SK, WPB>(W, x, y, N, K);                                                       \
  }
BF16_GEMV(r1, 1, 4, 1, 4)
BF16_GEMV(r2, 2, 4, 1, 4)
BF16_GEMV(r4, 4, 2, 1, 4)
BF16_GEMV(r1_u8, 1, 8, 1, 4)
BF16_GEMV(r2_sk2, 2, 4, 2, 8)
BF16_GEMV(r1_sk4, 1, 4, 4, 8)
