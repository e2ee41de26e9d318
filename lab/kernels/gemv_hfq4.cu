// 4-bit group-256 (HFQ4G256) GEMV for decode: y[n] = sum_k w[n,k] x[k] (+ r[n]).
// One template, several levers:
//   R   rows per warp (x and its group sums are loaded once and reused R times),
//   VB  bytes of nibbles per lane per group step (4 or 8; 16 lives in hfq4_gemv_v16),
//   U   group steps whose loads are issued before any of them is used,
//   SK  warps that split one row set's K range (split-K, reduced through shared memory),
//   H2  f16x2 dequant arithmetic instead of f32, PF register double buffering (prefetch).
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif
#include "hfq4_common.h"

template <int R, int VB, int U>
struct hfq4_stage {
  u32 nib[U][R][VB / 4];
  lab_f2 hdr[U][R];
  float x[U][VB * 2];
};

template <int R, int VB, int U>
LAB_DEV void hfq4_load(hfq4_stage<R, VB, U>& st, const u8* const* rowp, const float* __restrict__ x,
                       int step0, int gsub, int boff, int nsteps) {
  constexpr int GPS = VB / 4;  // groups per warp step: 32 lanes * VB bytes / 128 bytes
#pragma unroll
  for (int u = 0; u < U; ++u) {
    int s = step0 + u;
    if (s >= nsteps) s = nsteps - 1;  // tail: reload a valid step, masked out by the caller
    const int g = s * GPS + gsub;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const u8* gp = rowp[r] + (long)g * HFQ4_GROUP_BYTES;
      st.hdr[u][r] = *(const lab_f2*)gp;
      if (VB == 4) {
        st.nib[u][r][0] = *(const u32*)(gp + 8 + boff);
      } else {
        lab_u2 t = *(const lab_u2*)(gp + 8 + boff);
        st.nib[u][r][0] = t.x;
        st.nib[u][r][VB / 4 - 1] = t.y;
      }
    }
    const lab_f4* xp = (const lab_f4*)(x + g * 256 + boff * 2);
#pragma unroll
    for (int i = 0; i < VB / 2; ++i) {
      lab_f4 t = xp[i];
      st.x[u][4 * i] = t.x; st.x[u][4 * i + 1] = t.y; st.x[u][4 * i + 2] = t.z; st.x[u][4 * i + 3] = t.w;
    }
  }
}

template <int R, int VB, int U, bool H2>
LAB_DEV void hfq4_compute(const hfq4_stage<R, VB, U>& st, float* acc, int step0, int nsteps) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const float valid = (step0 + u < nsteps) ? 1.0f : 0.0f;
#pragma unroll
    for (int h = 0; h < VB / 4; ++h) {
      const float* xv = &st.x[u][8 * h];
      float xs = ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
      hfq4_xh xh;
      if (H2) xh = hfq4_prep_h2(xv);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float d = H2 ? hfq4_dot8_h2(st.nib[u][r][h], xh) : hfq4_dot8_f32(st.nib[u][r][h], xv);
        acc[r] += valid * (st.hdr[u][r].x * d + st.hdr[u][r].y * xs);
      }
    }
  }
}

