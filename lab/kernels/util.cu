// Measurement helpers: a 16-byte copy (the bandwidth ceiling the lab reports against), an empty
// kernel (the timing floor) and a spin kernel that holds the stream while the host queues work.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif

LAB_KERNEL(256) lab_copy_u4(const lab_u4* __restrict__ src, lab_u4* __restrict__ dst, long n, long stride) {
  for (long i = (long)lab_bid() * 256 + lab_tid(); i < n; i += stride) dst[i] = src[i];
}
LAB_KERNEL(32) lab_noop(int unused) {}
LAB_KERNEL(32) lab_spin(unsigned long long ns) {
  const u64 t0 = lab_globaltimer();
  while (lab_globaltimer() - t0 < ns) {
  }
}
