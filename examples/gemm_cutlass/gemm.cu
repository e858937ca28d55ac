// C = A @ B^T in fp16 with fp32 accumulation, for Hopper (sm_90a), through CUTLASS 3's
// collective builders: a TMA + warpgroup-MMA (wgmma) mainloop with the warp-specialized
// cooperative schedule, and a TMA epilogue.
//
//   A: M x K, row-major             (K-major)
//   B: N x K, row-major             (K-major; i.e. a K x N column-major matrix, like the weight
//                                    of torch.nn.functional.linear: C = A @ B.T)
//   C: M x N, row-major             (output)
//
// Both operands K-major is the "TN" layout, the one wgmma reads natively for every type.
// TMA needs 16-byte aligned rows: K and N must be multiples of 8. M is free.
//
// kbench-ci contract: `extern "C" void solve(...)`, launch on the default stream, no sync.
// Build: kbench-ci compiles it with -gencode=arch=compute_90a,code=sm_90a (wgmma is
// arch-specific) and the CUTLASS include paths (the nvidia-cutlass wheel or CUTLASS_PATH).
#include <cstdio>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

using namespace cute;

namespace {

using ElementA = cutlass::half_t;
using ElementB = cutlass::half_t;
using ElementD = cutlass::half_t;
using ElementAccumulator = float;
using ElementCompute = float;

using LayoutA = cutlass::layout::RowMajor;     // M x K, K contiguous
using LayoutB = cutlass::layout::ColumnMajor;  // K x N, K contiguous (= N x K row-major)
using LayoutD = cutlass::layout::RowMajor;     // M x N

// 16 bytes per TMA access: 8 halves.
constexpr int kAlignment = 128 / cutlass::sizeof_bits<cutlass::half_t>::value;

// 128x128 output tiles, 64-deep K slices; the cooperative schedule splits a tile across two
// consumer warpgroups. A 2x1 cluster multicasts each B tile to both CTAs of the cluster.
using TileShape = Shape<_128, _128, _64>;
using ClusterShape = Shape<_2, _1, _1>;

// ElementC = void: no source matrix is read. With a C operand and beta = 0 a poisoned
// (NaN) output buffer would still be loaded and could leak into the result through 0 * NaN.
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto,
    ElementAccumulator, ElementCompute,
    void, LayoutD, kAlignment,
    ElementD, LayoutD, kAlignment,
    cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    ElementA, LayoutA, kAlignment,
    ElementB, LayoutB, kAlignment,
    ElementAccumulator,
    TileShape, ClusterShape,
    // As many pipeline stages as fit in shared memory next to the epilogue's buffers.
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>,  // M, N, K, batch
    CollectiveMainloop,
    CollectiveEpilogue>;

using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

using StrideA = typename Gemm::GemmKernel::StrideA;
using StrideB = typename Gemm::GemmKernel::StrideB;
using StrideC = typename Gemm::GemmKernel::StrideC;
using StrideD = typename Gemm::GemmKernel::StrideD;

// Grown on demand and kept: a cudaMalloc per call would synchronise the device inside the
// timed region. This schedule normally needs no workspace at all.
void* workspace_of_size(size_t bytes) {
    static void* buffer = nullptr;
    static size_t capacity = 0;
    if (bytes > capacity) {
        if (buffer != nullptr) cudaFree(buffer);
        buffer = nullptr;
        capacity = 0;
        if (cudaMalloc(&buffer, bytes) != cudaSuccess) return nullptr;
        capacity = bytes;
    }
    return buffer;
}

}  // namespace

extern "C" void solve(const half* A, const half* B, half* C, int M, int N, int K) {
    if (M <= 0 || N <= 0 || K <= 0) return;

    const StrideA stride_a = cutlass::make_cute_packed_stride(StrideA{}, make_shape(M, K, 1));
    const StrideB stride_b = cutlass::make_cute_packed_stride(StrideB{}, make_shape(N, K, 1));
    const StrideC stride_c = cutlass::make_cute_packed_stride(StrideC{}, make_shape(M, N, 1));
    const StrideD stride_d = cutlass::make_cute_packed_stride(StrideD{}, make_shape(M, N, 1));

    typename Gemm::Arguments arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {M, N, K, 1},
        {reinterpret_cast<const ElementA*>(A), stride_a,
         reinterpret_cast<const ElementB*>(B), stride_b},
        {{1.0f, 0.0f},  // alpha, beta
         nullptr, stride_c,
         reinterpret_cast<ElementD*>(C), stride_d},
    };

    Gemm gemm;
    // Failing here leaves C unwritten, which kbench-ci reports as an incorrect result; the
    // message says why (typically K or N not a multiple of 8).
    if (gemm.can_implement(arguments) != cutlass::Status::kSuccess) {
        std::fprintf(stderr, "gemm.cu: CUTLASS cannot run M=%d N=%d K=%d "
                             "(K and N must be multiples of 8)\n", M, N, K);
        return;
    }
    const size_t workspace_bytes = Gemm::get_workspace_size(arguments);
    void* workspace = workspace_bytes > 0 ? workspace_of_size(workspace_bytes) : nullptr;
    if (workspace_bytes > 0 && workspace == nullptr) {
        std::fprintf(stderr, "gemm.cu: cannot allocate %zu bytes of workspace\n", workspace_bytes);
        return;
    }
    cudaStream_t stream = nullptr;  // the default stream, per the kbench-ci contract
    if (gemm.initialize(arguments, workspace, stream) != cutlass::Status::kSuccess ||
        gemm.run(stream) != cutlass::Status::kSuccess) {
        std::fprintf(stderr, "gemm.cu: CUTLASS failed to launch M=%d N=%d K=%d\n", M, N, K);
    }
}
