// sm_90 only: HFQ4G256 GEMV fed by the bulk-copy engine (cp.async.bulk, completing on an
// mbarrier). A block of WPB warps owns ROWS = WPB*R consecutive rows; each stage copies C groups
// of every row (136*C bytes, 16-byte aligned because C is even) into shared memory, NS stages deep,
// while the warps dequantize the previous stage from shared memory with f16x2 arithmetic.
#ifndef LAB_PRELUDE
#include "lab_cuda.h"
#endif
#include "hfq4_common.h"

LAB_DEV u32 smem_addr(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
LAB_DEV void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
LAB_DEV void mbar_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
LAB_DEV void mbar_wait(u64* bar, u32 parity) {
  asm volatile(
      "{\n .reg .pred p;\n LAB_WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra LAB_WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
LAB_DEV void bulk_g2s(void* dst, const void* src, u32 bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

template <int R, int WPB, int C, int NS>
LAB_DEV void hfq4_gemv_bulk(const u8* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int N, int K) {
  constexpr int ROWS = WPB * R;
  constexpr int SB = ROWS * C * HFQ4_GROUP_BYTES;  // bytes per stage
  __shared__ __attribute__((aligned(128))) u8 buf[NS][SB];
  __shared__ __attribute__((aligned(8))) u64 bars[NS];
  const int lane = lab_lane(), warp = lab_warp(), t = lab_tid();
  const int G = K >> 8;
  const long rb = (long)G * HFQ4_GROUP_BYTES;
  const int row_base = lab_bid() * ROWS;
  const int nchunks = (G + C - 1) / C;
  if (t == 0) {
    for (int s = 0; s < NS; ++s) mbar_init(&bars[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  lab_sync();
  auto issue = [&](int chunk) {
    const int s = chunk % NS;
    const int g0 = chunk * C;
    const int ng = (G - g0) < C ? (G - g0) : C;
    const u32 bytes = (u32)(ng * HFQ4_GROUP_BYTES);
    mbar_expect_tx(&bars[s], bytes * ROWS);
    for (int r = 0; r < ROWS; ++r) {
      int row = row_base + r;
      if (row > N - 1) row = N - 1;
      bulk_g2s(&buf[s][r * C * HFQ4_GROUP_BYTES], W + (long)row * rb + (long)g0 * HFQ4_GROUP_BYTES, bytes, &bars[s]);
    }
  };
  if (t == 0) {
    for (int c = 0; c < NS && c < nchunks; ++c) issue(c);
  }
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (int c = 0; c < nchunks; ++c) {
    const int s = c % NS;
    const int g0 = c * C;
    const int ng = (G - g0) < C ? (G - g0) : C;
    mbar_wait(&bars[s], (u32)((c / NS) & 1));
#pragma unroll 2
    for (int gi = 0; gi < ng; ++gi) {
      const int g = g0 + gi;
      const lab_f4* xp = (const lab_f4*)(x + g * 256 + lane * 8);
      lab_f4 xa = xp[0], xb = xp[1];
      float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
      const float xs = ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
      const hfq4_xh xh = hfq4_prep_h2(xv);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const u8* gp = &buf[s][((warp * R + r) * C + gi) * HFQ4_GROUP_BYTES];
        const lab_f2 hd = *(const lab_f2*)gp;
        const u32 v = *(const u32*)(gp + 8 + lane * 4);
        acc[r] += hd.x * hfq4_dot8_h2(v, xh) + hd.y * xs;
      }
    }
    lab_sync();  // every warp is done with stage s before it is refilled
    if (t == 0 && c + NS < nchunks) issue(c + NS);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = lab_warp_sum(acc[r]);
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = row_base + warp * R + r;
      if (row < N) y[row] = acc[r];
    }
  }
}

LAB_KERNEL(128) gemv_hfq4g256_bulk_r2(const u8* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int N, int K) {
  hfq4_gemv_bulk<2, 4, 8, 3>(W, x, y, N, K);
}
LAB_KERNEL(256) gemv_hfq4g256_bulk_r1(const u8* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int N, int K) {
  hfq4_gemv_bulk<1, 8, 4, 4>(W, x, y, N, K);
}
