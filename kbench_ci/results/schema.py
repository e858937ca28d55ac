"""The JSON form of results: schema ids and versions (documented in docs/results-schema.md), the
encoder every payload goes through, and the decoders of what a worker or a results.json holds.
NaN becomes null and infinities the strings "inf"/"-inf"; nothing is rounded here."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kbench_ci.results.model import (
    CompiledKernel,
    CorrectnessResult,
    EscapeAudit,
    KernelLaunch,
    OutputCheck,
    OutsideClock,
    SpeedOfLight,
    TrialCheck,
    VariantResult,
)
from kbench_ci.results.versions import (
    BENCH_SCHEMA,
    BENCH_SCHEMA_VERSION,
    COMPARE_SCHEMA,
    COMPARE_SCHEMA_VERSION,
    RUN_SCHEMA,
    RUN_SCHEMA_VERSION,
    SUMMARY_SCHEMA,
)

__all__ = [
    "BENCH_SCHEMA", "BENCH_SCHEMA_VERSION", "COMPARE_SCHEMA", "COMPARE_SCHEMA_VERSION", "RUN_SCHEMA",
    "RUN_SCHEMA_VERSION", "SUMMARY_SCHEMA", "correctness_from_json", "escape_audit_from_json", "float_from_json",
    "kernel_launch_from_json", "speed_of_light_from_json", "to_jsonable", "variant_from_json",
]


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (CorrectnessResult, TrialCheck)):
            data["passed"] = value.passed
        return data
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and value != value:
        return None  # JSON has no NaN
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value


def float_from_json(value: Any) -> float:
    """A number as :func:`to_jsonable` wrote it: "inf"/"-inf" strings and None (NaN) back to floats."""
    if value == "inf":
        return float("inf")
    if value == "-inf":
        return float("-inf")
    if value is None:
        return float("nan")
    return float(value)


def correctness_from_json(data: Mapping[str, Any] | None) -> CorrectnessResult | None:
    if data is None:
        return None
    trials = []
    for trial in data["trials"]:
        outputs = tuple(
            OutputCheck(
                name=o["name"], passed=o["passed"], problem=o["problem"],
                max_abs_error=float_from_json(o["max_abs_error"]), max_rel_error=float_from_json(o["max_rel_error"]),
                mismatched=o["mismatched"], numel=o["numel"], atol=o["atol"], rtol=o["rtol"],
                tolerance_source=o["tolerance_source"],
                first_mismatch=tuple(o["first_mismatch"]) if o.get("first_mismatch") else None,
            )
            for o in trial["outputs"]
        )
        trials.append(
            TrialCheck(seed=trial["seed"], outputs=outputs, modified_inputs=tuple(trial["modified_inputs"]), error=trial["error"])
        )
    return CorrectnessResult(trials=tuple(trials))


def escape_audit_from_json(data: Mapping[str, Any] | None) -> EscapeAudit | None:
    if data is None:
        return None
    return EscapeAudit(
        status=data["status"],
        event_ms=tuple(float_from_json(v) for v in data.get("event_ms", ())),
        cupti_span_ms=tuple(float_from_json(v) for v in data.get("cupti_span_ms", ())),
        escaped_ms=tuple(float_from_json(v) for v in data.get("escaped_ms", ())),
        streams=tuple(int(v) for v in data.get("streams", ())),
        detail=data.get("detail"),
        cost_s=float(data.get("cost_s", 0.0)),
        launches=tuple(kernel_launch_from_json(entry) for entry in data.get("launches", ())),
    )


def outside_clock_from_json(data: Mapping[str, Any] | None) -> OutsideClock | None:
    if data is None:
        return None

    def optional(key: str) -> float | None:
        value = data.get(key)
        return None if value is None else float_from_json(value)

    def floats(key: str) -> tuple[float, ...]:
        return tuple(float_from_json(v) for v in data.get(key, ()))

    return OutsideClock(
        source=data["source"], calls=int(data["calls"]), gap_us=float_from_json(data["gap_us"]),
        pre_us=float_from_json(data["pre_us"]), post_us=float_from_json(data["post_us"]), reference=data.get("reference"),
        reference_gap_us=optional("reference_gap_us"), reference_pre_us=optional("reference_pre_us"),
        reference_post_us=optional("reference_post_us"), resolution_us=optional("resolution_us"),
        finding=data.get("finding"),
        span_us=floats("span_us"), reported_us=floats("reported_us"), pre_call_us=floats("pre_call_us"),
        post_call_us=floats("post_call_us"), lead_us=optional("lead_us"), reference_lead_us=optional("reference_lead_us"),
        batch_calls=int(data.get("batch_calls", 1)), counted_us=float_from_json(data.get("counted_us", 0.0)),
    )


def _triple(value: Any) -> tuple[int, int, int] | None:
    return (int(value[0]), int(value[1]), int(value[2])) if value is not None else None


def kernel_launch_from_json(data: Mapping[str, Any]) -> KernelLaunch:
    blocks_per_sm = data.get("blocks_per_sm")
    return KernelLaunch(
        name=data["name"], per_call=float(data["per_call"]), share=float_from_json(data["share"]),
        mean_us=float_from_json(data["mean_us"]), grid=_triple(data.get("grid")), block=_triple(data.get("block")),
        registers=data.get("registers"), shared_bytes=data.get("shared_bytes"),
        blocks_per_sm=float_from_json(blocks_per_sm) if blocks_per_sm is not None else None,
        occupancy_pct=data.get("occupancy_pct"),
    )


def speed_of_light_from_json(data: Mapping[str, Any] | None) -> SpeedOfLight | None:
    if data is None:
        return None
    return SpeedOfLight(
        source=data["source"], bytes=data.get("bytes"), flops=data.get("flops"), median_ms=float(data["median_ms"]),
        copy_bytes_per_s=data.get("copy_bytes_per_s"), matmul_flops_per_s=data.get("matmul_flops_per_s"),
        matmul_dtype=data.get("matmul_dtype"), floor_ms=data.get("floor_ms"),
    )


def variant_from_json(data: Mapping[str, Any]) -> VariantResult:
    return VariantResult(
        label=data["label"],
        kind=data["kind"],
        role=data["role"],
        status=data["status"],
        message=data.get("message"),
        correctness=correctness_from_json(data.get("correctness")),
        rounds_ms=tuple(tuple(float(s) for s in r) for r in data.get("rounds_ms", ())),
        round_versions=tuple(tuple(int(v) for v in r) for r in data.get("round_versions", ())),
        discarded_ms=tuple(float(s) for s in data.get("discarded_ms", ())),
        first_call_ms=data.get("first_call_ms"),
        compile_ms=data.get("compile_ms"),
        post_timing_check=data.get("post_timing_check"),
        fresh_inputs=data.get("fresh_inputs"),
        timing_shift_ms=data.get("timing_shift_ms"),
        escape_audit=escape_audit_from_json(data.get("escape_audit")),
        outside_clock=outside_clock_from_json(data.get("outside_clock")),
        speed_of_light=speed_of_light_from_json(data.get("speed_of_light")),
        compiled=tuple(CompiledKernel(**entry) for entry in data.get("compiled", ())),
        notes=tuple(data.get("notes", ())),
        not_timed=data.get("not_timed"),
    )
