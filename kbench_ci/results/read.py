"""A ``run``'s or ``compare``'s results.json read back into the frozen outcome types, so that
``merge`` can judge and render shards' cases with the same gate and report code that wrote them.

Each decoder is the inverse of its writer in :mod:`kbench_ci.results.writers` (``case_json``,
``run_case_json``): what they wrote, these read, and writing it again gives the same JSON
(tests/unit/results/test_round_trip.py). Input that is not such a payload raises KeyError, TypeError or ValueError; the caller names the
file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from kbench_ci.results.model import CaseResult, MeasureSettings, VariantResult
from kbench_ci.results.outcome import (
    BASE,
    CONFIDENCE,
    HEAD,
    Assessment,
    BuildOutcome,
    CaseComparison,
    ChangedSelection,
    Measurement,
    PhaseTimes,
    ProfiledKernel,
    RevisionInfo,
    RunCase,
    ShardRecord,
    SideProfile,
)
from kbench_ci.results.schema import float_from_json, variant_from_json
from kbench_ci.stats import RatioEstimate, Verdict

__all__ = [
    "compare_case_from_json",
    "selection_from_json",
    "side_profile_from_json",
    "revision_from_json",
    "run_case_from_json",
    "settings_from_json",
    "shard_from_json",
]


def settings_from_json(data: Mapping[str, Any]) -> MeasureSettings:
    return MeasureSettings(
        device=str(data["device"]), seed=int(data["seed"]), correctness_trials=int(data["correctness_trials"]),
        timing_method=str(data["timing_method"]), num_warmup=int(data["num_warmup"]),
        trials_per_round=int(data["trials_per_round"]), discard_first=int(data["discard_first"]),
        rounds=int(data["rounds"]), flush_l2=data.get("cache_mode") == "cold",
        trials_per_round_rule=data.get("trials_per_round_rule"), time_budget_s=float(data.get("time_budget_s") or 0.0),
        seeds=tuple(int(seed) for seed in data.get("seeds") or ()),
    )


def revision_from_json(label: str, data: Mapping[str, Any]) -> RevisionInfo:
    return RevisionInfo(
        label=label, ref=data.get("ref"), sha=data.get("sha"), description=str(data["description"]),
        tree=str(data["tree"]), mode=data.get("mode"), merge_base_of=data.get("merge_base_of"),
        config=data.get("config"), note=data.get("note"),
    )


def shard_from_json(data: Mapping[str, Any] | None) -> ShardRecord | None:
    if data is None:
        return None
    balanced = data.get("balanced_by", "count")
    if balanced not in ("count", "timings"):
        raise ValueError(f"shard.balanced_by is {balanced!r}")
    return ShardRecord(
        index=int(data["index"]), count=int(data["count"]),
        all_case_ids=tuple(str(c) for c in data["all_case_ids"]), case_ids=tuple(str(c) for c in data["case_ids"]),
        balanced_by=cast(Literal["count", "timings"], balanced), timings_file=data.get("timings_file"),
        commit=data.get("commit"),
    )


def _phases(data: Mapping[str, Any] | None) -> PhaseTimes:
    data = data or {}
    return PhaseTimes(
        build_s=float(data.get("build", 0.0)), load_s=float(data.get("load", 0.0)),
        correctness_s=float(data.get("correctness", 0.0)), timing_s=float(data.get("timing", 0.0)),
        audit_s=float(data.get("audit", 0.0)),
    )


def _build(data: Mapping[str, Any] | None) -> BuildOutcome | None:
    if data is None:
        return None
    return BuildOutcome(
        side=str(data["side"]), kernel=str(data["kernel"]), ok=bool(data["ok"]), duration_s=float(data["seconds"]),
        command=data.get("command"), message=data.get("message"), compiler_output=data.get("compiler_output"),
        cached=bool(data.get("cached", False)),
    )


def _estimate(data: Mapping[str, Any] | None, confidence: float = CONFIDENCE) -> RatioEstimate | None:
    if data is None or data.get("ratio") is None:
        return None
    return RatioEstimate(
        ratio=float_from_json(data["ratio"]), ci_low=float_from_json(data["ci_low"]),
        ci_high=float_from_json(data["ci_high"]), p_value=float_from_json(data["p_value"]), n_rounds=int(data["n_rounds"]),
        confidence=float(data.get("confidence", confidence)),
        round_ratios=tuple(float_from_json(r) for r in data.get("round_ratios") or ()),
    )


def _variants(*found: Mapping[str, Any] | None) -> tuple[VariantResult, ...]:
    return tuple(variant_from_json(v) for v in found if v is not None)


def _case_result(
    case_id: str, dims: Mapping[str, Any], seed: int, data: Mapping[str, Any], variants: tuple[VariantResult, ...],
    timing_method: str | None,
) -> CaseResult:
    return CaseResult(
        case_id=case_id, dims=dict(dims), seed=seed, variants=variants,
        timing_method=str(data.get("timing_method") or timing_method or ""),
        timing_description=data.get("timing_description"), event_overhead_ms=data.get("event_overhead_ms"),
        cupti_residual_ms=data.get("cupti_residual_ms"),
        error=data.get("error"), gpu_state_before=data.get("gpu_state_before"), gpu_state_after=data.get("gpu_state_after"),
    )


def _measurement(
    data: Mapping[str, Any], *, case_id: str, dims: Mapping[str, Any], seed: int, verdict: Verdict,
    estimate: RatioEstimate | None, message: str | None, rounds: int, phases: PhaseTimes,
    baselines: tuple[VariantResult, ...] = (), user_error: str | None = None,
) -> Measurement:
    result = _case_result(case_id, dims, seed, data, (*_variants(data.get(BASE), data.get(HEAD)), *baselines), None)
    return Measurement(result=result, assessment=Assessment(verdict, estimate, message), rounds=rounds, phases=phases,
                       user_error=user_error)


def compare_case_from_json(data: Mapping[str, Any], *, seed: int) -> CaseComparison:
    """One entry of a compare results.json's ``cases``; ``seed``: the settings' seed."""
    case_id, dims = str(data["case_id"]), {str(k): int(v) for k, v in data["dims"].items()}
    verdict = Verdict(data["verdict"])
    estimate = _estimate(data)
    phases = _phases(data.get("seconds"))
    first_data = data.get("first_measurement")
    first = None
    if first_data is not None:
        first_estimate = _estimate(first_data.get("estimate"))
        first = _measurement(
            first_data, case_id=case_id, dims=dims, seed=seed, verdict=Verdict(first_data["verdict"]),
            estimate=first_estimate, message=first_data.get("message"), rounds=int(first_data["rounds"]),
            phases=_phases(first_data.get("seconds")),
        )
    measurement = None
    if data.get(BASE) is not None or data.get(HEAD) is not None or data.get("error") is not None:
        baselines = _variants(*(b.get("result") for b in data.get("baselines") or ()))
        head = data.get(HEAD) or {}
        rounds = estimate.n_rounds if estimate is not None else len(head.get("rounds_ms") or ())
        # results.json keeps neither the deciding measurement's own message (the case's adds the
        # re-measurement note) nor its own phase times (the case's are the sum): the case's stand in.
        measurement = _measurement(
            data, case_id=case_id, dims=dims, seed=seed, verdict=verdict, estimate=estimate,
            message=data.get("message"), rounds=rounds, phases=PhaseTimes(), baselines=baselines,
            user_error=data.get("user_error"),
        )
    implementation = data.get("implementation") or {}
    builds = data.get("builds") or {}
    return CaseComparison(
        case_id=case_id, kernel=str(data["kernel"]), dims=dims, verdict=verdict, threshold=float(data["threshold"]),
        estimate=estimate, message=data.get("message"), measurement=measurement, first=first,
        base_build=_build(builds.get(BASE)), head_build=_build(builds.get(HEAD)),
        base_kind=implementation.get(BASE), head_kind=implementation.get(HEAD), phases=phases,
        accepted=bool(data.get("accepted", False)),
        goalposts=tuple(data.get("goalposts", ())),
        profile=tuple(side_profile_from_json(side) for side in data.get("profile") or ()),
    )


def side_profile_from_json(data: Mapping[str, Any]) -> SideProfile:
    """One side of a case's ``profile`` (``compare --profile``)."""
    return SideProfile(
        label=str(data["label"]), problem=data.get("problem"),
        kernels=tuple(ProfiledKernel(**kernel) for kernel in data.get("kernels") or ()),
    )


