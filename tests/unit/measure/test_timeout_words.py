"""A timed-out case says what its timeout was made of: `--case-timeout 8` with a 10 s time budget
reported "timed out after 18 s (case timeout)", and the reader could not tell where 10 s came from."""

from __future__ import annotations

from dataclasses import replace

from kbench_ci.measure.parent import timeout_words
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.protocol import CaseJob, SideSpec, StoppingRule


def _job(budget_s: float | None) -> CaseJob:
    sides = tuple(SideSpec(label=label, solution="k.py", ref="ref.py", implementation="pytorch") for label in ("base", "head"))
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=10, flush_l2=False)
    job = CaseJob(case_id="k", dims={}, sides=sides, baselines=(), settings=settings)
    if budget_s is None:
        return job
    return replace(job, stopping=StoppingRule(threshold=0.01, budget_s=budget_s, max_rounds=400, batch_rounds=2,
                                              batch_growth=0.25, check_bootstrap=500, confidence=0.95, alpha=0.05))


def test_the_time_budget_a_timeout_includes_is_named() -> None:
    assert timeout_words(_job(10.0)) == "case timeout, plus the 10 s time budget"
    assert timeout_words(_job(2.5)) == "case timeout, plus the 2.5 s time budget"


def test_a_timeout_without_a_budget_is_the_case_timeout_alone() -> None:
    assert timeout_words(_job(None)) == "case timeout"
