"""In a compare whose head failed its checks, the worker times nothing.

The verdict is the head's failure whatever the times; the base's and the baselines' would be
compared with nothing. One real worker case on the CPU each (measure/child.py ``run_case``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.measure.child import run_case
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.wire.protocol import CaseJob, SideSpec, VariantDone, WorkerEvent

CHEATS = Path(__file__).parents[2] / "fixtures" / "cheats_py"
REF = CHEATS / "ref.py"


def _settings() -> MeasureSettings:
    return MeasureSettings(device="cpu", seed=42, correctness_trials=2, timing_method="host_time", num_warmup=1,
                           trials_per_round=5, discard_first=0, rounds=2, flush_l2=False)


def _run(head: str, *, skip: tuple[str, ...] = ()) -> dict[str, VariantResult]:
    sides = (SideSpec(label="base", solution=str(CHEATS / "honest.py"), ref=str(REF), implementation="pytorch"),
             SideSpec(label="head", solution=str(CHEATS / head), ref=str(REF), implementation="pytorch"))
    events: list[WorkerEvent] = []
    run_case(CaseJob(case_id="k[N=64]", dims={"N": 64}, sides=sides, baselines=("pytorch-eager",), settings=_settings(),
                     skip=skip), events.append)
    return {event.result.label: event.result for event in events if isinstance(event, VariantDone)}


@pytest.mark.parametrize(("head", "status", "reason"), [
    ("writes_half.py", "incorrect", "the head is incorrect"),
    ("raises.py", "error", "the head failed"),
])
def test_a_failed_head_leaves_the_base_and_baselines_checked_but_untimed(head: str, status: str, reason: str) -> None:
    results = _run(head)
    assert results["head"].status == status
    base, eager = results["base"], results["pytorch-eager"]
    assert base.status == "ok" and base.correctness is not None and base.correctness.passed
    assert (base.rounds_ms, base.not_timed) == ((), reason)
    assert (eager.rounds_ms, eager.not_timed) == ((), reason)


def test_a_head_skipped_after_a_crash_leaves_the_base_untimed() -> None:
    results = _run("honest.py", skip=("head",))
    assert "head" not in results
    assert results["base"].status == "ok" and results["base"].rounds_ms == () and results["base"].not_timed == "the head failed"


def test_a_correct_head_is_timed_with_the_base_and_the_baselines() -> None:
    results = _run("honest.py")
    assert all(len(result.rounds_ms) == 2 and result.not_timed is None for result in results.values())
