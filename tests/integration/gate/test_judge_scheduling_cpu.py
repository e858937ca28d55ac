"""A head reniced and pinned the base's worker (a sibling of its own worker,
found through /proc) while the base was stopped; with another job on the runner a real +35%
regression read +14.7%. Under the judge the base runs every call with the judge's own nice
and CPUs: the head's calls are refused by the side's seccomp filter, and whatever went
through is set back by the judge before each of the base's turns."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from tests.support.suite_repo import FAST_DEFAULTS, TempRepo, suite_toml

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "judge"


@pytest.mark.parametrize("seccomp", ["in force", "absent"])
def test_the_base_runs_with_the_judges_scheduling_whatever_the_head_does_to_it(
    tmp_path: Path, seccomp: str, request: pytest.FixtureRequest,
) -> None:
    """``absent``: a ``pyseccomp`` that fails to import, as where libseccomp.so is not installed,
    shadows the real one in every process of the run: the judge's reset alone holds."""
    repo = TempRepo(tmp_path / "repo")
    kernels = [{"name": "sched", "kind": "pytorch", "shapes": [{"M": 96, "N": 96, "K": 96}]}]
    toml = suite_toml(kernels, {**FAST_DEFAULTS, "correctness_trials": 2, "rounds": 4})
    toml = "\n".join('ref = "kernels/ref.py"' if line.startswith("ref = ") else line for line in toml.splitlines()) + "\n"
    repo.commit({"kbench.toml": toml, "kernels/ref.py": (FIXTURES / "ref.py").read_text(),
                 "kernels/honest.py": (FIXTURES / "honest.py").read_text(),
                 "kernels/sched.py": (FIXTURES / "sched_probe.py").read_text()}, "a base that records its scheduling")
    repo.git("checkout", "-q", "-b", "renice")
    repo.commit({"kernels/sched.py": (FIXTURES / "renice_base.py").read_text()}, "a head that renices the base")
    # in /dev/shm: the one folder every side may write (the base's probe, the head's tries)
    marks = Path(tempfile.mkdtemp(prefix="kbench-sched-test-", dir="/dev/shm"))
    request.addfinalizer(lambda: shutil.rmtree(marks, ignore_errors=True))
    environment = {**os.environ, "KBENCH_JUDGE_TEST_SCHED": str(marks / "sched"),
                   "KBENCH_JUDGE_TEST_RENICE": str(marks / "renice")}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    if seccomp == "absent":
        shadow = tmp_path / "no-libseccomp"
        shadow.mkdir()
        (shadow / "pyseccomp.py").write_text('raise RuntimeError("Unable to find libseccomp")\n')
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shadow), environment.get("PYTHONPATH")]))
    out = tmp_path / "out"
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--device", "cpu", "--isolation", "judge",
         "--output-dir", str(out), "--no-cache"],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=600,
    )
    assert (out / "results.json").is_file(), completed.stderr[-4000:]
    judge = f"{os.getpriority(os.PRIO_PROCESS, 0)} {','.join(map(str, sorted(os.sched_getaffinity(0))))}"
    base_calls = [line for path in marks.glob("sched.*") for line in path.read_text().splitlines()]
    head_tries = [line for path in marks.glob("renice.*") for line in path.read_text().splitlines()]
    case = json.loads((out / "results.json").read_text())["cases"][0]
    print(f"judge's nice and CPUs: {judge!r}; the base's at its calls: {dict(Counter(base_calls))}; "
          f"the head's tries: {sorted(set(head_tries))} ({len(head_tries)} calls); verdict {case['verdict']}; "
          f"head: {case['head']['status']} {case['head'].get('message')}")
    assert any(line for line in head_tries), "the head never found the base's worker"
    assert len(base_calls) >= 4, base_calls
    # the report names the layers in force on every side
    assert ("seccomp" in json.dumps(case).split("sandbox: ", 1)[-1]) == (seccomp == "in force")
    if seccomp == "absent" and os.geteuid() != 0:
        # a user that is not root may not lower the nice value the head raised: the base's turn
        # is refused (an error, not comparable), and the head cannot pass on it
        messages = " ".join(str(case[label].get("message")) for label in ("base", "head"))
        assert "not comparable" in messages, case
        assert case["verdict"] not in ("faster", "fixed", "unchanged", "inconclusive"), case
        return
    assert set(base_calls) == {judge}
