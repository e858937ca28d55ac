"""results.json as ``bench``, ``run`` and ``compare`` write it (schemas ``kbench-ci/bench``,
``kbench-ci/run`` and ``kbench-ci/compare``, documented in docs/results-schema.md), beside :mod:`~kbench_ci.results.read`,
which reads their cases back: what these write, those read, and writing it again gives the same
JSON (tests/unit/results/test_round_trip.py holds each pair to that)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbench_ci import __version__
from kbench_ci.results.model import BaselineSpeedup, CaseResult, MeasureSettings
from kbench_ci.results.outcome import (
    BASE,
    HEAD,
    CaseComparison,
    CompareOutcome,
    Measurement,
    RunCase,
    RunOutcome,
    RunRequest,
    gpus_shared,
)
from kbench_ci.results.schema import (
    BENCH_SCHEMA,
    BENCH_SCHEMA_VERSION,
    COMPARE_SCHEMA,
    COMPARE_SCHEMA_VERSION,
    RUN_SCHEMA,
    RUN_SCHEMA_VERSION,
)
from kbench_ci.stats import RatioEstimate, summarize

__all__ = ["BenchRecord", "bench_results_payload", "case_json", "compare_payload", "run_case_json", "run_payload"]


def _header(schema: str, version: int, command_line: Sequence[str]) -> dict[str, Any]:
    """The first keys of every results.json: what wrote it, when, and from which command."""
    return {
        "schema": schema,
        "schema_version": version,
        "tool_version": __version__,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command_line": list(command_line) or sys.argv,
    }


@dataclass(frozen=True, slots=True)
class BenchRecord:
    """What ``bench`` was asked to do, as its results.json records it."""

    command_line: tuple[str, ...]
    solution: str
    ref: str
    implementation: str
    settings: MeasureSettings
    baselines: tuple[str, ...]
    atol: float | None
    rtol: float | None
    precision: str | None
    ptr_sizes: Mapping[str, str]
    ptr_size: str | None


def bench_results_payload(record: BenchRecord, case: CaseResult, environment: Mapping[str, Any] | None) -> dict[str, Any]:
    """``bench``'s results.json; :func:`kbench_ci.results.read.bench_case_from_json` reads its case back."""
    settings = record.settings
    return {
        **_header(BENCH_SCHEMA, BENCH_SCHEMA_VERSION, record.command_line),
        "solution": record.solution,
        "ref": record.ref,
        "implementation": record.implementation,
        "settings": {
            "device": settings.device,
            "seed": settings.seed,
            "correctness_trials": settings.correctness_trials,
            "timing_method": settings.timing_method,
            "num_warmup": settings.num_warmup,
            "num_trials": settings.trials_per_round,
            "discard_first": settings.discard_first,
            "cache_mode": "cold" if settings.flush_l2 else "warm",
            "baselines": list(record.baselines),
            "atol": record.atol,
            "rtol": record.rtol,
            "precision": record.precision,
            "ptr_sizes": dict(record.ptr_sizes),
            "ptr_size": record.ptr_size,
        },
        "environment": environment,
        "case": case,
    }


def _baseline_json(speedup: BaselineSpeedup, result: CaseResult | None) -> dict[str, Any]:
    return {**speedup.as_json(), "result": result.variant(speedup.name) if result is not None else None}


def run_case_json(case: RunCase) -> dict[str, Any]:
    """One entry of a run results.json's ``cases`` (read back by ``run_case_from_json``)."""
    summary = summarize(case.variant.samples_ms) if case.variant is not None and case.variant.timed else None
    return {
        "case_id": case.case_id,
        "kernel": case.kernel,
        "dims": dict(case.dims),
        "implementation": case.implementation,
        "status": case.status,
        "message": case.message,
        # why it failed when the user's ref.py, setup() or settings are to blame (exit 2, also
        # after ``merge``); None for a kernel's own failure
        "user_error": case.user_error,
        "median_ms": summary.median if summary else None,
        "ci_low_ms": summary.ci_low if summary else None,
        "ci_high_ms": summary.ci_high if summary else None,
        "n_samples": summary.n if summary else 0,
        "throttled": case.throttled,
        "throttle_reasons": list(case.throttle_reasons),
        "gpu_state_before": case.result.gpu_state_before if case.result else None,
        "gpu_state_after": case.result.gpu_state_after if case.result else None,
        "timing_description": case.result.timing_description if case.result else None,
        "event_overhead_ms": case.result.event_overhead_ms if case.result else None,
        "cupti_residual_ms": case.result.cupti_residual_ms if case.result else None,
        "error": case.result.error if case.result else None,
        "build": case.build.as_json() if case.build else None,
        "seconds": case.phases.as_json(),
        "result": case.variant,
        # the suite's baselines, each with its raw samples, and the solution's speedup over it
        "baselines": [_baseline_json(b, case.result) for b in case.baselines],
        # --gpus: the CUDA index (as this machine counts them) of the GPU that measured it
        "gpu_index": case.gpu.index if case.gpu is not None else None,
    }


