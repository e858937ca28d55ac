"""The case's timeout counts the sides' turns, not the judge's own start nor a worker's
(kbench_ci.measure.deadlines). On a busy CI machine the judge's side workers once took longer to
start than the whole case timeout, and a hanging head then read "the judge (which runs no
pull-request code; no side is blamed) timed out after 8 s" where an idle machine said "head timed
out after 8 s". Here the judge's start is made slow on purpose, by more than the case's timeout,
so the blame does not depend on how busy the machine happens to be. The in-process worker's start
is held up the same way (the same machine read "worker timed out after 6 s" for a hanging ref.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.gate.test_compare_cpu import BASE_KERNELS, kbench, results
from tests.support.suite_repo import make_suite_repo, suite_files

#: seconds the process that takes the cases sleeps at its first: longer than the case's timeout below
START_DELAY_S = 10
CASE_TIMEOUT_S = 5

# Imported by every Python process of the command (PYTHONPATH): in the process that takes the
# cases (MODULE) alone, the first job ticket is taken START_DELAY_S late, after the parent's clock
# for the case has started.
_SLOW_START = """
import sys
if "MODULE" in sys.orig_argv:
    import time
    from kbench_ci.wire import protocol

    _decode = protocol.JobTicket.decode

    def _slow_decode(line):
        time.sleep(DELAY)
        return _decode(line)

    protocol.JobTicket.decode = staticmethod(_slow_decode)
"""


@pytest.mark.parametrize(("isolation", "module"), [("judge", "kbench_ci.judge.main"), ("process", "kbench_ci.measure.worker")])
def test_a_slow_start_does_not_take_the_blame_for_a_hanging_head(tmp_path: Path, isolation: str, module: str) -> None:
    repo = make_suite_repo(tmp_path / "repo", BASE_KERNELS[1:2])
    repo.write({"kernels/scale.py": suite_files([{**BASE_KERNELS[1], "variant": "hangs"}])["kernels/scale.py"]})
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SLOW_START.replace("MODULE", module).replace("DELAY", str(START_DELAY_S)))
    out = tmp_path / "out"
    completed = kbench(
        repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out),
        "--case-timeout", str(CASE_TIMEOUT_S), "--isolation", isolation,
        env={"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))},
    )
    assert completed.returncode == 1, completed.stdout + completed.stderr
    (case,) = results(out)["cases"]
    assert case["verdict"] == "failed", case
    # The head hung in its own turn: it is blamed, after the case's timeout of its turns ...
    assert f"head timed out after {CASE_TIMEOUT_S} s" in case["message"], case["message"]
    assert "the judge" not in case["message"] and "worker" not in case["message"], case["message"]
    # ... and the base, checked again without it, passed (a slow judge start again: no matter)
    assert case["base"]["status"] == "ok", case["base"]
