"""A suite's baselines are timed with the base of a compare, on one side otherwise."""

from __future__ import annotations

import sys
from pathlib import Path

from kbench_ci.measure.child import run_case
from kbench_ci.results.model import CaseResult, MeasureSettings, VariantResult, baseline_speedups
from kbench_ci.wire.protocol import CaseJob, SideSpec, VariantDone, WorkerEvent

HONEST = Path(__file__).parents[2] / "fixtures" / "cheats_py" / "honest.py"

# Each side's ref.py counts its calls: the pytorch-eager baseline times the reference of the
# side it is attached to, so that side's reference is called for every timed trial.
REF = '''
CALLS = [0]


def reference(x, y, **_):
    CALLS[0] += 1
    return 2 * x + 1
'''


def _calls(path: Path) -> int:
    module = next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(path))
    return int(module.CALLS[0])


def _settings() -> MeasureSettings:
    return MeasureSettings(device="cpu", seed=42, correctness_trials=2, timing_method="host_time", num_warmup=1,
                           trials_per_round=5, discard_first=0, rounds=4, flush_l2=False)


def test_baselines_are_timed_with_the_base_of_a_compare(tmp_path: Path) -> None:
    base_ref, head_ref = tmp_path / "base_ref.py", tmp_path / "head_ref.py"
    base_ref.write_text(REF)
    head_ref.write_text(REF)
    sides = (
        SideSpec(label="base", solution=str(HONEST), ref=str(base_ref), implementation="pytorch"),
        SideSpec(label="head", solution=str(HONEST), ref=str(head_ref), implementation="pytorch"),
    )
    events: list[WorkerEvent] = []
    job = CaseJob(case_id="k[N=256]", dims={"N": 256}, sides=sides, baselines=("pytorch-eager",), settings=_settings())
    run_case(job, events.append)
    results = {e.result.label: e.result for e in events if isinstance(e, VariantDone)}
    baseline = results["pytorch-eager"]
    assert baseline.role == "baseline" and baseline.status == "ok"
    assert len(baseline.rounds_ms) == 4 and len(baseline.samples_ms) == 20
    timed_calls = 4 * 5
    # The base's reference was timed (a pull request that changes ref.py cannot change
    # what its speed-ups are measured against); the head's is only called to check the head.
    assert _calls(base_ref) >= timed_calls
    assert _calls(head_ref) < timed_calls
    # Timed in the same rounds as base and head, so the head's speedup over it is defined.
    case = CaseResult(case_id=job.case_id, dims=job.dims, seed=42, variants=tuple(results.values()), timing_method="host_time")
    (speedup,) = baseline_speedups(case, "head")
    assert speedup.name == "pytorch-eager" and speedup.speedup is not None and speedup.speedup > 0


def test_a_single_side_still_gets_its_baselines(tmp_path: Path) -> None:
    ref = tmp_path / "ref.py"
    ref.write_text(REF)
    side = SideSpec(label="solution", solution=str(HONEST), ref=str(ref), implementation="pytorch")
    events: list[WorkerEvent] = []
    run_case(CaseJob(case_id="k[N=64]", dims={"N": 64}, sides=(side,), baselines=("pytorch-eager",), settings=_settings()),
             events.append)
    labels = [e.result.label for e in events if isinstance(e, VariantDone)]
    assert labels == ["solution", "pytorch-eager"]


def test_speedup_is_baseline_median_over_solution_median() -> None:
    def v(label: str, role: str, ms: float | None, status: str = "ok") -> VariantResult:
        return VariantResult(label=label, kind=label, role=role, status=status,  # type: ignore[arg-type]
                             rounds_ms=((ms, ms, ms),) if ms is not None else ())

    case = CaseResult(case_id="k", dims={}, seed=1, timing_method="host_time", variants=(
        v("base", "solution", 1.0), v("head", "solution", 2.0), v("pytorch-eager", "baseline", 3.0),
        v("flashinfer", "baseline", None, "unavailable"),
    ))
    eager, flash = baseline_speedups(case, "head")
    assert eager.speedup == 1.5 and eager.baseline_median_ms == 3.0
    assert flash.speedup is None and flash.status == "unavailable"