def run_payload(outcome: RunOutcome, request: RunRequest) -> dict[str, Any]:
    """results.json of ``run``: schema ``kbench-ci/run`` version 1."""
    return {
        **_header(RUN_SCHEMA, RUN_SCHEMA_VERSION, request.command_line),
        "gate": {
            "passed": outcome.passed,
            "complete": outcome.complete,
            "summary": outcome.summary,
            "counts": outcome.counts,
        },
        "config": str(outcome.config_path),
        "settings": {**outcome.settings.as_json(), "kernels": list(request.kernels), "isolation": outcome.isolation},
        "environment": outcome.environment,
        "seconds": {"wall": outcome.wall_s},
        "cases": [run_case_json(case) for case in outcome.cases],
        "shard": outcome.shard.as_json() if outcome.shard is not None else None,
        # --gpus: the workers the cases were spread over; shared: two on one GPU (timings not valid)
        "gpus": [slot.as_json() for slot in outcome.gpus],
        "gpus_shared": gpus_shared(outcome.gpus),
        # the commit measured, for `history record` (dirty: the tree differed from it)
        "commit": outcome.commit.as_json() if outcome.commit is not None else None,
    }


def _estimate_json(estimate: RatioEstimate | None) -> dict[str, Any] | None:
    if estimate is None:
        return None
    return {
        "ratio": estimate.ratio, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high,
        "p_value": estimate.p_value, "n_rounds": estimate.n_rounds, "confidence": estimate.confidence,
        "round_ratios": list(estimate.round_ratios),
    }


def _measurement_json(measurement: Measurement | None) -> dict[str, Any] | None:
    if measurement is None:
        return None
    result = measurement.result
    return {
        "verdict": measurement.verdict.value,
        "message": measurement.assessment.message,
        "rounds": measurement.rounds,
        "estimate": _estimate_json(measurement.estimate),
        "base": result.variant(BASE),
        "head": result.variant(HEAD),
        "timing_method": result.timing_method,
        "timing_description": result.timing_description,
        "event_overhead_ms": getattr(result, "event_overhead_ms", None),
        "cupti_residual_ms": getattr(result, "cupti_residual_ms", None),
        "error": result.error,
        "gpu_state_before": result.gpu_state_before,
        "gpu_state_after": result.gpu_state_after,
        "seconds": measurement.phases.as_json(),
    }


def case_json(case: CaseComparison) -> dict[str, Any]:
    estimate = case.estimate
    result = case.result
    return {
        "case_id": case.case_id,
        "kernel": case.kernel,
        "dims": dict(case.dims),
        "verdict": case.verdict.value,
        "accepted": case.accepted,
        "goalposts": list(case.goalposts),
        "threshold": case.threshold,
        "ratio": estimate.ratio if estimate else None,
        "ci_low": estimate.ci_low if estimate else None,
        "ci_high": estimate.ci_high if estimate else None,
        "p_value": estimate.p_value if estimate else None,
        "n_rounds": estimate.n_rounds if estimate else None,
        "round_ratios": list(estimate.round_ratios) if estimate else None,
        "remeasured": case.remeasured,
        "throttled": case.throttled,
        "throttle_reasons": list(case.throttle_reasons),
        "base": case.base,
        "head": case.head,
        # the suite's baselines, timed with the head: the head's speedup over each, raw samples
        "baselines": [
            {**b.as_json(), "result": result.variant(b.name) if result is not None else None} for b in case.baselines
        ],
        "message": case.message,
        # why it failed when the user's ref.py, setup() or settings are to blame (exit 2, also
        # after ``merge``); None for a kernel's own failure
        "user_error": case.user_error,
        "profile": [side.as_json() for side in case.profile],
        "implementation": {"base": case.base_kind, "head": case.head_kind},
        "timing_method": result.timing_method if result else None,
        "timing_description": result.timing_description if result else None,
        "event_overhead_ms": getattr(result, "event_overhead_ms", None) if result else None,
        "cupti_residual_ms": getattr(result, "cupti_residual_ms", None) if result else None,
        "error": result.error if result else None,
        "gpu_state_before": result.gpu_state_before if result else None,
        "gpu_state_after": result.gpu_state_after if result else None,
        "first_measurement": _measurement_json(case.first),
        "builds": {
            "base": case.base_build.as_json() if case.base_build else None,
            "head": case.head_build.as_json() if case.head_build else None,
        },
        "seconds": case.phases.as_json(),
        # --gpus: the CUDA index (as this machine counts them) of the GPU that measured both sides
        "gpu_index": case.gpu.index if case.gpu is not None else None,
    }


def compare_payload(outcome: CompareOutcome) -> dict[str, Any]:
    """results.json of ``compare``: schema ``kbench-ci/compare`` version 1 (see docs/compare.md)."""
    phases = outcome.phases
    return {
        **_header(COMPARE_SCHEMA, COMPARE_SCHEMA_VERSION, outcome.request.command_line),
        "gate": outcome.gate.as_json(),
        "base": outcome.base.as_json(),
        "head": outcome.head.as_json(),
        "settings": outcome.settings_json(),
        "environment": outcome.environment,
        "seconds": {
            "wall": outcome.wall_s,
            "setup": outcome.setup_s,
            **{k: v for k, v in phases.as_json().items() if k != "total"},
        },
        "cases": [case_json(case) for case in outcome.cases],
        "shard": outcome.shard.as_json() if outcome.shard is not None else None,
        # --changed-only: the kernels left out as not affected, and why the others were measured
        "changed_only": outcome.selection.as_json() if outcome.selection is not None else None,
        # --gpus: the workers the cases were spread over; shared: two on one GPU (timings not valid)
        "gpus": [slot.as_json() for slot in outcome.gpus],
        "gpus_shared": gpus_shared(outcome.gpus),
    }
