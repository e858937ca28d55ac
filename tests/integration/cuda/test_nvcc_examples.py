"""The examples and the cheating fixtures compile with the real toolchains (no GPU needed).

nvcc builds for sm_90 whatever GPU (if any) this machine has; the CuTe DSL example compiles to
an sm_90a cubin. Sources are copied to a temporary folder first so that no .so lands in the
repository.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kbench_ci.cuda.build import (
    build,
    find_cutlass_include,
    format_command,
    hash_path,
    plan_build,
)
from kbench_ci.errors import MissingExtraError

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
CHEATS = REPO / "tests" / "fixtures" / "cheats_cuda"
CHEAT_SOURCES = sorted(path.name for path in CHEATS.glob("*.cu"))

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None,
    reason="nvcc (CUDA toolkit) is not on PATH: cannot check that the CUDA examples compile",
)


def _copy_dir(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.so", "*.kbench-hash"))
    return target


def _exports_solve(library: Path) -> bool:
    import ctypes

    # The runtime is linked statically and binds the driver lazily: loading needs no GPU.
    return hasattr(ctypes.CDLL(str(library)), "solve")


def test_there_are_cheat_fixtures() -> None:
    assert set(CHEAT_SOURCES) == {
        "hang.cu",
        "illegal_address.cu",
        "overwrites_input.cu",
        "side_stream.cu",
        "stale_output.cu",
        "writes_half.cu",
        "writes_nothing.cu",
    }


@needs_nvcc
def test_softmax_example_compiles_for_sm_90(tmp_path: Path) -> None:
    folder = _copy_dir(EXAMPLES / "softmax_cuda", tmp_path)
    plan = plan_build(folder / "softmax.cu", arch="sm_90")
    assert "-arch=sm_90" in plan.command, format_command(plan)
    result = build(plan)
    assert not result.cached
    assert plan.output == folder / "softmax.so"
    assert _exports_solve(plan.output)
    assert build(plan).cached


@needs_nvcc
@pytest.mark.parametrize("name", CHEAT_SOURCES)
def test_cheat_fixture_compiles_for_sm_90(tmp_path: Path, name: str) -> None:
    folder = _copy_dir(CHEATS, tmp_path)
    plan = plan_build(folder / name, arch="sm_90")
    assert plan.arch == "sm_90"
    build(plan)
    assert _exports_solve(plan.output)
    assert hash_path(plan.output).is_file()


def _cutlass_or_skip() -> None:
    try:
        find_cutlass_include()
    except MissingExtraError as exc:
        pytest.skip(f"{exc.one_line()}: cannot check that the CUTLASS example compiles")


@needs_nvcc
@pytest.mark.slow  # 48-70 s on a 2-core machine
def test_cutlass_example_compiles_for_sm_90a(tmp_path: Path) -> None:
    _cutlass_or_skip()
    folder = _copy_dir(EXAMPLES / "gemm_cutlass", tmp_path)
    plan = plan_build(folder / "gemm.cu", cutlass=True, arch="sm_90")
    # wgmma-based collectives need the arch-specific target, spelled as -gencode
    assert plan.arch == "sm_90a"
    assert "-gencode=arch=compute_90a,code=sm_90a" in plan.command, format_command(plan)
    started = time.perf_counter()
    result = build(plan, timeout_s=600)
    print(f"CUTLASS example compiled in {time.perf_counter() - started:.1f} s")
    assert not result.cached
    assert _exports_solve(plan.output)
    assert build(plan).cached


_CUTE_DSL_COMPILE = textwrap.dedent(
    """
    import importlib.util, json, sys, time
    spec = importlib.util.spec_from_file_location("cute_add_example", sys.argv[1])
    solution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solution)
    inputs = solution.setup(M=1000, N=1000)["inputs"]
    started = time.perf_counter()
    try:
        solution.compile_kernel(**inputs)
        outcome = "compiled"
    except Exception as exc:
        # Without a CUDA driver the DSL compiles all the way to a cubin and only then fails
        # to load it (cuInit); anything else is a real failure.
        cause = getattr(exc, "cause", None) or exc.__cause__
        if type(cause).__name__ != "CudaDriverDependencyError":
            raise
        outcome = "compiled, not loaded (no CUDA driver)"
    print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - started}))
    """
)


def test_cute_dsl_example_compiles_for_sm_90a(tmp_path: Path) -> None:
    try:
        version = importlib.metadata.version("nvidia-cutlass-dsl")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("nvidia-cutlass-dsl is not installed: cannot check the CuTe DSL example")
    dump = tmp_path / "dump"
    dump.mkdir()
    # The DSL reads its settings at import, hence a fresh interpreter. KEEP_CUBIN leaves the
    # compiled code behind as proof of a full compile; file caching off so it is never skipped.
    env = {
        **os.environ,
        "CUTE_DSL_ARCH": "sm_90a",
        "CUTE_DSL_KEEP_CUBIN": "1",
        "CUTE_DSL_DUMP_DIR": str(dump),
        "CUTE_DSL_DISABLE_FILE_CACHING": "1",
        "CUTE_DSL_CACHE_DIR": str(tmp_path / "cache"),
    }
    completed = subprocess.run(
        [sys.executable, "-c", _CUTE_DSL_COMPILE, str(EXAMPLES / "cute_dsl" / "add.py")],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    print(f"nvidia-cutlass-dsl {version}: {report['outcome']} in {report['seconds']:.2f} s")
    cubins = list(dump.glob("*.sm_90a.cubin"))
    assert cubins, f"no sm_90a cubin in {sorted(p.name for p in dump.iterdir())}"
    assert all(cubin.stat().st_size > 0 for cubin in cubins)
