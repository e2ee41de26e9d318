// y = A x for a decode step: each block (one warp, blockDim.x = 32) stages x in shared memory
// and reduces ROWS_PER_BLOCK rows of A against it.
// bench.py reads ROWS_PER_BLOCK from this line (it stands in for the GPU run; see README).
#define ROWS_PER_BLOCK 1

extern "C" __global__ void gemv_f32(const float* a, const float* x, float* y, int rows, int n) {
    __shared__ float xs[256];
    for (int i = threadIdx.x; i < n; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    for (int r = blockIdx.x * ROWS_PER_BLOCK; r < min(rows, (blockIdx.x + 1) * ROWS_PER_BLOCK); ++r) {
        float acc = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) acc += a[r * n + i] * xs[i];
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) y[r] = acc;
    }
}
