"""Every build of a suite starts at once, in a pool of threads, and each kernel is
built once per side however many cases ask for it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from kbench_ci.gate.builds import BuildRequest, SideBuilder
from kbench_ci.suite.model import KernelSpec


def _kernel(tmp_path: Path, name: str) -> KernelSpec:
    source = tmp_path / "tree" / f"{name}.cu"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text('extern "C" void solve(const float* x, float* y, int N) {}\n')
    (tmp_path / "tree" / "ref.py").write_text("def reference(x, **_):\n    return x\n")
    return KernelSpec(name=name, solution=source, ref=tmp_path / "tree" / "ref.py", implementation="cuda-cpp",
                      shapes=({"N": 1},))


def test_two_builds_run_at_the_same_time(tmp_path: Path) -> None:
    # Each build waits for the other at a barrier: built one after the other, the first would
    # wait alone until the barrier's timeout and fail.
    barrier = threading.Barrier(2, timeout=20)

    def build_fn(kernel: Any, kind: str, source: Path, output: Path, cwd: Path) -> str:
        barrier.wait()
        output.write_bytes(b"\x7fELF")
        return f"nvcc {source.name}"

    kernels = [_kernel(tmp_path, "a"), _kernel(tmp_path, "b")]
    with SideBuilder(tmp_path / "staging", build_fn, parallel=4) as builder:
        builder.start([BuildRequest(k, "head", "cuda-cpp", tmp_path) for k in kernels])
        outcomes = [builder.side(k, label="head", kind="cuda-cpp", cwd=tmp_path)[1] for k in kernels]
    assert all(outcome is not None and outcome.ok for outcome in outcomes), outcomes


def test_a_kernel_is_built_once_per_side_and_later_cases_add_no_build_time(tmp_path: Path) -> None:
    calls: list[tuple[str, str]] = []

    def build_fn(kernel: Any, kind: str, source: Path, output: Path, cwd: Path) -> str:
        calls.append((kernel.name, output.parent.parent.name))
        time.sleep(0.05)
        output.write_bytes(b"\x7fELF")
        return "nvcc"

    kernel = _kernel(tmp_path, "a")
    with SideBuilder(tmp_path / "staging", build_fn) as builder:
        builder.start([BuildRequest(kernel, side, "cuda-cpp", tmp_path) for side in ("base", "head", "head")])
        first = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tmp_path)
        second = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tmp_path)
        base = builder.side(kernel, label="base", kind="cuda-cpp", cwd=tmp_path)
    assert sorted(calls) == [("a", "base"), ("a", "head")]
    assert first[1] is not None and first[1].duration_s > 0
    assert second[1] is not None and second[1].duration_s == 0.0
    assert base[0] is not None and first[0] is not None and base[0].solution != first[0].solution
    assert not any(outcome is not None and outcome.cached for outcome in (first[1], second[1], base[1]))


def test_python_kernels_need_no_build(tmp_path: Path) -> None:
    def build_fn(*args: Any) -> str:
        raise AssertionError("a Python kernel was built")

    kernel = KernelSpec(name="t", solution=tmp_path / "t.py", ref=tmp_path / "r.py", implementation="triton",
                        shapes=({"N": 1},))
    with SideBuilder(tmp_path / "staging", build_fn) as builder:
        builder.start([BuildRequest(kernel, "head", "triton", tmp_path)])
        spec, outcome = builder.side(kernel, label="head", kind="triton", cwd=tmp_path)
    assert spec is not None and outcome is None
