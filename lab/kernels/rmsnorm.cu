// RMSNorm over rows of D floats: y = x * rsqrt(mean(x^2) + eps) * w. One block per row.
// v1: scalar loads; v4: 16-byte loads with the row kept in registers between the two passes.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif
#include "hfq4_common.h"

template <int T>
LAB_DEV float block_sum(float v, float* sh) {
  v = lab_warp_sum(v);
  const int lane = lab_lane(), warp = lab_warp();
  if (lane == 0) sh[warp] = v;
  lab_sync();
  float t = lab_tid() < T / 32 ? sh[lab_tid()] : 0.0f;
  if (warp == 0) t = lab_warp_sum(t);
  if (lab_tid() == 0) sh[0] = t;
  lab_sync();
  return sh[0];
}

LAB_KERNEL(256) rmsnorm_v1(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int D, float eps) {
  LAB_SHARED float sh[32];
  const float* xr = x + (long)lab_bid() * D;
  float* yr = y + (long)lab_bid() * D;
  float ss = 0.0f;
  for (int i = lab_tid(); i < D; i += 256) ss += xr[i] * xr[i];
  const float inv = lab_rsqrt(block_sum<256>(ss, sh) / (float)D + eps);
  for (int i = lab_tid(); i < D; i += 256) yr[i] = xr[i] * inv * w[i];
}

// D must be a multiple of 4 and at most 256*4*8.
LAB_KERNEL(256) rmsnorm_v4(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int D, float eps) {
  LAB_SHARED float sh[32];
  const lab_f4* xr = (const lab_f4*)(x + (long)lab_bid() * D);
  lab_f4* yr = (lab_f4*)(y + (long)lab_bid() * D);
  const lab_f4* wr = (const lab_f4*)w;
  const int n4 = D / 4;
  lab_f4 v[8];
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int i = lab_tid() + j * 256;
    if (i < n4) {
      v[j] = xr[i];
      ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
  }
  const float inv = lab_rsqrt(block_sum<256>(ss, sh) / (float)D + eps);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int i = lab_tid() + j * 256;
    if (i < n4) {
      const lab_f4 ww = wr[i];
      lab_f4 o;
      o.x = v[j].x * inv * ww.x; o.y = v[j].y * inv * ww.y; o.z = v[j].z * inv * ww.z; o.w = v[j].w * inv * ww.w;
      yr[i] = o;
    }
  }
}