template <int R, int VB, int U, int SK, int WPB, bool H2, bool PF, bool RES>
LAB_DEV void hfq4_gemv(const u8* __restrict__ W, const float* __restrict__ x, const float* __restrict__ res,
                       float* __restrict__ y, int N, int K) {
  constexpr int LPG = 128 / VB;  // lanes per group
  constexpr int GPS = VB / 4;
  constexpr int SETS = WPB / SK;
  LAB_SHARED float red[WPB][R];
  const int lane = lab_lane(), warp = lab_warp();
  const int set = warp / SK, part = warp % SK;
  const int row0 = (lab_bid() * SETS + set) * R;
  const int G = K >> 8;
  const long rb = (long)G * HFQ4_GROUP_BYTES;
  const int gsub = lane / LPG;
  const int boff = (lane % LPG) * VB;
  const int nsteps_all = G / GPS;
  const int per = (nsteps_all + SK - 1) / SK;
  const int sbeg = part * per;
  const int send = (sbeg + per < nsteps_all) ? sbeg + per : nsteps_all;
  const u8* rowp[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int row = row0 + r;
    if (row > N - 1) row = N - 1;
    rowp[r] = W + (long)row * rb;
  }
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  if (PF) {
    hfq4_stage<R, VB, U> a, b;
    int s = sbeg;
    if (s < send) hfq4_load<R, VB, U>(a, rowp, x, s, gsub, boff, send);
    while (s < send) {
      if (s + U < send) hfq4_load<R, VB, U>(b, rowp, x, s + U, gsub, boff, send);
      hfq4_compute<R, VB, U, H2>(a, acc, s, send);
      s += U;
      if (s >= send) break;
      if (s + U < send) hfq4_load<R, VB, U>(a, rowp, x, s + U, gsub, boff, send);
      hfq4_compute<R, VB, U, H2>(b, acc, s, send);
      s += U;
    }
  } else {
    for (int s = sbeg; s < send; s += U) {
      hfq4_stage<R, VB, U> st;
      hfq4_load<R, VB, U>(st, rowp, x, s, gsub, boff, send);
      hfq4_compute<R, VB, U, H2>(st, acc, s, send);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = lab_warp_sum(acc[r]);
  if (SK == 1) {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int row = row0 + r;
        if (row < N) y[row] = RES ? acc[r] + res[row] : acc[r];
      }
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
      if (row < N) y[row] = RES ? v + res[row] : v;
    }
  }
}

// 16-byte loads. Rows are a stream of 272-byte group pairs = 17 aligned 16-byte chunks:
// chunk 0 = header0 + nibbles0[0..8), chunks 1..7 = nibbles0, chunk 8 = nibbles0[120..128) +
// header1, chunks 9..16 = nibbles1. Each lane takes one chunk per step; the half that holds a
// header is masked out and the group's scale/min come from a (cached) 8-byte load.
template <int R, int WPB, bool H2>
LAB_DEV void hfq4_gemv_v16(const u8* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int N, int K) {
  const int lane = lab_lane(), warp = lab_warp();
  const int row0 = (lab_bid() * WPB + warp) * R;
  const int G = K >> 8;
  const long rb = (long)G * HFQ4_GROUP_BYTES;
  const int nchunks = (G / 2) * 17;
  const u8* rowp[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int row = row0 + r;
    if (row > N - 1) row = N - 1;
    rowp[r] = W + (long)row * rb;
  }
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int j0 = 0; j0 < nchunks; j0 += 32) {
    int j = j0 + lane;
    const float live = j < nchunks ? 1.0f : 0.0f;
    if (j >= nchunks) j = nchunks - 1;
    const int p = j / 17, c = j - p * 17;
    const int g = 2 * p + (c >= 9 ? 1 : 0);
    const int nb0 = c >= 9 ? 16 * c - 144 : 16 * c - 8;  // nibble byte of the low half
    const float v0 = (c == 0) ? 0.0f : live, v1 = (c == 8) ? 0.0f : live;
    const int w0 = nb0 < 0 ? 0 : 2 * nb0;
    lab_u4 q[R];
    lab_f2 hd[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      q[r] = *(const lab_u4*)(rowp[r] + (long)j * 16);
      hd[r] = *(const lab_f2*)(rowp[r] + (long)g * HFQ4_GROUP_BYTES);
    }
    float xv[32];
    const lab_f4* xp0 = (const lab_f4*)(x + g * 256 + w0);
    const lab_f4* xp1 = (const lab_f4*)(x + g * 256 + 2 * nb0 + 16);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      lab_f4 a = xp0[i], b = xp1[i];
      xv[4 * i] = a.x; xv[4 * i + 1] = a.y; xv[4 * i + 2] = a.z; xv[4 * i + 3] = a.w;
      xv[16 + 4 * i] = b.x; xv[16 + 4 * i + 1] = b.y; xv[16 + 4 * i + 2] = b.z; xv[16 + 4 * i + 3] = b.w;
    }
    float xs0 = 0.0f, xs1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) { xs0 += xv[i]; xs1 += xv[16 + i]; }
    hfq4_xh xh[4];
    if (H2) {
#pragma unroll
      for (int i = 0; i < 4; ++i) xh[i] = hfq4_prep_h2(&xv[8 * i]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float d0, d1;
      if (H2) {
        d0 = hfq4_dot8_h2(q[r].x, xh[0]) + hfq4_dot8_h2(q[r].y, xh[1]);
        d1 = hfq4_dot8_h2(q[r].z, xh[2]) + hfq4_dot8_h2(q[r].w, xh[3]);
      } else {
        d0 = hfq4_dot8_f32(q[r].x, &xv[0]) + hfq4_dot8_f32(q[r].y, &xv[8]);
        d1 = hfq4_dot8_f32(q[r].z, &xv[16]) + hfq4_dot8_f32(q[r].w, &xv[24]);
      }
      acc[r] += hd[r].x * (v0 * d0 + v1 * d1) + hd[r].y * (v0 * xs0 + v1 * xs1);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = lab_warp_sum(acc[r]);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (row0 + r < N) y[row0 + r] = acc[r];
  }
}

