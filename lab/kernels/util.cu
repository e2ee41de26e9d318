// Measurement helpers: a 16-byte copy (the bandwidth ceiling the lab reports against), an empty
// kernel (the timing floor) and a spin kernel that holds the stream while the host queues work.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif

LAB_KERNEL(256) lab_copy_u4(const lab_u4* __restrict__ src, lab_u4* __restrict__ dst, long n, long stride) {
  for (long i = (long)lab_bid() * 256 + lab_tid(); i < n; i += stride) dst[i] = src[i];
}
// Read-only ceilings (`--read-ceilings`): every 16-byte word of a buffer read once, summed
// (wrapping) into one checksum the host compares with its own sum, so the reads cannot be elided.
// Grid-stride read with U loads in flight per thread, plain (`ld.global.nc`) or streaming loads.
template <int U, bool ST>
LAB_DEV void lab_read_gs(const lab_u4* __restrict__ src, long n, long stride, u32* __restrict__ sum) {
  u32 acc = 0;
  long i = (long)lab_bid() * 256 + lab_tid();
  for (; i + (U - 1) * stride < n; i += U * stride) {
    lab_u4 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = ST ? lab_ld_stream_u4(src + i + j * stride) : lab_ld_nc_u4(src + i + j * stride);
#pragma unroll
    for (int j = 0; j < U; ++j) acc += v[j].x + v[j].y + v[j].z + v[j].w;
  }
  for (; i < n; i += stride) {
    const lab_u4 a = lab_ld_stream_u4(src + i);
    acc += a.x + a.y + a.z + a.w;
  }
  for (int m = 16; m > 0; m >>= 1) acc += lab_f2u(lab_shfl_xor(lab_u2f(acc), m));
  if (lab_lane() == 0) lab_atomic_add_u32(sum, acc);
}
LAB_KERNEL(256) lab_read_gs2p(const lab_u4* __restrict__ s, long n, long st, u32* __restrict__ o) { lab_read_gs<2, false>(s, n, st, o); }
LAB_KERNEL(256) lab_read_gs4p(const lab_u4* __restrict__ s, long n, long st, u32* __restrict__ o) { lab_read_gs<4, false>(s, n, st, o); }
LAB_KERNEL(256) lab_read_gs8p(const lab_u4* __restrict__ s, long n, long st, u32* __restrict__ o) { lab_read_gs<8, false>(s, n, st, o); }
LAB_KERNEL(256) lab_read_gs4s(const lab_u4* __restrict__ s, long n, long st, u32* __restrict__ o) { lab_read_gs<4, true>(s, n, st, o); }
LAB_KERNEL(256) lab_read_gs8s(const lab_u4* __restrict__ s, long n, long st, u32* __restrict__ o) { lab_read_gs<8, true>(s, n, st, o); }

// One-shot read: U loads per thread, all issued before any is used, one tile of 256*U words per
// block and as many blocks as tiles (the hardware balances them; no grid-stride tail).
template <int U>
LAB_DEV void lab_read_oneshot(const lab_u4* __restrict__ src, long n, u32* __restrict__ sum) {
  const long base = (long)lab_bid() * 256 * U + lab_tid();
  lab_u4 v[U];
#pragma unroll
  for (int j = 0; j < U; ++j) {
    const long i = base + (long)j * 256;
    v[j] = i < n ? lab_ld_stream_u4(src + i) : lab_u4{0, 0, 0, 0};
  }
  u32 acc = 0;
#pragma unroll
  for (int j = 0; j < U; ++j) acc += v[j].x + v[j].y + v[j].z + v[j].w;
  for (int m = 16; m > 0; m >>= 1) acc += lab_f2u(lab_shfl_xor(lab_u2f(acc), m));
  if (lab_lane() == 0) lab_atomic_add_u32(sum, acc);
}
LAB_KERNEL(256) lab_read_os8(const lab_u4* __restrict__ src, long n, long unused, u32* __restrict__ sum) {
  lab_read_oneshot<8>(src, n, sum);
}
LAB_KERNEL(256) lab_read_os16(const lab_u4* __restrict__ src, long n, long unused, u32* __restrict__ sum) {
  lab_read_oneshot<16>(src, n, sum);
}
LAB_KERNEL(32) lab_noop(int unused) {}
LAB_KERNEL(32) lab_spin(unsigned long long ns) {
  const u64 t0 = lab_globaltimer();
  while (lab_globaltimer() - t0 < ns) {
  }
}
