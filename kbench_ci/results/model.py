"""Measured results as frozen value objects, and their versioned JSON form.

results.json schema ``kbench-ci/bench`` version 1 (documented in docs/results-schema.md):
every raw sample in milliseconds, per timing round, the samples discarded as the first of a
round, correctness figures per seed and output, and the environment. Nothing is rounded here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kbench_ci.measure.correctness import CorrectnessResult, OutputCheck, TrialCheck

VariantStatus = Literal["ok", "incorrect", "error", "unavailable"]
Role = Literal["solution", "baseline"]

BENCH_SCHEMA = "kbench-ci/bench"
BENCH_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class VariantResult:
    """One solution or baseline in one case: correctness, then raw timing samples."""

    label: str
    kind: str
    role: Role
    status: VariantStatus
    message: str | None = None
    correctness: CorrectnessResult | None = None
    #: raw samples (ms) per timing round, after ``discard_first`` of each round
    rounds_ms: tuple[tuple[float, ...], ...] = ()
    #: the samples dropped as the first of each round (kept, never used in statistics)
    discarded_ms: tuple[float, ...] = ()
    #: wall time of the first call (module load, JIT, torch.compile, flashinfer JIT)
    first_call_ms: float | None = None
    #: wall time of an explicit compile step (CuTe DSL ``compile_kernel``)
    compile_ms: float | None = None
    #: the solution's outputs still matched the reference after the timing runs
    post_timing_check: bool | None = None
    notes: tuple[str, ...] = ()

    @property
    def samples_ms(self) -> tuple[float, ...]:
        return tuple(sample for round_samples in self.rounds_ms for sample in round_samples)

    @property
    def timed(self) -> bool:
        return self.status == "ok" and bool(self.samples_ms)


@dataclass(frozen=True, slots=True)
class CaseResult:
    case_id: str
    dims: Mapping[str, Any]
    seed: int
    variants: tuple[VariantResult, ...]
    timing_method: str
    timing_description: str | None = None
    #: cuda_event only: the event-pair overhead (ms) subtracted from every sample, calibrated
    #: against CUPTI at start-up; the uncorrected event time of a sample is sample + this
    event_overhead_ms: float | None = None
    #: a failure of the whole case (worker crash, timeout) that is not one variant's
    error: str | None = None
    gpu_state_before: Mapping[str, Any] | None = None
    gpu_state_after: Mapping[str, Any] | None = None

    def variant(self, label: str) -> VariantResult | None:
        return next((v for v in self.variants if v.label == label), None)


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


def _float(value: Any) -> float:
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
                max_abs_error=_float(o["max_abs_error"]), max_rel_error=_float(o["max_rel_error"]),
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


def variant_from_json(data: Mapping[str, Any]) -> VariantResult:
    return VariantResult(
        label=data["label"],
        kind=data["kind"],
        role=data["role"],
        status=data["status"],
        message=data.get("message"),
        correctness=correctness_from_json(data.get("correctness")),
        rounds_ms=tuple(tuple(float(s) for s in r) for r in data.get("rounds_ms", ())),
        discarded_ms=tuple(float(s) for s in data.get("discarded_ms", ())),
        first_call_ms=data.get("first_call_ms"),
        compile_ms=data.get("compile_ms"),
        post_timing_check=data.get("post_timing_check"),
        notes=tuple(data.get("notes", ())),
    )


def write_json_atomically(path: Path, payload: Mapping[str, Any]) -> None:
    """Write-then-rename, so a crash mid-write never leaves a truncated results file."""
    write_text_atomically(path, json.dumps(to_jsonable(payload), indent=1, allow_nan=False) + "\n")


def write_text_atomically(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
