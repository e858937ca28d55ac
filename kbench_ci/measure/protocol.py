"""What a worker is asked to do for one case: plain, JSON-serialisable value objects."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from kbench_ci.results.model import MeasureSettings


@dataclass(frozen=True, slots=True)
class SideSpec:
    """One solution to check and time: the bench solution, or the base or head of a compare."""

    label: str
    solution: str
    ref: str
    implementation: str
    atol: float | None = None
    rtol: float | None = None
    ptr_sizes: dict[str, str] = field(default_factory=dict)
    ptr_size: str | None = None
    precision: str | None = None


@dataclass(frozen=True, slots=True)
class CaseJob:
    """One case for one worker: every side and baseline, measured with the same settings."""

    case_id: str
    dims: dict[str, Any]
    sides: tuple[SideSpec, ...]
    baselines: tuple[str, ...]
    settings: MeasureSettings
    #: variant labels not to run (they crashed or hung a previous worker)
    skip: tuple[str, ...] = ()
    #: cuda_event only: an event overhead already calibrated on this device in this run, so
    #: later workers skip the (profiler-based, ~1-2 s) calibration
    event_overhead_ms: float | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> CaseJob:
        data = json.loads(text)
        data["sides"] = tuple(SideSpec(**side) for side in data["sides"])
        data["baselines"] = tuple(data["baselines"])
        data["skip"] = tuple(data.get("skip", ()))
        data["settings"] = MeasureSettings(**data["settings"])
        return CaseJob(**data)

    def variant_labels(self) -> tuple[str, ...]:
        return tuple(side.label for side in self.sides) + tuple(self.baselines)
