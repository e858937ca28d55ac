"""When the head fails its checks, the base (and the baselines) are not timed.

Their times would be compared with nothing: the verdict is the head's failure whatever they are
(a trial spent 37 of 235 s timing such bases). The base's correctness is still checked and
reported, and the report says why it has no time. Real compares on the CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.gate.test_compare_cpu import kbench
from tests.support.suite_repo import make_suite_repo, suite_files

KERNEL = {"name": "scale", "kind": "pytorch", "shapes": [{"N": 1024}], "baselines": ["pytorch-eager"]}


@pytest.mark.parametrize(("variant", "verdict", "reason"), [
    ("wrong", "incorrect", "the head is incorrect"),
    ("raises", "failed", "the head failed"),
])
def test_a_failing_head_leaves_the_correct_base_and_baselines_untimed(
    tmp_path: Path, variant: str, verdict: str, reason: str
) -> None:
    repo = make_suite_repo(tmp_path / "repo", [KERNEL])
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit(suite_files([{**KERNEL, "variant": variant}]), "break the head")
    out = tmp_path / "out"
    done = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    (case,) = json.loads((out / "results.json").read_text())["cases"]
    assert case["verdict"] == verdict
    base = case["base"]
    # Checked and correct, but no time: results.json only gains the field that says why.
    assert base["status"] == "ok" and base["correctness"]["trials"] and base["rounds_ms"] == []
    assert base["not_timed"] == reason
    assert case["head"]["not_timed"] is None
    (eager,) = case["baselines"]
    assert eager["result"]["rounds_ms"] == [] and eager["result"]["not_timed"] == reason
    said = f"the base is correct but was not timed ({reason})"
    assert said in case["message"]
    assert said in (out / "benchmark.md").read_text()


def test_a_correct_head_still_times_both_sides_and_the_baselines(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", [KERNEL])
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({"README.md": "docs\n"}, "docs")
    out = tmp_path / "out"
    done = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (case,) = json.loads((out / "results.json").read_text())["cases"]
    assert case["base"]["rounds_ms"] and case["head"]["rounds_ms"] and case["baselines"][0]["result"]["rounds_ms"]
    assert case["base"]["not_timed"] is None
