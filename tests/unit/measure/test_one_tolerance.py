"""compare checks base and head at one tolerance, the base's."""

from __future__ import annotations

from pathlib import Path

from kbench_ci.measure.child import run_case
from kbench_ci.report.markdown import tolerance_text
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.wire.protocol import CaseJob, SideSpec, VariantDone, WorkerEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "tolerance"
HONEST = Path(__file__).parents[2] / "fixtures" / "cheats_py" / "honest.py"


def _compare(base: Path, head: Path, *, base_ref: str = "ref_strict.py", head_ref: str = "ref_loose.py") -> dict[str, VariantResult]:
    sides = (
        SideSpec(label="base", solution=str(base), ref=str(FIXTURES / base_ref), implementation="pytorch"),
        SideSpec(label="head", solution=str(head), ref=str(FIXTURES / head_ref), implementation="pytorch"),
    )
    settings = MeasureSettings(device="cpu", seed=42, correctness_trials=2, timing_method="host_time", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=2, flush_l2=False)
    events: list[WorkerEvent] = []
    run_case(CaseJob(case_id="k[N=256]", dims={"N": 256}, sides=sides, baselines=(), settings=settings), events.append)
    return {e.result.label: e.result for e in events if isinstance(e, VariantDone)}


def test_a_head_that_passes_only_at_its_own_looser_tolerance_is_incorrect() -> None:
    results = _compare(HONEST, FIXTURES / "off_by_3e-3.py")
    head = results["head"]
    assert results["base"].status == "ok"
    assert head.status == "incorrect"
    assert head.message is not None
    assert head.message.startswith("passes only with the head's looser tolerance (atol 0.01 vs ")
    assert "rtol 0.01 vs " in head.message
    # The report's tolerance column says whose tolerance it was.
    assert "(the base's: default (float32))" in tolerance_text(head)
    assert tolerance_text(results["base"]) == tolerance_text(head).replace("the base's: ", "")


def test_the_same_head_passes_when_the_base_has_that_tolerance_too() -> None:
    # The fixture is within ref_loose.py's tolerance: the failure above comes from the rule.
    assert _compare(HONEST, FIXTURES / "off_by_3e-3.py", base_ref="ref_loose.py")["head"].status == "ok"


def test_a_head_wrong_at_any_tolerance_is_not_blamed_on_the_tolerance() -> None:
    head = _compare(HONEST, FIXTURES / "off_by_1.py")["head"]
    assert head.status == "incorrect"
    assert head.message is not None and "looser tolerance" not in head.message


def test_an_honest_head_with_a_looser_ref_passes_at_the_bases_tolerance() -> None:
    head = _compare(HONEST, HONEST)["head"]
    assert head.status == "ok"
    assert "the base's" in tolerance_text(head)