#define HFQ4_GEMV(name, R, VB, U, SK, WPB, H2, PF)                                                  \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* __restrict__ W, const float* __restrict__ x, \
                                            float* __restrict__ y, int N, int K) {                 \
    hfq4_gemv<R, VB, U, SK, WPB, H2, PF, false>(W, x, 0, y, N, K);                                 \
  }
// name           R  VB U  SK WPB H2     PF
HFQ4_GEMV(r1,     1, 4, 4, 1, 4, false, false)
HFQ4_GEMV(r2,     2, 4, 4, 1, 4, false, false)
HFQ4_GEMV(r4,     4, 4, 2, 1, 4, false, false)
HFQ4_GEMV(r8,     8, 4, 2, 1, 4, false, false)
HFQ4_GEMV(r1_h2,  1, 4, 4, 1, 4, true, false)
HFQ4_GEMV(r2_h2,  2, 4, 4, 1, 4, true, false)
HFQ4_GEMV(r4_h2,  4, 4, 2, 1, 4, true, false)
HFQ4_GEMV(r8_h2,  8, 4, 2, 1, 4, true, false)
HFQ4_GEMV(r2_v8_h2, 2, 8, 2, 1, 4, true, false)
HFQ4_GEMV(r4_v8_h2, 4, 8, 2, 1, 4, true, false)
HFQ4_GEMV(r2_pf_h2, 2, 4, 4, 1, 4, true, true)
HFQ4_GEMV(r4_pf_h2, 4, 4, 2, 1, 4, true, true)
HFQ4_GEMV(r1_sk4,   1, 4, 4, 4, 8, false, false)
HFQ4_GEMV(r2_sk2_h2, 2, 4, 4, 2, 8, true, false)
HFQ4_GEMV(r4_sk2_h2, 4, 4, 2, 2, 8, true, false)
HFQ4_GEMV(r1_u8_h2, 1, 4, 8, 1, 4, true, false)
HFQ4_GEMV(r2_u8_h2, 2, 4, 8, 1, 4, true, false)

#define HFQ4_GEMV_V16(name, R, WPB, H2)                                                           \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* __restrict__ W, const float* __restrict__ x, \
                                            float* __restrict__ y, int N, int K) {                 \
    hfq4_gemv_v16<R, WPB, H2>(W, x, y, N, K);                                                      \
  }
HFQ4_GEMV_V16(r1_v16_h2, 1, 4, true)
HFQ4_GEMV_V16(r2_v16_h2, 2, 4, true)
HFQ4_GEMV_V16(r2_v16, 2, 4, false)

// Residual-add variants: y = W x + r (the decode block's o_proj / down_proj epilogue).
#define HFQ4_GEMV_RES(name, R, VB, U, SK, WPB, H2, PF)                                              \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_res_##name(const u8* __restrict__ W, const float* __restrict__ x, \
                                                const float* __restrict__ r, float* __restrict__ y, int N, int K) { \
    hfq4_gemv<R, VB, U, SK, WPB, H2, PF, true>(W, x, r, y, N, K);                                  \
  }
HFQ4_GEMV_RES(r1,    1, 4, 4, 1, 4, false, false)
HFQ4_GEMV_RES(r2_h2, 2, 4, 4, 1, 4, true, false)
HFQ4_GEMV_RES(r4_h2, 4, 4, 2, 1, 4, true, false)
HFQ4_GEMV_RES(r2_sk2_h2, 2, 4, 4, 2, 8, true, false)

