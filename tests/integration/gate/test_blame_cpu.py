"""Who is blamed, with which exit code, on CPU: a reference that produces no output (exit 2)
and a CuTe DSL solution on a machine without a GPU (exit 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_reference_without_output_is_bad_usage_not_an_incorrect_solution(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(ROOT / "tests/fixtures/cheats_py/honest.py"),
         "--implementation=pytorch", f"--ref={ROOT / 'tests/fixtures/reference/ref_no_output.py'}",
         f"--output-dir={tmp_path}", "--device=cpu", "--N=256", "--num-warmup=1", "--num-trials=5"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment,
    )
    assert completed.returncode == 2, completed.stderr
    assert "ref_no_output.py reference() produced no output for 'y'" in completed.stderr
    assert "incorrect" not in completed.stderr.lower()


def test_a_cute_dsl_solution_without_a_gpu_is_an_environment_problem(tmp_path: Path) -> None:
    """Exit 3 and a message about the machine, not a failed kernel."""
    environment = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(ROOT / "examples/cute_dsl/add.py"),
         "--implementation=cute-dsl", f"--ref={ROOT / 'examples/cute_dsl/ref.py'}",
         f"--output-dir={tmp_path}", "--device=cpu", "--M=256", "--N=256"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment,
    )
    assert completed.returncode == 3, completed.stderr
    assert "add.py is a CuTe DSL solution and needs a CUDA GPU; none is available here" in completed.stderr
    assert "cudaError" not in completed.stderr


def test_a_dimension_whose_sizes_overflow_64_bits_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    """--N=2**63-1 read "solution ERROR: first call failed: Storage size calculation
    overflowed" (exit 1); it is the setting's fault: exit 2, one line naming N and the fix."""
    environment = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(ROOT / "tests/fixtures/cheats_py/honest.py"),
         "--implementation=pytorch", f"--ref={ROOT / 'tests/fixtures/cheats_py/ref.py'}",
         f"--output-dir={tmp_path}", "--device=cpu", "--N=9223372036854775807"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment,
    )
    assert completed.returncode == 2, completed.stderr
    errors = [line for line in completed.stderr.splitlines() if line.startswith("kbench-ci: error:")]
    assert len(errors) == 1
    assert errors[0].startswith("kbench-ci: error: N=9223372036854775807 is too large: honest.py setup() cannot make")
    assert "use a smaller N" in errors[0]
    assert "first call failed" not in completed.stderr
    assert (tmp_path / "results.json").is_file()


def test_a_reference_that_hangs_is_blamed_on_the_reference_not_the_solution(tmp_path: Path) -> None:
    """The case timeout named the solution while its reference() hung."""
    ref = tmp_path / "ref_hangs.py"
    ref.write_text("import time\n\n\ndef reference(x, y, **_):\n    time.sleep(3600)\n")
    environment = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(ROOT / "tests/fixtures/cheats_py/honest.py"),
         "--implementation=pytorch", f"--ref={ref}", f"--output-dir={tmp_path / 'out'}", "--device=cpu", "--N=64",
         "--timeout=25"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment,
    )
    assert completed.returncode == 2, completed.stderr
    assert "kbench-ci: error: ref_hangs.py reference() (checking solution) timed out after 25 s" in completed.stderr
    assert "solution ERROR" not in completed.stderr
