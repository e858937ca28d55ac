"""The red-team corpus on CPU (tests/fixtures/redteam): kernels that memoise their results and
replay them on inputs they have seen, each written to pass, must end `incorrect` (exit 1); the
honest controls, some of which cache something other than results, must pass (exit 0).

The matmul is 768^3 float32: ~2.7 ms on a 2-core CPU, against ~30 us to copy its result and
~60 us to checksum its inputs, so a replayed call is ~30x faster than a computed one; at 512^3
(~0.8 ms) two other busy processes on the machine compressed that to ~1.4x, near the probe's
noise bound.
The GPU-only controls (CUDA graph replay, autotuned Triton) are in tests/gpu/test_redteam_gpu.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.redteam import HONEST, MASKED_REF, MATMUL_REF, PYTHON_CHEATS, REDTEAM

ROOT = Path(__file__).resolve().parents[3]
MATMUL_DIMS = ("--M=768", "--N=768", "--K=768")
MASKED_DIMS = ("--M=4096", "--N=256")

#: honest controls that run on a CPU: (file under honest/, ref, dims)
HONEST_CPU = [
    ("torch_mm", MATMUL_REF, MATMUL_DIMS),
    ("torch_compile", MATMUL_REF, MATMUL_DIMS),
    ("masked_skip", MASKED_REF, MASKED_DIMS),
    ("masked_skip_seeded", MASKED_REF, MASKED_DIMS),
]


def bench(solution: Path, ref: Path, output_dir: Path, *dims: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ)
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(solution), "--implementation=pytorch", f"--ref={ref}",
         "--device=cpu", *dims, f"--output-dir={output_dir}", "--num-warmup=2", "--num-trials=10"],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=environment,
    )


def solution_of(completed: subprocess.CompletedProcess[str], output_dir: Path) -> dict:
    results = output_dir / "results.json"
    assert results.is_file(), f"no results.json (exit {completed.returncode}):\n{completed.stderr[-3000:]}"
    return json.loads(results.read_text())["case"]["variants"][0]


def test_the_corpus_lists_every_fixture() -> None:
    """A cheat added to the folder without a test would never be run."""
    on_disk = {p.stem for p in REDTEAM.glob("*.py") if not p.stem.startswith("ref")}
    assert on_disk == set(PYTHON_CHEATS)
    gpu_only = {"cuda_graph_replay", "triton_autotuned"}
    assert {p.stem for p in HONEST.glob("*.py") if not p.stem.startswith("ref")} == {n for n, _, _ in HONEST_CPU} | gpu_only


@pytest.mark.parametrize("cheat", PYTHON_CHEATS)
def test_a_kernel_that_replays_memoised_results_is_incorrect(cheat: str, tmp_path: Path) -> None:
    completed = bench(REDTEAM / f"{cheat}.py", MATMUL_REF, tmp_path, *MATMUL_DIMS)
    solution = solution_of(completed, tmp_path)
    print(f"{cheat}: exit {completed.returncode}, status {solution['status']}: {solution['message']}")
    assert completed.returncode == 1, completed.stderr[-3000:]
    assert solution["status"] == "incorrect"
    assert solution["message"]


@pytest.mark.parametrize(("control", "ref", "dims"), HONEST_CPU, ids=[name for name, _, _ in HONEST_CPU])
def test_an_honest_control_passes(control: str, ref: Path, dims: tuple[str, ...], tmp_path: Path) -> None:
    completed = bench(HONEST / f"{control}.py", ref, tmp_path, *dims)
    solution = solution_of(completed, tmp_path)
    print(f"{control}: exit {completed.returncode}, status {solution['status']}: {solution['message']}")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert solution["status"] == "ok"