def selection_from_json(data: Mapping[str, Any] | None) -> ChangedSelection | None:
    """A compare results.json's ``changed_only`` (``--changed-only``), or None."""
    if data is None:
        return None
    return ChangedSelection(
        not_affected=tuple(data.get("not_affected") or ()),
        reasons={str(k): tuple(v) for k, v in (data.get("reasons") or {}).items()},
        everything_reason=data.get("everything_reason"), notes=tuple(data.get("notes") or ()),
    )


def run_case_from_json(data: Mapping[str, Any], *, seed: int, timing_method: str) -> RunCase:
    """One entry of a run results.json's ``cases``."""
    case_id, dims = str(data["case_id"]), {str(k): int(v) for k, v in data["dims"].items()}
    solution = variant_from_json(data["result"]) if data.get("result") is not None else None
    baselines = _variants(*(b.get("result") for b in data.get("baselines") or ()))
    result = None
    if solution is not None or data.get("error") is not None:
        result = _case_result(case_id, dims, seed, data, (*([solution] if solution else []), *baselines), timing_method)
    status = data["status"]
    if status not in ("ok", "incorrect", "failed"):
        raise ValueError(f"case {case_id}: status {status!r}")
    return RunCase(
        case_id=case_id, kernel=str(data["kernel"]), dims=dims, status=status, message=data.get("message"),
        variant=solution, result=result, build=_build(data.get("build")),
        throttle_reasons=tuple(str(r) for r in data.get("throttle_reasons") or ()), phases=_phases(data.get("seconds")),
        implementation=str(data["implementation"]), user_error=data.get("user_error"),
    )


def bench_case_from_json(payload: Mapping[str, Any]) -> CaseResult:
    """The case of a ``bench`` results.json (:func:`kbench_ci.results.writers.bench_results_payload`)."""
    data = payload["case"]
    variants = tuple(variant_from_json(variant) for variant in data.get("variants") or ())
    return _case_result(str(data["case_id"]), data.get("dims") or {}, int(data["seed"]), data, variants, None)
