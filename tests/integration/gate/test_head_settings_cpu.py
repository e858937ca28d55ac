"""A compare runs with the base's [defaults], never the pull request's.

The attack, as its author would write it: the base's kbench.toml says ``isolation = "judge"``;
the pull request changes it to ``"process"`` (and cuts the rounds) and brings a head that
rebinds its own process's clocks. Before this, the head's kbench.toml was read, the compare ran
in process and the head read ``faster`` -49.7% with the gate passed. Now the base's settings
govern: the head is judged (and ``incorrect`` by the outside clock), and the report names the
settings the pull request changed and says they were not applied. The same for the threshold
it gave its kernel (0.99: a 1.9x slowdown would read `unchanged`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.judge_clock import FIXTURES, HELPERS, OUTSIDE_CLOCK
from tests.support.suite_repo import TempRepo, suite_toml

SHAPE = {"M": 1024, "N": 1024, "K": 1024}
KERNELS = [{"name": "mm", "kind": "pytorch", "shapes": [SHAPE]}]


def _toml(defaults: dict[str, object], **kernel: object) -> str:
    kernels = [{**KERNELS[0], **kernel}]
    return "\n".join(
        'ref = "kernels/ref.py"' if line.startswith("ref = ") else line for line in suite_toml(kernels, defaults).splitlines()
    ) + "\n"


def test_a_pull_request_cannot_turn_the_judge_off_in_its_kbench_toml(tmp_path: Path) -> None:
    repo = TempRepo(tmp_path / "repo")
    files = {"kbench.toml": _toml({"isolation": "judge", "rounds": 8, "correctness_trials": 2}),
             "kernels/ref.py": (FIXTURES / "ref.py").read_text(), "kernels/mm.py": (FIXTURES / "honest.py").read_text()}
    files.update({f"kernels/{helper}.py": (FIXTURES / f"{helper}.py").read_text() for helper in HELPERS})
    repo.commit(files, "an honest matmul, judged")
    repo.git("checkout", "-q", "-b", "cheat")
    repo.commit({"kbench.toml": _toml({"isolation": "process", "rounds": 2, "correctness_trials": 2}, threshold=0.99),
                 "kernels/mm.py": (FIXTURES / "rebind_timer.py").read_text()}, "faster (and a lighter config)")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("CUDA_VISIBLE_DEVICES", "KBENCH_CI_ISOLATION")}
    out = tmp_path / "out"
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--device", "cpu", "--no-cache", "--output-dir",
         str(out)],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=600,
    )
    assert (out / "results.json").is_file(), completed.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    print(case["verdict"], case.get("ratio"), case["head"]["status"], case["head"].get("message"))
    # judged: the head's side carries the judge's own clock, and that clock caught the lie
    assert case["head"].get("outside_clock") is not None, case["head"]
    assert case["verdict"] == "incorrect", case
    assert str(case["head"].get("message") or "").startswith(OUTSIDE_CLOCK), case["head"].get("message")
    assert completed.returncode == 1, completed.stderr[-2000:]
    # the base's rounds, not the head's
    assert results["settings"]["rounds"] == 8, results["settings"]
    note = results["head"]["note"]
    assert "isolation judge → process" in note and "rounds 8 → 2" in note, note
    # the base's threshold, not the 0.99 the pull request gave its kernel (named, not applied)
    assert case["threshold"] == 0.02, case["threshold"]
    assert "threshold 0.02 → 0.99 (not applied: the base's holds until merged)" in case["goalposts"], case["goalposts"]
    markdown = (out / "benchmark.md").read_text()
    assert "**Settings not applied:**" in markdown and "isolation judge → process" in markdown
