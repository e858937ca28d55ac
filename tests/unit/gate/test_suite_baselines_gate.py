"""compare and run pass the suite's baselines to the worker, keep their samples in results.json
and show the head's speedup over each next to head/base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbench_ci.gate.compare import run_compare
from kbench_ci.gate.run import run_suite
from kbench_ci.measure.parent import WorkerOutcome
from kbench_ci.results.model import CaseResult, VariantResult
from kbench_ci.results.outcome import CompareRequest, RunRequest
from kbench_ci.wire.protocol import CaseJob
from tests.support.suite_repo import TempRepo
from tests.unit.gate.test_compare_logic import case_result, rounds_of, variant

TOML = """[defaults]
rounds = 4
num_trials = 40
[[kernels]]
name = "add"
solution = "k/add.py"
ref = "k/ref.py"
baselines = ["pytorch-eager", "flashinfer"]
shapes = [{N = 16}]
"""


class BaselineWorker:
    """Both sides take 1 ms; pytorch-eager takes 2 ms; flashinfer is unavailable."""

    def __init__(self) -> None:
        self.jobs: list[CaseJob] = []

    def __call__(self, job: CaseJob, *, timeout_s: float, on_event: Any = None) -> tuple[CaseResult, WorkerOutcome]:
        self.jobs.append(job)
        variants = [variant(side.label, n_rounds=job.settings.rounds, seed=i) for i, side in enumerate(job.sides)]
        for name in job.baselines:
            if name == "flashinfer":
                variants.append(VariantResult(label=name, kind=name, role="baseline", status="unavailable",
                                              message="flashinfer is not installed"))
            else:
                variants.append(VariantResult(label=name, kind=name, role="baseline", status="ok",
                                              rounds_ms=rounds_of(2.0, job.settings.rounds)))
        return case_result(*variants), WorkerOutcome(environment={"device": "cuda:0"})


def _repo(tmp_path: Path) -> TempRepo:
    repo = TempRepo(tmp_path / "repo")
    repo.commit({"kbench.toml": TOML, "k/ref.py": "def reference(**_): pass\n", "k/add.py": "# v1\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n"}, "base")
    return repo


def test_compare_times_baselines_with_the_head_and_reports_the_speedup(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    worker = BaselineWorker()
    outcome = run_compare(
        CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=tmp_path / "out"), worker=worker
    )
    (job,) = worker.jobs
    assert [s.label for s in job.sides] == ["base", "head"] and job.baselines == ("pytorch-eager", "flashinfer")
    (case,) = outcome.cases
    eager, flash = case.baselines
    assert abs(eager.speedup - 2.0) < 0.01 and flash.speedup is None  # type: ignore[operator]
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    (entry,) = data["cases"]
    by_name = {b["name"]: b for b in entry["baselines"]}
    assert len(by_name["pytorch-eager"]["result"]["rounds_ms"]) == 4
    assert abs(by_name["pytorch-eager"]["speedup"] - 2.0) < 0.01
    assert by_name["flashinfer"]["status"] == "unavailable" and by_name["flashinfer"]["speedup"] is None
    report = (tmp_path / "out" / "benchmark.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| case"))
    assert "head vs baselines" in header
    row = next(line for line in report.splitlines() if line.startswith("| `add`"))
    assert "2.00× faster than `pytorch-eager`" in row and "`flashinfer`: unavailable" in row


def test_run_times_baselines_and_keeps_their_samples(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    worker = BaselineWorker()
    outcome = run_suite(RunRequest(start=repo.root, device="cuda:0", output_dir=tmp_path / "out"), worker=worker)
    assert worker.jobs[0].baselines == ("pytorch-eager", "flashinfer")
    assert abs(outcome.cases[0].baselines[0].speedup - 2.0) < 0.01  # type: ignore[operator]
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    eager = data["cases"][0]["baselines"][0]
    assert eager["name"] == "pytorch-eager" and len(eager["result"]["rounds_ms"]) == 4
    report = (tmp_path / "out" / "benchmark.md").read_text()
    assert "2.00× faster than `pytorch-eager`" in report
