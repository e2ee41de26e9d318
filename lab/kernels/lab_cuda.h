// CUDA prelude for the lab kernels. Header-free on purpose: NVRTC compiles it without the
// CUDA toolkit headers, so conversions that cuda_fp16.h would give are written in PTX here.
#pragma once
#define LAB_PRELUDE 1
#define LAB_CUDA 1
#define LAB_DEV __device__ __forceinline__
#define LAB_KERNEL(threads) extern "C" __global__ void __launch_bounds__(threads)
#define LAB_SHARED __shared__

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;
typedef unsigned char u8;
struct __attribute__((aligned(16))) lab_u4 { u32 x, y, z, w; };
struct __attribute__((aligned(8))) lab_u2 { u32 x, y; };
struct __attribute__((aligned(16))) lab_f4 { float x, y, z, w; };
struct __attribute__((aligned(8))) lab_f2 { float x, y; };

LAB_DEV int lab_tid() { return (int)threadIdx.x; }
LAB_DEV int lab_bid() { return (int)blockIdx.x; }
LAB_DEV int lab_bid_y() { return (int)blockIdx.y; }
LAB_DEV int lab_lane() { return (int)(threadIdx.x & 31u); }
LAB_DEV int lab_warp() { return (int)(threadIdx.x >> 5); }
LAB_DEV void lab_sync() { __syncthreads(); }
LAB_DEV float lab_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
LAB_DEV float lab_shfl_idx(float v, int src) { return __shfl_sync(0xffffffffu, v, src); }
LAB_DEV float lab_u2f(u32 u) { return __uint_as_float(u); }
LAB_DEV u32 lab_f2u(float f) { return __float_as_uint(f); }
// 2^23 + byte k of a, as a float (exact): subtract 2^23 to get the byte's value.
LAB_DEV float lab_byte_magic(u32 a, int k) { return __uint_as_float(__byte_perm(a, 0x4B000000u, 0x7650u | (u32)k)); }
LAB_DEV float lab_rsqrt(float x) { return rsqrtf(x); }
LAB_DEV float lab_exp(float x) { return __expf(x); }
LAB_DEV float lab_exp2(float x) { return exp2f(x); }
LAB_DEV float lab_log2(float x) { return log2f(x); }
LAB_DEV void lab_sincos(float a, float* s, float* c) { sincosf(a, s, c); }
LAB_DEV float lab_h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
// Pack two floats into f16x2 (lo in bits 0..15).
LAB_DEV u32 lab_pack_h2(float lo, float hi) { u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
LAB_DEV u32 lab_hsub2(u32 a, u32 b) { u32 r; asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
LAB_DEV u32 lab_hmul2(u32 a, u32 b) { u32 r; asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
LAB_DEV u32 lab_hfma2(u32 a, u32 b, u32 c) { u32 r; asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
LAB_DEV float lab_h2_sum(u32 h) {
  u16 lo, hi;
  asm("mov.b32 {%0, %1}, %2;" : "=h"(lo), "=h"(hi) : "r"(h));
  return lab_h2f(lo) + lab_h2f(hi);
}
// (a & mask) | bits in one LOP3 (the compiler splits it in two when both are immediates).
LAB_DEV u32 lab_and_or(u32 a, u32 mask, u32 bits) { u32 r; asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "r"(mask), "r"(bits)); return r; }
// sum of 4 (unsigned byte of a) * (signed byte of b) + c.
LAB_DEV int lab_dp4a_us(u32 a, u32 b, int c) { int r; asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
LAB_DEV int lab_round_i(float f) { return __float2int_rn(f); }
// Streaming loads of data read once: no L1 allocation, and a 256-byte L2 prefetch so each DRAM
// request brings a whole burst for the neighbouring lanes' next loads.
LAB_DEV u32 lab_ld_stream_u32(const void* p) { u32 r; asm volatile("ld.global.nc.L1::no_allocate.L2::256B.u32 %0, [%1];" : "=r"(r) : "l"(p)); return r; }
LAB_DEV lab_f2 lab_ld_stream_f2(const void* p) { lab_f2 r; asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.f32 {%0, %1}, [%2];" : "=f"(r.x), "=f"(r.y) : "l"(p)); return r; }
LAB_DEV lab_u2 lab_ld_stream_u2(const void* p) { lab_u2 r; asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p)); return r; }
LAB_DEV lab_u4 lab_ld_stream_u4(const void* p) { lab_u4 r; asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p)); return r; }
LAB_DEV lab_u4 lab_ld_nc_u4(const lab_u4* p) { lab_u4 r; asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p)); return r; }
LAB_DEV u32 lab_atomic_add_u32(u32* p, u32 v) { return atomicAdd(p, v); }
LAB_DEV u64 lab_globaltimer() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
