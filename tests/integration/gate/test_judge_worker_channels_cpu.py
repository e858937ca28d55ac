"""The judge's red team: heads that reach the results through the
judge's own handling of its workers, on the CPU, each in a compare of its own.

* ``stderr_link``: links the file the judge opened as its worker's output to the parent's next
  events file, so that the next head worker writes whole cases into the results. Asserted: the
  link was planted and nothing the head forged reached results.json (its forgery writes rounds
  of exactly 1.000-1.008 ms).
* ``ptrace_zombie``: leaves a ptraced zombie for the judge to reap in the base's turn. Asserted:
  the trap was set, the base passed, and the case is not ``fixed`` (nor any verdict that passes);
  where the side's seccomp filter is in force, that its ptrace was refused instead.

Architecture only, no timing bound (CI has 2 cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kbench_ci.side.harden import seccomp_available
from tests.support.suite_repo import FAST_DEFAULTS, TempRepo, suite_toml

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "judge"
#: rounds of the forged records (stderr_link._forge)
FORGED = {round(1.0 + 0.001 * i, 6) for i in range(9)}


def _compare(root: Path, head: str, shapes: list[dict[str, int]], defaults: dict[str, Any]) -> tuple[
        subprocess.CompletedProcess[str], dict[str, Any], Path]:
    repo = TempRepo(root / "repo")
    toml = suite_toml([{"name": "mm", "kind": "pytorch", "shapes": shapes}],
                      {**FAST_DEFAULTS, "correctness_trials": 2, "rounds": 4, **defaults})
    repo.commit({"kbench.toml": toml, "kernels/mm_ref.py": (FIXTURES / "ref.py").read_text(),
                 "kernels/mm.py": (FIXTURES / "honest.py").read_text()}, "an honest matmul")
    repo.git("checkout", "-q", "-b", "pr")
    repo.commit({"kernels/mm.py": (FIXTURES / f"{head}.py").read_text()}, head)
    marks = Path(tempfile.mkdtemp(prefix=f"kbench-{head}-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    environment = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    environment["KBENCH_JUDGE_TEST_MARKS"] = str(marks)
    out = root / "out"
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--device", "cpu", "--isolation", "judge",
         "--threshold", "0.05", "--output-dir", str(out), "--no-cache"],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=600,
    )
    assert (out / "results.json").is_file(), completed.stderr[-4000:]
    return completed, json.loads((out / "results.json").read_text()), marks


def test_a_head_cannot_link_its_workers_output_to_the_results(tmp_path: Path) -> None:
    shapes = [{"M": 96 + 32 * i, "N": 96, "K": 96} for i in range(3)]
    completed, results, marks = _compare(tmp_path, "stderr_link", shapes, {})
    log = (marks / "stderr_link.log").read_text() if (marks / "stderr_link.log").is_file() else ""
    print(log, completed.stderr[-1500:])
    assert "planted stderr ->" in log, "the head never set its trap: this test would prove nothing"
    assert "forging" not in log, log
    for case in results["cases"]:
        for label in ("base", "head"):
            samples = {round(s, 6) for r in (case.get(label) or {}).get("rounds_ms") or () for s in r}
            assert not samples or not samples <= FORGED, (case["case_id"], label, sorted(samples)[:5])
    assert len(results["cases"]) == 3


def test_a_head_that_hangs_the_judge_in_the_bases_turn_is_never_fixed(tmp_path: Path) -> None:
    completed, results, marks = _compare(tmp_path, "ptrace_zombie", [{"M": 96, "N": 96, "K": 96}], {"timeout": 60})
    log = (marks / "ptrace_zombie.log").read_text() if (marks / "ptrace_zombie.log").is_file() else ""
    (case,) = results["cases"]
    print(log, case["verdict"], case.get("message"), case["base"], case["head"].get("message"))
    if seccomp_available():
        # the side's seccomp filter refuses ptrace: no trap, and nothing gained by trying it
        assert "rc -1 errno 1" in log and "rc 0" not in log, f"the head's ptrace was not refused: {log!r}"
        assert case["base"]["status"] == "ok", case["base"]
        assert case["verdict"] not in ("fixed", "faster"), case
        return
    assert "rc 0 errno 0" in log, f"the head's ptrace trap was never set: {log!r}"
    assert case["base"]["status"] == "ok", case["base"]
    assert case["verdict"] not in ("fixed", "faster", "unchanged", "inconclusive"), case
    assert completed.returncode == 1, completed.stderr[-2000:]
