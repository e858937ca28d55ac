"""RMSNorm in Triton, fp16 in and out, fp32 arithmetic: y = x / sqrt(mean(x^2) + eps) * weight.

One program per row. Compared with the eager reference, torch.compile and flashinfer's
``flashinfer.norm.rmsnorm`` (see ref.py).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / N
    rstd = 1.0 / tl.sqrt(mean_square + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(tl.float16), mask=mask)


def setup(M, N, **_):
    x = torch.randn(M, N, dtype=torch.float16)
    weight = torch.randn(N, dtype=torch.float16)
    y = torch.empty(M, N, dtype=torch.float16)
    return {"inputs": {"x": x, "weight": weight, "y": y, "eps": 1e-6}, "outputs": ["y"]}


def run_kernel(x, weight, y, eps, **_):
    M, N = x.shape
    BLOCK = triton.next_power_of_2(N)
    _rmsnorm_kernel[(M,)](x, weight, y, N, x.stride(0), eps, BLOCK=BLOCK, num_warps=min(max(BLOCK // 256, 1), 16))
