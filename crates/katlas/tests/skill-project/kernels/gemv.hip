// The HIP twin of gemv.cu: each block is one wave64 (blockDim.x = 64), so the reduction starts at 32.
#include <hip/hip_runtime.h>
#define ROWS_PER_BLOCK 1

extern "C" __global__ void gemv_f32(const float* a, const float* x, float* y, int rows, int n) {
    __shared__ float xs[256];
    for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    for (int r = blockIdx.x * ROWS_PER_BLOCK; r < min(rows, (blockIdx.x + 1) * ROWS_PER_BLOCK); ++r) {
        float acc = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) acc += a[r * n + i] * xs[i];
        for (int o = 32; o > 0; o >>= 1) acc += __shfl_down(acc, o);
        if (threadIdx.x == 0) y[r] = acc;
    }
}