// x resident: each warp owns a fixed K slice of GPW groups for every row of its block and keeps
// that slice of x (f32, or f16x2 for H2) and its group sums in registers, so the loop streams
// weights only: no x reloads through L1 per row, which bounds the R-rows-per-warp design above.
// The block walks `rt` rows, U at a time (U x GPW nibble words + headers in flight per lane);
// per row a warp reduction, then shared memory sums the WPB slices. Needs K == 256*GPW*WPB.
// End of a row tile: the warps' partial sums of each row are added and written (plus the
// residual when given). Every x-resident kernel ends its tiles this way.
template <int WPB>
LAB_DEV void hfq4_tile_store(const float (*part)[64], int rt, int row_base, int N, const float* __restrict__ res,
                             float* __restrict__ y) {
  lab_sync();
  for (int t = lab_tid(); t < rt; t += WPB * 32) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < WPB; ++w) s += part[w][t];
    const int row = row_base + t;
    if (row < N) y[row] = res ? s + res[row] : s;
  }
}

template <int GPW, int WPB, int U, bool H2>
LAB_DEV void hfq4_gemv_xr(const u8* __restrict__ W, const float* __restrict__ x, const float* __restrict__ res,
                          float* __restrict__ y, int N, int K, int rt) {
  LAB_SHARED float part[WPB][64];
  const int lane = lab_lane(), warp = lab_warp();
  const long rb = (long)(K >> 8) * HFQ4_GROUP_BYTES;
  const int g0 = warp * GPW;
  const int row_base = lab_bid() * rt;
  const u8* wbase = W + (long)g0 * HFQ4_GROUP_BYTES + 8 + lane * 4;
  // First rows' loads go out before x is read, so the weight stream starts at once.
  u32 q[U][GPW];
  lab_f2 hd[U][GPW];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    int row = row_base + u;
    if (row > N - 1) row = N - 1;
#pragma unroll
    for (int g = 0; g < GPW; ++g) {
      const u8* p = wbase + (long)row * rb + g * HFQ4_GROUP_BYTES;
      q[u][g] = *(const u32*)p;
      hd[u][g] = *(const lab_f2*)(p - 8 - lane * 4);
    }
  }
  float xv[H2 ? 1 : GPW][8];
  hfq4_xh xh[H2 ? GPW : 1];
  float xs[GPW];
#pragma unroll
  for (int g = 0; g < GPW; ++g) {
    const lab_f4* xp = (const lab_f4*)(x + (g0 + g) * 256 + lane * 8);
    const lab_f4 a = xp[0], b = xp[1];
    float t[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    xs[g] = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    if (H2) {
      xh[g] = hfq4_prep_h2(t);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) xv[H2 ? 0 : g][i] = t[i];
    }
  }
  for (int r0 = 0; r0 < rt; r0 += U) {
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float a = 0.0f;
#pragma unroll
      for (int g = 0; g < GPW; ++g) {
        const float d = H2 ? hfq4_dot8_h2(q[u][g], xh[H2 ? g : 0]) : hfq4_dot8_f32(q[u][g], xv[H2 ? 0 : g]);
        a += hd[u][g].x * d + hd[u][g].y * xs[g];
      }
      acc[u] = a;
    }
    // Next rows' loads before this batch's reductions.
    if (r0 + U < rt) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        int row = row_base + r0 + U + u;
        if (row > N - 1) row = N - 1;
#pragma unroll
        for (int g = 0; g < GPW; ++g) {
          const u8* p = wbase + (long)row * rb + g * HFQ4_GROUP_BYTES;
          q[u][g] = *(const u32*)p;
          hd[u][g] = *(const lab_f2*)(p - 8 - lane * 4);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float s = lab_warp_sum(acc[u]);
      if (lane == 0) part[warp][r0 + u] = s;
    }
  }
  hfq4_tile_store<WPB>(part, rt, row_base, N, res, y);
}

