// Fused gate-up + SwiGLU over HFQ4G256 weights: h[n] = silu(Wg[n]·x) * (Wu[n]·x).
// One warp owns R rows of both matrices, so x, its group sums and its f16x2 form are built once
// for 2R dot products.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif
#include "hfq4_common.h"

template <int R, int U, bool H2>
LAB_DEV void swiglu_hfq4(const u8* __restrict__ Wg, const u8* __restrict__ Wu, const float* __restrict__ x, float* __restrict__ h, int N, int K) {
  const int lane = lab_lane(), warp = lab_warp();
  const int row0 = (lab_bid() * 4 + warp) * R;
  const int G = K >> 8;
  const long rb = (long)G * HFQ4_GROUP_BYTES;
  long off[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int row = row0 + r;
    if (row > N - 1) row = N - 1;
    off[r] = (long)row * rb;
  }
  float ag[R], au[R];
#pragma unroll
  for (int r = 0; r < R; ++r) { ag[r] = 0.0f; au[r] = 0.0f; }
  for (int g0 = 0; g0 < G; g0 += U) {
    u32 qg[U][R], qu[U][R];
    lab_f2 hg[U][R], hu[U][R];
    float xv[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int g = g0 + u;
      if (g >= G) g = G - 1;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const u8* pg = Wg + off[r] + (long)g * HFQ4_GROUP_BYTES;
        const u8* pu = Wu + off[r] + (long)g * HFQ4_GROUP_BYTES;
        hg[u][r] = *(const lab_f2*)pg;
        hu[u][r] = *(const lab_f2*)pu;
        qg[u][r] = *(const u32*)(pg + 8 + lane * 4);
        qu[u][r] = *(const u32*)(pu + 8 + lane * 4);
      }
      const lab_f4* xp = (const lab_f4*)(x + g * 256 + lane * 8);
      lab_f4 a = xp[0], b = xp[1];
      xv[u][0] = a.x; xv[u][1] = a.y; xv[u][2] = a.z; xv[u][3] = a.w;
      xv[u][4] = b.x; xv[u][5] = b.y; xv[u][6] = b.z; xv[u][7] = b.w;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float valid = g0 + u < G ? 1.0f : 0.0f;
      const float xs = ((xv[u][0] + xv[u][1]) + (xv[u][2] + xv[u][3])) + ((xv[u][4] + xv[u][5]) + (xv[u][6] + xv[u][7]));
      hfq4_xh xh;
      if (H2) xh = hfq4_prep_h2(xv[u]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float dg = H2 ? hfq4_dot8_h2(qg[u][r], xh) : hfq4_dot8_f32(qg[u][r], xv[u]);
        const float du = H2 ? hfq4_dot8_h2(qu[u][r], xh) : hfq4_dot8_f32(qu[u][r], xv[u]);
        ag[r] += valid * (hg[u][r].x * dg + hg[u][r].y * xs);
        au[r] += valid * (hu[u][r].x * du + hu[u][r].y * xs);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float g = lab_warp_sum(ag[r]);
    const float u = lab_warp_sum(au[r]);
    if (lane == 0 && row0 + r < N) h[row0 + r] = g / (1.0f + lab_exp(-g)) * u;
  }
}

LAB_KERNEL(128) swiglu_hfq4g256_r1(const u8* __restrict__ Wg, const u8* __restrict__ Wu, const float* __restrict__ x, float* __restrict__ h, int N, int K) {
  swiglu_hfq4<1, 4, false>(Wg, Wu, x, h, N, K);
}
LAB_KERNEL(128) swiglu_hfq4g256_r2_h2(const u8* __restrict__ Wg, const u8* __restrict__ Wu, const float* __restrict__ x, float* __restrict__ h, int N, int K) {
  swiglu_hfq4<2, 2, true>(Wg, Wu, x, h, N, K);
}
