// HFQ4G256 helpers shared by the 4-bit kernels (included after a prelude).
// Layout per group of 256 weights: f32 scale, f32 min, 128 bytes of nibbles, low nibble first:
// byte b holds weight 2b (bits 0..3) and weight 2b+1 (bits 4..7); w = q*scale + min.
// A row of K weights is K/256 groups, 136 bytes each, rows back to back.
#pragma once
#define HFQ4_GROUP_BYTES 136

// sum_k q_k * x_k for the 8 weights packed in v, in f32 (exact dequant through 2^23 + q).
LAB_DEV float hfq4_dot8_f32(u32 v, const float* x) {
  const u32 lo = v & 0x0F0F0F0Fu, hi = (v >> 4) & 0x0F0F0F0Fu;
  const float M = 8388608.0f;
  float a = (lab_byte_magic(lo, 0) - M) * x[0];
  float b = (lab_byte_magic(hi, 0) - M) * x[1];
  a += (lab_byte_magic(lo, 1) - M) * x[2];
  b += (lab_byte_magic(hi, 1) - M) * x[3];
  a += (lab_byte_magic(lo, 2) - M) * x[4];
  b += (lab_byte_magic(hi, 2) - M) * x[5];
  a += (lab_byte_magic(lo, 3) - M) * x[6];
  b += (lab_byte_magic(hi, 3) - M) * x[7];
  return a + b;
}

// x for 8 weights as f16x2 pairs in the order hfq4_dot8_h2 wants: (x0,x4) (x1/16,x5/16) (x2,x6) (x3/16,x7/16).
struct hfq4_xh { u32 a, b, c, d; };
LAB_DEV hfq4_xh hfq4_prep_h2(const float* x) {
  hfq4_xh r;
  r.a = lab_pack_h2(x[0], x[4]);
  r.b = lab_pack_h2(x[1] * 0.0625f, x[5] * 0.0625f);
  r.c = lab_pack_h2(x[2], x[6]);
  r.d = lab_pack_h2(x[3] * 0.0625f, x[7] * 0.0625f);
  return r;
}
// Same dot with f16x2 arithmetic: nibbles are placed in the mantissa of 1024.0h (0x6400) so a
// LOP and a subtraction dequantize two weights; high nibbles stay scaled by 16 (x carries 1/16).
LAB_DEV float hfq4_dot8_h2(u32 v, hfq4_xh xh) {
  const u32 magic = 0x64006400u;
  const u32 v8 = v >> 8;
  u32 qa = lab_hsub2(lab_and_or(v, 0x000F000Fu, magic), magic);
  u32 qb = lab_hsub2(lab_and_or(v, 0x00F000F0u, magic), magic);
  u32 qc = lab_hsub2(lab_and_or(v8, 0x000F000Fu, magic), magic);
  u32 qd = lab_hsub2(lab_and_or(v8, 0x00F000F0u, magic), magic);
  u32 d = lab_hmul2(qa, xh.a);
  d = lab_hfma2(qb, xh.b, d);
  d = lab_hfma2(qc, xh.c, d);
  d = lab_hfma2(qd, xh.d, d);
  return lab_h2_sum(d);
}
// x quantised to int8 per 256-group (scale = max|x| / 127 over the group, shared by the warp):
// even and odd weights' bytes packed to line up with the low and high nibbles of a u32.
struct hfq4_xq { u32 even, odd; float scale16, qsum; };
LAB_DEV float lab_warp_max(float v);
LAB_DEV float hfq4_absmax8(const float* x) {
  float m = 0.0f;
  for (int i = 0; i < 8; ++i) m = m > (x[i] < 0 ? -x[i] : x[i]) ? m : (x[i] < 0 ? -x[i] : x[i]);
  return m;
}
// 8 values of x quantised with the group's absolute maximum `m` (already reduced over the group).
LAB_DEV hfq4_xq hfq4_q8_with_max(const float* x, float m) {
  const float scale = m > 0.0f ? m / 127.0f : 1.0f;
  const float inv = 1.0f / scale;
  u32 e = 0, o = 0;
  int sum = 0;
  for (int i = 0; i < 4; ++i) {
    const int a = lab_round_i(x[2 * i] * inv), b = lab_round_i(x[2 * i + 1] * inv);
    sum += a + b;
    e |= ((u32)a & 0xFFu) << (8 * i);
    o |= ((u32)b & 0xFFu) << (8 * i);
  }
  hfq4_xq r;
  r.even = e; r.odd = o; r.scale16 = scale * 0.0625f;
  // The minimum multiplies the sum of the *quantised* x, so w*x errors follow w, not q.
  r.qsum = scale * (float)sum;
  return r;
}
LAB_DEV hfq4_xq hfq4_prep_q8(const float* x) { return hfq4_q8_with_max(x, lab_warp_max(hfq4_absmax8(x))); }
// 16 * sum_k q_k * xq_k as an integer: low nibbles against even x bytes (x16 by the shift),
// high nibbles in place (their bytes are 16*q) against odd x bytes.
LAB_DEV int hfq4_dot8_q8(u32 v, hfq4_xq xq) {
  const int lo = lab_dp4a_us(v & 0x0F0F0F0Fu, xq.even, 0);
  return lab_dp4a_us(v & 0xF0F0F0F0u, xq.odd, lo << 4);
}
// Reduce U per-lane values (one per row) across the warp with exchanges: 2U-1+... shuffles
// instead of 5U. Afterwards every lane holds the total of row `lab_rows_owner<U>(lane)`.
template <int U>
LAB_DEV float lab_warp_sum_rows(float* v, int lane) {
  int bit = 16;
#pragma unroll
  for (int h = U / 2; h >= 1; h /= 2) {
    const bool up = (lane & bit) != 0;
#pragma unroll
    for (int i = 0; i < h; ++i) {
      const float send = up ? v[i] : v[i + h];
      const float keep = up ? v[i + h] : v[i];
      v[i] = keep + lab_shfl_xor(send, bit);
    }
    bit >>= 1;
  }
  float t = v[0];
  for (; bit >= 1; bit >>= 1) t += lab_shfl_xor(t, bit);
  return t;
}
template <int U>
LAB_DEV int lab_rows_owner(int lane) {
  int row = 0, bit = 16;
#pragma unroll
  for (int h = U / 2; h >= 1; h /= 2) {
    if (lane & bit) row += h;
    bit >>= 1;
  }
  return row;
}
LAB_DEV float lab_warp_sum(float v) {
  v += lab_shfl_xor(v, 16);
  v += lab_shfl_xor(v, 8);
  v += lab_shfl_xor(v, 4);
  v += lab_shfl_xor(v, 2);
  v += lab_shfl_xor(v, 1);
  return v;
}
LAB_DEV float lab_warp_max(float v) {
  for (int m = 16; m >= 1; m >>= 1) { float o = lab_shfl_xor(v, m); v = v > o ? v : o; }
  return v;
}
