// HIP prelude for the lab kernels: no HIP headers (-nogpuinc). Only clang builtins, so the twins
// compile for any gfx target with a bare clang. Logical warps are 32 lanes on every target; on
// wave64 chips (gfx90a, gfx942) a wave holds two of them and shuffles stay inside each half.
#pragma once
#define LAB_PRELUDE 1
#define LAB_HIP 1
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define LAB_DEV __attribute__((device)) inline __attribute__((always_inline))
#define LAB_KERNEL(threads) extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, threads))) void
#define LAB_SHARED __attribute__((shared))
#define __restrict__ __restrict

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef unsigned char u8;
struct __attribute__((aligned(16))) lab_u4 { u32 x, y, z, w; };
struct __attribute__((aligned(8))) lab_u2 { u32 x, y; };
struct __attribute__((aligned(16))) lab_f4 { float x, y, z, w; };
struct __attribute__((aligned(8))) lab_f2 { float x, y; };
typedef _Float16 lab_h2v __attribute__((ext_vector_type(2)));

LAB_DEV int lab_tid() { return (int)__builtin_amdgcn_workitem_id_x(); }
LAB_DEV int lab_bid() { return (int)__builtin_amdgcn_workgroup_id_x(); }
LAB_DEV int lab_bid_y() { return (int)__builtin_amdgcn_workgroup_id_y(); }
LAB_DEV int lab_lane() { return lab_tid() & 31; }
LAB_DEV int lab_warp() { return lab_tid() >> 5; }
LAB_DEV void lab_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
LAB_DEV float lab_shfl_xor(float v, int m) {
  int self = (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  int src = self ^ m;
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(src << 2, __builtin_bit_cast(int, v)));
}
LAB_DEV float lab_shfl_idx(float v, int src) {
  int self = (int)__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute(((self & ~31) | src) << 2, __builtin_bit_cast(int, v)));
}
LAB_DEV float lab_u2f(u32 u) { return __builtin_bit_cast(float, u); }
LAB_DEV u32 lab_f2u(float f) { return __builtin_bit_cast(u32, f); }
LAB_DEV float lab_byte_magic(u32 a, int k) { return __builtin_bit_cast(float, ((a >> (8 * k)) & 0xFFu) | 0x4B000000u); }
LAB_DEV float lab_rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
LAB_DEV float lab_exp(float x) { return __builtin_expf(x); }
LAB_DEV float lab_exp2(float x) { return __builtin_exp2f(x); }
LAB_DEV float lab_log2(float x) { return __builtin_log2f(x); }
LAB_DEV void lab_sincos(float a, float* s, float* c) { *s = __builtin_sinf(a); *c = __builtin_cosf(a); }
LAB_DEV float lab_h2f(u16 h) { return (float)__builtin_bit_cast(_Float16, h); }
LAB_DEV u32 lab_pack_h2(float lo, float hi) { lab_h2v v = {(_Float16)lo, (_Float16)hi}; return __builtin_bit_cast(u32, v); }
LAB_DEV u32 lab_hsub2(u32 a, u32 b) { return __builtin_bit_cast(u32, __builtin_bit_cast(lab_h2v, a) - __builtin_bit_cast(lab_h2v, b)); }
LAB_DEV u32 lab_hmul2(u32 a, u32 b) { return __builtin_bit_cast(u32, __builtin_bit_cast(lab_h2v, a) * __builtin_bit_cast(lab_h2v, b)); }
LAB_DEV u32 lab_hfma2(u32 a, u32 b, u32 c) {
  return __builtin_bit_cast(u32, __builtin_elementwise_fma(__builtin_bit_cast(lab_h2v, a), __builtin_bit_cast(lab_h2v, b), __builtin_bit_cast(lab_h2v, c)));
}
LAB_DEV float lab_h2_sum(u32 h) { lab_h2v v = __builtin_bit_cast(lab_h2v, h); return (float)v.x + (float)v.y; }
LAB_DEV u32 lab_and_or(u32 a, u32 mask, u32 bits) { return (a & mask) | bits; }
LAB_DEV int lab_dp4a_us(u32 a, u32 b, int c) {
  for (int i = 0; i < 4; ++i) c += (int)((a >> (8 * i)) & 0xFFu) * (int)(signed char)((b >> (8 * i)) & 0xFFu);
  return c;
}
LAB_DEV int lab_round_i(float f) { return (int)__builtin_rintf(f); }
LAB_DEV u32 lab_ld_stream_u32(const void* p) { return __builtin_nontemporal_load((const u32*)p); }
LAB_DEV lab_f2 lab_ld_stream_f2(const void* p) { return *(const lab_f2*)p; }
LAB_DEV lab_u2 lab_ld_stream_u2(const void* p) { return *(const lab_u2*)p; }
LAB_DEV lab_u4 lab_ld_stream_u4(const void* p) { return *(const lab_u4*)p; }
LAB_DEV lab_u4 lab_ld_nc_u4(const lab_u4* p) { return *p; }
LAB_DEV u32 lab_atomic_add_u32(u32* p, u32 v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
LAB_DEV u64 lab_globaltimer() { return __builtin_readcyclecounter(); }
