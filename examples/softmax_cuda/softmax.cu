// Row softmax, fp32: output[r, :] = softmax(input[r, :]) for an M x N row-major matrix.
//
// kbench-ci contract: `extern "C" void solve(...)`, const pointers are inputs, non-const
// pointers are outputs, scalars are dimensions; launch on the default stream and do not
// synchronise (the harness times with events on its own stream).
//
// One block per row. Numerically stable: subtract the row max before exponentiating.
// Both reductions use warp shuffles, then one value per warp goes through shared memory.
#include <cuda_runtime.h>
#include <math.h>

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Reduces across the block; every thread gets the result. `scratch` holds one slot per warp.
template <bool kIsMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    v = kIsMax ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < kWarps ? scratch[lane] : (kIsMax ? -INFINITY : 0.0f);
    v = kIsMax ? warp_max(v) : warp_sum(v);
    // The scratch slots are reused by the next reduction: wait until every warp has read them.
    __syncthreads();
    return v;
}

__global__ void __launch_bounds__(kThreads)
softmax_rows(const float* __restrict__ input, float* __restrict__ output, int N) {
    __shared__ float scratch[kWarps];
    const size_t row = blockIdx.x;
    const float* x = input + row * N;
    float* y = output + row * N;

    float row_max = -INFINITY;
    for (int i = threadIdx.x; i < N; i += kThreads) row_max = fmaxf(row_max, x[i]);
    row_max = block_reduce<true>(row_max, scratch);

    float row_sum = 0.0f;
    for (int i = threadIdx.x; i < N; i += kThreads) row_sum += expf(x[i] - row_max);
    row_sum = block_reduce<false>(row_sum, scratch);

    const float inv_sum = 1.0f / row_sum;
    for (int i = threadIdx.x; i < N; i += kThreads) y[i] = expf(x[i] - row_max) * inv_sum;
}

}  // namespace

extern "C" void solve(const float* input, float* output, int M, int N) {
    if (M <= 0 || N <= 0) return;
    softmax_rows<<<M, kThreads>>>(input, output, N);
}
