"""Reference for examples/gemm_cutlass/gemm.cu: C = A @ B.T in fp16 with fp32 accumulation.

``reference`` is also the ``pytorch-eager`` baseline, so it is the call a PyTorch user would
make: an fp16 matmul (cuBLAS, fp32 accumulation), not an fp32 upcast that runs ~15x slower and
would flatter the kernel.

``setup`` builds the operands the .cu expects (B is N x K row-major, i.e. K x N column-major);
kbench-ci sets torch's default device to the GPU under test, so no device is named here.
K and N must be multiples of 8 (TMA needs 16-byte aligned rows).
"""

import torch

# fp16 output: one rounding step (2**-11 relative) apart from the fp32-accumulated reference,
# and two fp32 sums in different orders can land either side of a rounding boundary, which
# makes them one fp16 ulp (~1e-3 relative) apart.
atol = 1e-2
rtol = 1e-2


def setup(M: int, N: int, K: int) -> dict:
    A = torch.randn(M, K, dtype=torch.float16)
    B = torch.randn(N, K, dtype=torch.float16)
    C = torch.empty(M, N, dtype=torch.float16)
    return {"inputs": {"A": A, "B": B, "C": C, "M": M, "N": N, "K": K}, "outputs": ["C"]}


def reference(A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, M: int, N: int, K: int) -> dict:
    return {"C": A @ B.T}
