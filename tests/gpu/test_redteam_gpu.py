"""The red-team corpus on a GPU (tests/fixtures/redteam): every memoising cheat, Python and
CUDA C++, ends `incorrect`; every honest control, including those that cache a CUDA graph or
an autotuned configuration (never a result), passes. Skipped cleanly without CUDA.

Sizes make recomputing clearly dearer than replaying on an H200: the matmul is 2048^3 float32
(0.34 ms without TF32, measured) against 11 us to copy its 16 MiB result; the .cu's 512-step fmaf
iteration over 2^24 elements (0.34 ms) against 35 us to copy 64 MiB.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.redteam import HONEST, MASKED_REF, MATMUL_REF, PYTHON_CHEATS, REDTEAM, REDTEAM_CUDA

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
MATMUL_DIMS = ("--M=2048", "--N=2048", "--K=2048")
MASKED_DIMS = ("--M=16384", "--N=1024")
VECTOR_N = "--N=16777216"


#: (file under honest/, implementation, ref, dims)
HONEST_CONTROLS = [
    ("torch_mm", "pytorch", MATMUL_REF, MATMUL_DIMS),
    ("cuda_graph_replay", "pytorch", MATMUL_REF, MATMUL_DIMS),
    ("torch_compile", "pytorch", MATMUL_REF, MATMUL_DIMS),
    ("triton_autotuned", "triton", MATMUL_REF, MATMUL_DIMS),
    ("masked_skip", "pytorch", MASKED_REF, MASKED_DIMS),
    ("masked_skip_seeded", "pytorch", MASKED_REF, MASKED_DIMS),
]


def kbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env=dict(os.environ),
    )
    print(completed.stdout[-4000:])
    print(completed.stderr[-2000:], file=sys.stderr)
    return completed


def solution_of(completed: subprocess.CompletedProcess[str], output_dir: Path) -> dict:
    results = output_dir / "results.json"
    assert results.is_file(), f"no results.json (exit {completed.returncode}):\n{completed.stderr[-3000:]}"
    return json.loads(results.read_text())["case"]["variants"][0]


def verdict(name: str, completed: subprocess.CompletedProcess[str], output_dir: Path) -> dict:
    solution = solution_of(completed, output_dir)
    print(f"VERDICT {name}: exit {completed.returncode}, status {solution['status']}: {solution['message']}")
    return solution


@pytest.fixture(scope="module")
def built_cuda_cheats(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The .cu cheats copied beside their ref.py and built with `kbench-ci build`."""
    directory = tmp_path_factory.mktemp("redteam_cuda")
    for path in REDTEAM_CUDA.iterdir():
        if path.is_file():
            shutil.copy(path, directory / path.name)
    completed = kbench("build", *sorted(str(p) for p in directory.glob("*.cu")))
    assert completed.returncode == 0, completed.stderr
    return directory


@pytest.mark.parametrize("cheat", PYTHON_CHEATS)
def test_a_python_kernel_that_replays_memoised_results_is_incorrect_on_the_gpu(cheat: str, tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(REDTEAM / f"{cheat}.py"), "--implementation=pytorch", f"--ref={MATMUL_REF}",
        f"--output-dir={tmp_path}", *MATMUL_DIMS,
    )
    solution = verdict(cheat, completed, tmp_path)
    assert completed.returncode == 1
    assert solution["status"] == "incorrect"
    assert solution["message"]


def test_a_cuda_kernel_that_replays_by_pointer_is_incorrect(built_cuda_cheats: Path, tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(built_cuda_cheats / "cache_by_pointer.cu"), "--implementation=cuda-cpp",
        f"--ref={built_cuda_cheats / 'ref.py'}", f"--output-dir={tmp_path}", VECTOR_N,
    )
    solution = verdict("cache_by_pointer.cu", completed, tmp_path)
    assert completed.returncode == 1
    assert solution["status"] == "incorrect"
    assert solution["message"]


@pytest.mark.parametrize(
    ("control", "implementation", "ref", "dims"), HONEST_CONTROLS, ids=[c[0] for c in HONEST_CONTROLS],
)
def test_an_honest_control_passes_on_the_gpu(
    control: str, implementation: str, ref: Path, dims: tuple[str, ...], tmp_path: Path,
) -> None:
    completed = kbench(
        "bench", str(HONEST / f"{control}.py"), f"--implementation={implementation}", f"--ref={ref}",
        f"--output-dir={tmp_path}", *dims,
    )
    solution = verdict(control, completed, tmp_path)
    assert completed.returncode == 0
    assert solution["status"] == "ok"