#define HFQ4_XR(name, GPW, WPB, U, H2)                                                                        \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* __restrict__ W, const float* __restrict__ x,            \
                                            float* __restrict__ y, int N, int K, int rt) {                    \
    hfq4_gemv_xr<GPW, WPB, U, H2>(W, x, 0, y, N, K, rt);                                                      \
  }                                                                                                           \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_res_##name(const u8* __restrict__ W, const float* __restrict__ x,        \
                                                const float* __restrict__ r, float* __restrict__ y, int N, int K, int rt) { \
    hfq4_gemv_xr<GPW, WPB, U, H2>(W, x, r, y, N, K, rt);                                                      \
  }
// K = 4096, 8192, 14336, 28672 → groups per warp x warps per block.
HFQ4_XR(xr_g2w8, 2, 8, 8, false)
HFQ4_XR(xr_g4w8, 4, 8, 4, false)
HFQ4_XR(xr_g7w8, 7, 8, 2, false)
HFQ4_XR(xr_g7w16, 7, 16, 2, false)
HFQ4_XR(xrh_g2w8, 2, 8, 8, true)
HFQ4_XR(xrh_g4w8, 4, 8, 4, true)
HFQ4_XR(xrh_g7w8, 7, 8, 2, true)
HFQ4_XR(xrh_g7w16, 7, 16, 2, true)
// Half the rows in flight (fewer registers, more resident warps).
HFQ4_XR(xrhu_g2w8, 2, 8, 4, true)
HFQ4_XR(xrhu_g4w8, 4, 8, 2, true)
HFQ4_XR(xrhu_g7w8, 7, 8, 1, true)
HFQ4_XR(xrhu_g7w16, 7, 16, 1, true)

// x resident as int8 (per-group scale) with dp4a: two LOPs, two dp4a and a shift per 8 weights
// instead of the f16x2 dequant; the group's minimum still multiplies the exact f32 sum of x.
template <int GPW, int WPB, int U>
LAB_DEV void hfq4_gemv_xq(const u8* __restrict__ W, const float* __restrict__ x, const float* __restrict__ res,
                          float* __restrict__ y, int N, int K, int rt) {
  LAB_SHARED float part[WPB][64];
  const int lane = lab_lane(), warp = lab_warp();
  const long rb = (long)(K >> 8) * HFQ4_GROUP_BYTES;
  const int g0 = warp * GPW;
  const int row_base = lab_bid() * rt;
  const u8* wbase = W + (long)g0 * HFQ4_GROUP_BYTES + 8 + lane * 4;
  u32 q[U][GPW];
  lab_f2 hd[U][GPW];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    int row = row_base + u;
    if (row > N - 1) row = N - 1;
#pragma unroll
    for (int g = 0; g < GPW; ++g) {
      const u8* p = wbase + (long)row * rb + g * HFQ4_GROUP_BYTES;
      q[u][g] = *(const u32*)p;
      hd[u][g] = *(const lab_f2*)(p - 8 - lane * 4);
    }
  }
  hfq4_xq xq[GPW];
#pragma unroll
  for (int g = 0; g < GPW; ++g) {
    const lab_f4* xp = (const lab_f4*)(x + (g0 + g) * 256 + lane * 8);
    const lab_f4 a = xp[0], b = xp[1];
    float t[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    xq[g] = hfq4_prep_q8(t);
  }
  for (int r0 = 0; r0 < rt; r0 += U) {
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float a = 0.0f;
#pragma unroll
      for (int g = 0; g < GPW; ++g) {
        const int d = hfq4_dot8_q8(q[u][g], xq[g]);
        a += (hd[u][g].x * xq[g].scale16) * (float)d + hd[u][g].y * xq[g].qsum;
      }
      acc[u] = a;
    }
    if (r0 + U < rt) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        int row = row_base + r0 + U + u;
        if (row > N - 1) row = N - 1;
#pragma unroll
        for (int g = 0; g < GPW; ++g) {
          const u8* p = wbase + (long)row * rb + g * HFQ4_GROUP_BYTES;
          q[u][g] = *(const u32*)p;
          hd[u][g] = *(const lab_f2*)(p - 8 - lane * 4);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const float s = lab_warp_sum(acc[u]);
      if (lane == 0) part[warp][r0 + u] = s;
    }
  }
  hfq4_tile_store<WPB>(part, rt, row_base, N, res, y);
}

