"""A reference that produces no output is the reference's fault, not the solution's (issue 13,
item 5): exit 2 and a message naming the reference and the output."""

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
