// Single-query decode attention over an f16 KV cache (split over the sequence, "flash decoding").
// q: [H][128] f32; K, V: [S][Hkv][128] f16; o: [H][128] f32; GQA: head h reads kv head h / (H/Hkv).
// attn_decode_split: grid (H, NSPLIT), 4 warps; each warp walks positions, one per step, with an
// online softmax; the block writes (m, l, acc[128]) for its slice. attn_decode_combine merges slices.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif
#include "hfq4_common.h"

#define ATT_D 128

LAB_KERNEL(128) attn_decode_split(const float* __restrict__ q, const u16* __restrict__ Kc, const u16* __restrict__ Vc,
                                  float* __restrict__ part, int H, int Hkv, int S, int chunk, int nsplit, float scale) {
  LAB_SHARED float sm[4], sl[4], sacc[4][ATT_D];
  const int h = lab_bid(), split = lab_bid_y();
  const int lane = lab_lane(), warp = lab_warp();
  const int kvh = h / (H / Hkv);
  const lab_f4 qv = *(const lab_f4*)(q + h * ATT_D + lane * 4);
  const int p0 = split * chunk;
  const int p1 = (p0 + chunk < S) ? p0 + chunk : S;
  float m = -1e30f, l = 0.0f, a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  for (int p = p0 + warp; p < p1; p += 4) {
    const long base = ((long)p * Hkv + kvh) * ATT_D + lane * 4;
    const lab_u2 kk = *(const lab_u2*)(Kc + base);
    const lab_u2 vv = *(const lab_u2*)(Vc + base);
    float s = qv.x * lab_h2f((u16)(kk.x & 0xFFFFu)) + qv.y * lab_h2f((u16)(kk.x >> 16)) +
              qv.z * lab_h2f((u16)(kk.y & 0xFFFFu)) + qv.w * lab_h2f((u16)(kk.y >> 16));
    s = lab_warp_sum(s) * scale;
    const float mn = s > m ? s : m;
    const float corr = lab_exp(m - mn), e = lab_exp(s - mn);
    l = l * corr + e;
    a0 = a0 * corr + e * lab_h2f((u16)(vv.x & 0xFFFFu));
    a1 = a1 * corr + e * lab_h2f((u16)(vv.x >> 16));
    a2 = a2 * corr + e * lab_h2f((u16)(vv.y & 0xFFFFu));
    a3 = a3 * corr + e * lab_h2f((u16)(vv.y >> 16));
    m = mn;
  }
  if (lane == 0) { sm[warp] = m; sl[warp] = l; }
  sacc[warp][lane * 4] = a0; sacc[warp][lane * 4 + 1] = a1; sacc[warp][lane * 4 + 2] = a2; sacc[warp][lane * 4 + 3] = a3;
  lab_sync();
  const int d = lab_tid();  // 128 threads = 128 dims
  float M = sm[0];
  for (int w = 1; w < 4; ++w) M = sm[w] > M ? sm[w] : M;
  float L = 0.0f, A = 0.0f;
  for (int w = 0; w < 4; ++w) {
    const float f = lab_exp(sm[w] - M);
    L += sl[w] * f;
    A += sacc[w][d] * f;
  }
  float* out = part + ((long)h * nsplit + split) * (ATT_D + 2);
  out[2 + d] = A;
  if (d == 0) { out[0] = M; out[1] = L; }
}

LAB_KERNEL(128) attn_decode_combine(const float* __restrict__ part, float* __restrict__ o, int nsplit) {
  const int h = lab_bid(), d = lab_tid();
  const float* ph = part + (long)h * nsplit * (ATT_D + 2);
  float M = -1e30f;
  for (int s = 0; s < nsplit; ++s) M = ph[s * (ATT_D + 2)] > M ? ph[s * (ATT_D + 2)] : M;
  float L = 0.0f, A = 0.0f;
  for (int s = 0; s < nsplit; ++s) {
    const float f = lab_exp(ph[s * (ATT_D + 2)] - M);
    L += ph[s * (ATT_D + 2) + 1] * f;
    A += ph[s * (ATT_D + 2) + 2 + d] * f;
  }
  o[h * ATT_D + d] = A / L;
}
