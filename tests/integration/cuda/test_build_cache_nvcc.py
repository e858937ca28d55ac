"""The build cache across runs with the real nvcc: a second run of unchanged sources
compiles nothing and says "cached" (from another folder, as a fresh worktree is); a changed
include rebuilds; and each case's private copy of a library has statics of its own.
nvcc compiles here without a GPU (KBENCH_CUDA_ARCH picks the target)."""

from __future__ import annotations

import ctypes
import json
import shutil
import stat
from pathlib import Path

import pytest

from kbench_ci.cuda.build import BuildCache, build, plan_build
from kbench_ci.gate.builds import SideBuilder
from kbench_ci.gate.compare import run_compare
from kbench_ci.measure.isolation import private_libraries
from kbench_ci.results.model import MeasureSettings
from kbench_ci.results.outcome import CompareRequest
from kbench_ci.suite.model import KernelSpec
from kbench_ci.suite.settings import Execution
from kbench_ci.wire.protocol import CaseJob, SideSpec
from tests.support.suite_repo import TempRepo
from tests.unit.gate.test_compare_logic import FakeWorker

KERNEL = '''\
#include "helper.cuh"
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = FACTOR * x[i];
}
extern "C" void solve(const float* x, float* y, int N) { scale<<<(N + 255) / 256, 256>>>(x, y, N); }
'''


@pytest.fixture
def counted_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$NVCC: the real nvcc behind a script that logs every compile (not --version)."""
    real = shutil.which("nvcc")
    assert real is not None, "these tests need nvcc on PATH"
    log = tmp_path / "nvcc.log"
    wrapper = tmp_path / "bin" / "nvcc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\n[ "$1" = "--version" ] || echo "$@" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("NVCC", str(wrapper))
    monkeypatch.setenv("KBENCH_CUDA_ARCH", "sm_90")
    return log


def _compiles(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _tree(root: Path, factor: str) -> KernelSpec:
    root.mkdir(parents=True, exist_ok=True)
    (root / "k.cu").write_text(KERNEL)
    (root / "helper.cuh").write_text(f"#define FACTOR {factor}\n")
    (root / "ref.py").write_text("def reference(x, **_):\n    return 2 * x\n")
    return KernelSpec(name="k", solution=root / "k.cu", ref=root / "ref.py", implementation="cuda-cpp",
                      shapes=({"N": 1},))


def _build_once(tmp_path: Path, staging: str, kernel: KernelSpec) -> tuple[Path, bool]:
    with SideBuilder(tmp_path / staging, cache=BuildCache(tmp_path / "cache")) as builder:
        spec, outcome = builder.side(kernel, label="head", kind="cuda-cpp", cwd=kernel.solution.parent)
    assert spec is not None and outcome is not None and outcome.ok, outcome
    return Path(spec.solution).with_suffix(".so"), outcome.cached


def test_a_second_run_compiles_nothing_and_a_changed_include_rebuilds(tmp_path: Path, counted_nvcc: Path) -> None:
    library, cached = _build_once(tmp_path, "run-1", _tree(tmp_path / "worktree-1", "2.0f"))
    assert not cached and _compiles(counted_nvcc) == 1
    first_bytes = library.read_bytes()
    # The same sources in another worktree, a new staging folder: from the cache.
    again, cached = _build_once(tmp_path, "run-2", _tree(tmp_path / "worktree-2", "2.0f"))
    assert cached and _compiles(counted_nvcc) == 1
    assert again.read_bytes() == first_bytes
    # Only the header changed: a rebuild, and its result is cached in turn.
    _, cached = _build_once(tmp_path, "run-3", _tree(tmp_path / "worktree-3", "3.0f"))
    assert not cached and _compiles(counted_nvcc) == 2
    _, cached = _build_once(tmp_path, "run-4", _tree(tmp_path / "worktree-4", "3.0f"))
    assert cached and _compiles(counted_nvcc) == 2


def test_without_a_cache_every_run_compiles(tmp_path: Path, counted_nvcc: Path) -> None:
    kernel = _tree(tmp_path / "tree", "2.0f")
    for staging in ("run-1", "run-2"):
        with SideBuilder(tmp_path / staging, cache=None) as builder:
            _, outcome = builder.side(kernel, label="head", kind="cuda-cpp", cwd=kernel.solution.parent)
        assert outcome is not None and outcome.ok and not outcome.cached
    assert _compiles(counted_nvcc) == 2


def test_the_compare_report_says_cached_on_the_second_run(tmp_path: Path, counted_nvcc: Path) -> None:
    repo = TempRepo(tmp_path / "repo")
    repo.commit({
        "kbench.toml": '[defaults]\nrounds = 2\n\n[[kernels]]\nname = "k"\nsolution = "k/k.cu"\nref = "k/ref.py"\n'
                       "shapes = [{N = 16}]\n",
        "k/k.cu": KERNEL, "k/helper.cuh": "#define FACTOR 2.0f\n", "k/ref.py": "def reference(**_): pass\n",
    }, "suite")
    execution = Execution(warm_worker=True, cache_dir=tmp_path / "cache")
    for run in ("out-1", "out-2"):
        run_compare(CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=tmp_path / run),
                    worker=FakeWorker(), execution=execution)
    assert _compiles(counted_nvcc) == 1  # base and head are the same source: one compile, then hits
    first = json.loads((tmp_path / "out-1" / "results.json").read_text())["cases"][0]["builds"]
    second = json.loads((tmp_path / "out-2" / "results.json").read_text())["cases"][0]["builds"]
    # The first run compiled one side and the other, waiting for it, took the library from the cache.
    assert sorted([first["base"]["cached"], first["head"]["cached"]]) == [False, True]
    assert second["base"]["cached"] and second["head"]["cached"]
    report = (tmp_path / "out-2" / "benchmark.md").read_text()
    for side in ("base", "head"):
        row = next(line for line in report.splitlines() if line.startswith(f"| {side} build "))
        assert "| ok (cached) — `" in row, row


STATIC = 'extern "C" int bump() { static int calls = 0; return ++calls; }\n'


def test_each_private_copy_of_a_library_has_statics_of_its_own(tmp_path: Path, counted_nvcc: Path) -> None:
    staged = tmp_path / "staging" / "head" / "k"
    staged.mkdir(parents=True)
    (staged / "k.cu").write_text(STATIC)
    build(plan_build(staged / "k.cu", arch="sm_90"), use_cache=False)
    # The same path loaded twice is one library: its statics carry over (why each case copies).
    same_a, same_b = ctypes.CDLL(str(staged / "k.so")), ctypes.CDLL(str(staged / "k.so"))
    assert same_a.bump() == 1 and same_b.bump() == 2
    settings = MeasureSettings(device="cuda:0", seed=1, correctness_trials=1, timing_method="cuda_event", num_warmup=1,
                               trials_per_round=1, discard_first=0, rounds=1, flush_l2=True)
    side = SideSpec("head", str(staged / "k.cu"), str(tmp_path / "ref.py"), "cuda-cpp")
    job = CaseJob(case_id="k[N=1]", dims={"N": 1}, sides=(side,), baselines=(), settings=settings)
    counts = []
    for case in ("case-1", "case-2"):
        private = Path(private_libraries(job, tmp_path / case).sides[0].solution).with_suffix(".so")
        counts.append(ctypes.CDLL(str(private)).bump())
    assert counts == [1, 1]
