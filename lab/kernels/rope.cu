// Rotary position embedding (NeoX halves) for one decode token: for every head h and i < D/2,
// (a, b) = (v[i], v[i + D/2]) rotates by pos * theta^(-2i/D). q and k are [heads][D] f32,
// written out of place. `exact`: angles by sincos; `cache`: cos/sin read from a [D/2] table row.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif

LAB_KERNEL(128) rope_exact(const float* __restrict__ in, float* __restrict__ out, int heads, int D, int pos, float log2_theta) {
  const int h = lab_bid();
  const int half = D / 2;
  for (int i = lab_tid(); i < half; i += 128) {
    const float inv_freq = lab_exp2(-(2.0f * (float)i / (float)D) * log2_theta);
    float s, c;
    lab_sincos((float)pos * inv_freq, &s, &c);
    const float a = in[h * D + i], b = in[h * D + i + half];
    out[h * D + i] = a * c - b * s;
    out[h * D + i + half] = b * c + a * s;
  }
}

LAB_KERNEL(128) rope_cache(const float* __restrict__ in, float* __restrict__ out, const float* __restrict__ cs, int heads, int D, int pos, float unused) {
  const int h = lab_bid();
  const int half = D / 2;
  for (int i = lab_tid(); i < half; i += 128) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float a = in[h * D + i], b = in[h * D + i + half];
    out[h * D + i] = a * c - b * s;
    out[h * D + i + half] = b * c + a * s;
  }
}