#define HFQ4_XQ(name, GPW, WPB, U)                                                                            \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* __restrict__ W, const float* __restrict__ x,            \
                                            float* __restrict__ y, int N, int K, int rt) {                    \
    hfq4_gemv_xq<GPW, WPB, U>(W, x, 0, y, N, K, rt);                                                          \
  }                                                                                                           \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_res_##name(const u8* __restrict__ W, const float* __restrict__ x,        \
                                                const float* __restrict__ r, float* __restrict__ y, int N, int K, int rt) { \
    hfq4_gemv_xq<GPW, WPB, U>(W, x, r, y, N, K, rt);                                                          \
  }
HFQ4_XQ(xq_g2w8, 2, 8, 8)
HFQ4_XQ(xq_g4w8, 4, 8, 4)
HFQ4_XQ(xq_g7w8, 7, 8, 4)
HFQ4_XQ(xq_g7w16, 7, 16, 2)
HFQ4_XQ(xqu_g2w8, 2, 8, 4)
HFQ4_XQ(xqu_g4w8, 4, 8, 2)
HFQ4_XQ(xqu_g7w8, 7, 8, 2)
HFQ4_XQ(xqu_g7w16, 7, 16, 1)

// xq with lean registers: lane i < U*GPW loads the header of (row i / GPW, group i % GPW) and the
// others get it by shuffle, so a lane holds one nibble word per group-row in flight instead of
// three registers; U rows reduce together by exchange (fewer shuffles than U warp sums).
// Blocks walk row tiles of `rt` rows: tile = block, block + nblk, ... With nblk = number of tiles
// each block does one tile; with nblk = resident blocks (persistent) x is prepared once per block
// and the tail is one small tile instead of one large block.
template <int GPW, int WPB, int U, bool ST = false>
LAB_DEV void hfq4_gemv_xs(const u8* __restrict__ W, const float* __restrict__ x, const float* __restrict__ res,
                          float* __restrict__ y, int N, int K, int rt, int nblk) {
  static_assert(U * GPW <= 32, "one header per lane");
  LAB_SHARED float part[WPB][64];
  const int lane = lab_lane(), warp = lab_warp();
  const long rb = (long)(K >> 8) * HFQ4_GROUP_BYTES;
  const int g0 = warp * GPW;
  int tile = lab_bid();
  if (tile * rt >= N) return;
  const u8* wbase = W + (long)g0 * HFQ4_GROUP_BYTES + 8 + lane * 4;
  const int hu = lane / GPW, hg = lane - hu * GPW;  // the header this lane loads
  const u8* hbase = W + (long)(g0 + hg) * HFQ4_GROUP_BYTES;
  u32 q[U][GPW];
  lab_f2 hd;
  auto load = [&](int row0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int row = row0 + u;
      if (row > N - 1) row = N - 1;
#pragma unroll
      for (int g = 0; g < GPW; ++g) {
        const u8* p = wbase + (long)row * rb + g * HFQ4_GROUP_BYTES;
        q[u][g] = ST ? lab_ld_stream_u32(p) : *(const u32*)p;
      }
    }
    int hrow = row0 + (hu < U ? hu : 0);
    if (hrow > N - 1) hrow = N - 1;
    hd = ST ? lab_ld_stream_f2(hbase + (long)hrow * rb) : *(const lab_f2*)(hbase + (long)hrow * rb);
  };
  load(tile * rt);
  hfq4_xq xq[GPW];
#pragma unroll
  for (int g = 0; g < GPW; ++g) {
    const lab_f4* xp = (const lab_f4*)(x + (g0 + g) * 256 + lane * 8);
    const lab_f4 a = xp[0], b = xp[1];
    float t[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    xq[g] = hfq4_prep_q8(t);
  }
  const int owner = lab_rows_owner<U>(lane);
  for (;;) {
    const int row_base = tile * rt;
    for (int r0 = 0; r0 < rt; r0 += U) {
      float acc[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float a = 0.0f;
#pragma unroll
        for (int g = 0; g < GPW; ++g) {
          const float sc = lab_shfl_idx(hd.x, u * GPW + g), mn = lab_shfl_idx(hd.y, u * GPW + g);
          const int d = hfq4_dot8_q8(q[u][g], xq[g]);
          a += (sc * xq[g].scale16) * (float)d + mn * xq[g].qsum;
        }
        acc[u] = a;
      }
      // Next rows' loads (possibly the next tile's) before this batch's reduction.
      if (r0 + U < rt) {
        load(row_base + r0 + U);
      } else if ((tile + nblk) * rt < N) {
        load((tile + nblk) * rt);
      }
      const float s = lab_warp_sum_rows<U>(acc, lane);
      if ((lane & (32 / U - 1)) == 0) part[warp][r0 + owner] = s;
    }
    hfq4_tile_store<WPB>(part, rt, row_base, N, res, y);
    tile += nblk;
    if (tile * rt >= N) break;
    lab_sync();  // part is rewritten by the next tile
  }
}

