"""A reference that is NaN where its inputs make it NaN: a solution that is
NaN at exactly those elements passes, in both isolations; one that is NaN where the reference is
finite stays incorrect. `torch.log` of `torch.randn` inputs: about half the elements are NaN."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "nan_reference"


def bench(solution: str, isolation: str, out: Path) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ)
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(FIXTURES / solution), "--implementation=pytorch",
         f"--ref={FIXTURES / 'ref.py'}", f"--output-dir={out}", "--device=cpu", "--N=4096",
         "--num-warmup=1", "--num-trials=3", f"--isolation={isolation}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=environment,
    )


def solution_of(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())["case"]["variants"][0]


@pytest.mark.parametrize("isolation", ["process", "judge"])
def test_nan_where_the_reference_is_nan_compares_equal(isolation: str, tmp_path: Path) -> None:
    done = bench("log.py", isolation, tmp_path)
    assert done.returncode == 0, done.stderr
    solution = solution_of(tmp_path)
    assert solution["status"] == "ok", solution["message"]
    assert solution["correctness"]["passed"] is True
    (check,) = solution["correctness"]["trials"][0]["outputs"]
    assert check["mismatched"] == 0 and check["max_abs_error"] == 0.0 and check["max_rel_error"] == 0.0


@pytest.mark.parametrize("isolation", ["process", "judge"])
def test_nan_where_the_reference_is_finite_stays_incorrect(isolation: str, tmp_path: Path) -> None:
    done = bench("nan_where_finite.py", isolation, tmp_path)
    assert done.returncode == 1, done.stderr
    solution = solution_of(tmp_path)
    assert solution["status"] == "incorrect"
    (check,) = solution["correctness"]["trials"][0]["outputs"]
    assert check["mismatched"] > 0
    _, actual, expected = check["first_mismatch"]
    assert actual is None and isinstance(expected, float), (actual, expected)  # NaN (JSON: null) against a number
