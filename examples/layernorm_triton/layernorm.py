"""Row-wise LayerNorm in Triton: one program per row, the whole row in one block.

kbench-ci contract: ``setup(**dims)`` returns the inputs (made on torch's default device, which
kbench-ci sets to the GPU under test, or the CPU in CPU mode) and names the outputs;
``run_kernel(**inputs)`` launches once and writes the outputs in place.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    centered = tl.where(mask, x - mean, 0.0)
    variance = tl.sum(centered * centered, axis=0) / N
    rstd = 1.0 / tl.sqrt(variance + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = centered * rstd * w + b
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def setup(M, N, **_):
    x = torch.randn(M, N, dtype=torch.float32)
    weight = torch.randn(N, dtype=torch.float32)
    bias = torch.randn(N, dtype=torch.float32)
    y = torch.empty(M, N, dtype=torch.float32)
    return {"inputs": {"x": x, "weight": weight, "bias": bias, "y": y, "eps": 1e-5}, "outputs": ["y"]}


def run_kernel(x, weight, bias, y, eps, **_):
    M, N = x.shape
    BLOCK = triton.next_power_of_2(N)
    num_warps = min(max(BLOCK // 256, 1), 16)
    _layernorm_kernel[(M,)](x, weight, bias, y, N, x.stride(0), eps, BLOCK=BLOCK, num_warps=num_warps)