#define HFQ4_XS(name, GPW, WPB, U)                                                                            \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* __restrict__ W, const float* __restrict__ x,            \
                                            float* __restrict__ y, int N, int K, int rt, int nblk) {          \
    hfq4_gemv_xs<GPW, WPB, U>(W, x, 0, y, N, K, rt, nblk);                                                    \
  }                                                                                                           \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_res_##name(const u8* __restrict__ W, const float* __restrict__ x,        \
                                                const float* __restrict__ r, float* __restrict__ y, int N, int K, int rt, int nblk) { \
    hfq4_gemv_xs<GPW, WPB, U>(W, x, r, y, N, K, rt, nblk); \
  }
HFQ4_XS(xs_g2w8, 2, 8, 16)
HFQ4_XS(xs_g4w8, 4, 8, 8)
HFQ4_XS(xs_g7w8, 7, 8, 4)
HFQ4_XS(xs_g7w16, 7, 16, 4)
HFQ4_XS(xsu_g2w8, 2, 8, 8)
HFQ4_XS(xsu_g4w8, 4, 8, 4)
HFQ4_XS(xsu_g7w8, 7, 8, 2)
HFQ4_XS(xsu_g7w16, 7, 16, 2)

// xsu with streaming loads (L1 bypass, 256-byte L2 prefetch).
#define HFQ4_XST(name, GPW, WPB, U)                                                                           \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* __restrict__ W, const float* __restrict__ x,            \
                                            float* __restrict__ y, int N, int K, int rt, int nblk) {          \
    hfq4_gemv_xs<GPW, WPB, U, true>(W, x, 0, y, N, K, rt, nblk);                                              \
  }                                                                                                           \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_res_##name(const u8* __restrict__ W, const float* __restrict__ x,        \
                                                const float* __restrict__ r, float* __restrict__ y, int N, int K, int rt, int nblk) { \
    hfq4_gemv_xs<GPW, WPB, U, true>(W, x, r, y, N, K, rt, nblk); \
  }
HFQ4_XST(xst_g2w8, 2, 8, 8)
HFQ4_XST(xst_g4w8, 4, 8, 4)
HFQ4_XST(xst_g7w8, 7, 8, 2)
HFQ4_XST(xst_g7w16, 7, 16, 2)

