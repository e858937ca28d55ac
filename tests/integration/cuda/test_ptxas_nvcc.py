"""With the real nvcc: a build writes ptxas's figures beside the library, and
a library taken from the build cache brings them along (no GPU needed to compile)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbench_ci.cuda.build import BuildCache, build, plan_build
from kbench_ci.cuda.ptxas import read_resources
from kbench_ci.measure.compiled import cuda_kernels

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")

SOURCE = """\
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
template <int T> __global__ void tiled(float* x) {
  __shared__ float s[T];
  float r[64];
  for (int i = 0; i < 64; i++) r[i] = x[threadIdx.x * i];
  s[threadIdx.x] = r[threadIdx.x % 64];
  __syncthreads();
  x[threadIdx.x] = s[T - 1 - threadIdx.x];
}
extern "C" void solve(float* a, float* b, float* c, int n) {
  vadd<<<(n + 255) / 256, 256>>>(a, b, c, n);
  tiled<256><<<1, 256>>>(c);
}
"""


def test_a_build_keeps_ptxas_figures_and_the_cache_hands_them_on(tmp_path: Path) -> None:
    first = tmp_path / "one" / "k.cu"
    first.parent.mkdir()
    first.write_text(SOURCE)
    cache = BuildCache(tmp_path / "cache")
    build(plan_build(first, arch="sm_90"), cache=cache)
    kernels = {kernel.name: kernel for kernel in read_resources(first.with_suffix(".so"))}
    assert set(kernels) == {"vadd", "tiled"}
    assert 0 < kernels["vadd"].registers < 64
    assert kernels["tiled"].shared_bytes == 1024 and kernels["tiled"].stack_bytes > 0

    second = tmp_path / "two" / "k.cu"
    second.parent.mkdir()
    second.write_text(SOURCE)
    result = build(plan_build(second, arch="sm_90"), cache=cache)
    assert result.cached
    compiled = {kernel.name: kernel for kernel in cuda_kernels(second)}
    assert compiled["tiled"].source == "ptxas" and compiled["tiled"].shared_bytes == 1024
    assert compiled["vadd"].registers == kernels["vadd"].registers
