"""``--gpus`` with real workers, on the CPU.

The command line refuses ``--gpus`` on ``--device cpu`` (tests/unit/cli/test_gpus_option.py);
the gate itself takes lanes on any device, so two real warm workers run here side by side:
each case's sides and its re-measurement in one worker, every case once, results in suite order.
The two workers share the CPU, so these timings mean nothing, as with ``--gpus 0,0``.
"""

from __future__ import annotations

import json
from pathlib import Path

from kbench_ci.gate.compare import run_compare
from kbench_ci.gate.progress import SuiteProgress
from kbench_ci.results.outcome import CompareRequest, GpuSlot
from kbench_ci.suite.settings import Execution
from kbench_ci.wire.protocol import CaseStarted
from tests.support.suite_repo import make_suite_repo

FOUR_CASES = [
    {"name": "vadd", "kind": "triton", "shapes": [{"N": 1024}, {"N": 2048}]},
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}, {"N": 512}]},
]


def test_two_warm_workers_share_the_cases_of_a_compare(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", FOUR_CASES)
    progress: list[SuiteProgress] = []
    lanes = (GpuSlot(0, "cpu", 0), GpuSlot(0, "cpu", 1))
    outcome = run_compare(
        CompareRequest(start=repo.root, base="main", device="cpu", output_dir=tmp_path / "out", gpus=lanes),
        on_progress=progress.append, execution=Execution(warm_worker=True, cache_dir=tmp_path / "cache"),
    )
    assert all(case.verdict.value != "failed" for case in outcome.cases), [c.message for c in outcome.cases]
    # Every worker call of a case in one process; two processes in all, each pinned to its lane.
    pids: dict[str, set[int]] = {}
    for update in progress:
        if isinstance(update.event, CaseStarted):
            pids.setdefault(update.case_id, set()).add(update.event.worker_pid)
    assert len(pids) == 4 and all(len(p) == 1 for p in pids.values()), pids
    lane_pid: dict[int, set[int]] = {}
    for case in outcome.cases:
        assert case.gpu is not None
        lane_pid.setdefault(case.gpu.position, set()).update(pids[case.case_id])
    assert all(len(p) == 1 for p in lane_pid.values()), lane_pid
    assert len(lane_pid) == 2 and len(set().union(*pids.values())) == 2
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [c["case_id"] for c in data["cases"]] == [c.case_id for c in outcome.cases]
    assert [c["case_id"] for c in data["cases"]] == ["vadd[N=1024]", "vadd[N=2048]", "scale[N=4096]", "scale[N=512]"]
    assert data["gpus_shared"] is True and data["gate"]["complete"] is True
    assert "Timings not valid" in (tmp_path / "out" / "benchmark.md").read_text()