// xs with 8-byte lane loads: a half-warp covers one group's 128 nibble bytes (which start 8 bytes
// into the 136-byte group, so 8-byte aligned), a warp-load two groups: half the load instructions
// of xs for the same bytes in flight. x is quantised per group over the half-warp.
template <int GPW, int WPB, int U, bool ST>
LAB_DEV void hfq4_gemv_x8(const u8* __restrict__ W, const float* __restrict__ x, const float* __restrict__ res,
                          float* __restrict__ y, int N, int K, int rt, int nblk) {
  static_assert(GPW % 2 == 0 && U * GPW <= 32, "pairs of groups, one header per lane");
  constexpr int P = GPW / 2;
  LAB_SHARED float part[WPB][64];
  const int lane = lab_lane(), warp = lab_warp();
  const int half = lane >> 4, sub = lane & 15;
  const long rb = (long)(K >> 8) * HFQ4_GROUP_BYTES;
  const int g0 = warp * GPW;
  int tile = lab_bid();
  if (tile * rt >= N) return;
  const u8* wbase = W + (long)(g0 + half) * HFQ4_GROUP_BYTES + 8 + sub * 8;
  const int hu = lane / GPW, hg = lane - hu * GPW;
  const u8* hbase = W + (long)(g0 + hg) * HFQ4_GROUP_BYTES;
  lab_u2 q[U][P];
  lab_f2 hd;
  auto load = [&](int row0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int row = row0 + u;
      if (row > N - 1) row = N - 1;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const u8* a = wbase + (long)row * rb + 2 * p * HFQ4_GROUP_BYTES;
        q[u][p] = ST ? lab_ld_stream_u2(a) : *(const lab_u2*)a;
      }
    }
    int hrow = row0 + (hu < U ? hu : 0);
    if (hrow > N - 1) hrow = N - 1;
    hd = ST ? lab_ld_stream_f2(hbase + (long)hrow * rb) : *(const lab_f2*)(hbase + (long)hrow * rb);
  };
  load(tile * rt);
  hfq4_xq xa[P], xb[P];
  float qs[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const lab_f4* xp = (const lab_f4*)(x + (g0 + 2 * p + half) * 256 + sub * 16);
    const lab_f4 a = xp[0], b = xp[1], c = xp[2], d = xp[3];
    float t0[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    float t1[8] = {c.x, c.y, c.z, c.w, d.x, d.y, d.z, d.w};
    const float m0 = hfq4_absmax8(t0), m1 = hfq4_absmax8(t1);
    float m = m0 > m1 ? m0 : m1;
#pragma unroll
    for (int k = 8; k >= 1; k >>= 1) {
      const float o = lab_shfl_xor(m, k);
      m = m > o ? m : o;
    }
    xa[p] = hfq4_q8_with_max(t0, m);
    xb[p] = hfq4_q8_with_max(t1, m);
    qs[p] = xa[p].qsum + xb[p].qsum;
  }
  const int owner = lab_rows_owner<U>(lane);
  for (;;) {
    const int row_base = tile * rt;
    for (int r0 = 0; r0 < rt; r0 += U) {
      float acc[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float a = 0.0f;
#pragma unroll
        for (int p = 0; p < P; ++p) {
          const int h = u * GPW + 2 * p + half;
          const float sc = lab_shfl_idx(hd.x, h), mn = lab_shfl_idx(hd.y, h);
          const int d = hfq4_dot8_q8(q[u][p].y, xb[p]) + hfq4_dot8_q8(q[u][p].x, xa[p]);
          a += (sc * xa[p].scale16) * (float)d + mn * qs[p];
        }
        acc[u] = a;
      }
      if (r0 + U < rt) {
        load(row_base + r0 + U);
      } else if ((tile + nblk) * rt < N) {
        load((tile + nblk) * rt);
      }
      const float s = lab_warp_sum_rows<U>(acc, lane);
      if ((lane & (32 / U - 1)) == 0) part[warp][r0 + owner] = s;
    }
    hfq4_tile_store<WPB>(part, rt, row_base, N, res, y);
    tile += nblk;
    if (tile * rt >= N) break;
    lab_sync();
  }
}

#define HFQ4_X8(name, GPW, WPB, U, ST)                                                                        \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_##name(const u8* __restrict__ W, const float* __restrict__ x,            \
                                            float* __restrict__ y, int N, int K, int rt, int nblk) {          \
    hfq4_gemv_x8<GPW, WPB, U, ST>(W, x, 0, y, N, K, rt, nblk);                                                \
  }                                                                                                           \
  LAB_KERNEL(WPB * 32) gemv_hfq4g256_res_##name(const u8* __restrict__ W, const float* __restrict__ x,        \
                                                const float* __restrict__ r, float* __restrict__ y, int N, int K, int rt, int nblk) { \
    hfq4_gemv_x8<GPW, WPB, U, ST>(W, x, r, y, N, K, rt, nblk); \
  }
HFQ4_X8(x8_g2w8, 2, 8, 8, false)
HFQ4_X8(x8_g4w8, 4, 8, 4, false)
HFQ4_X8(x8_g4w14, 4, 14, 4, false)
HFQ4_X8(x8_g8w14, 8, 14, 2, false)
HFQ4_X8(x8s_g2w8, 2, 8, 8, true)
HFQ4_X8(x8s_g4w8, 4, 8, 4, true)
HFQ4_X8(x8s_g4w14, 4, 14, 4, true)
HFQ4_X8(x8s_g8w14, 8, 14, 2, true)
