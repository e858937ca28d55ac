"""The worker protocol: the job a worker is given and the events it reports, as frozen value
objects with one encode and one decode each. Nothing else builds or parses these as dicts."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kbench_ci.basefiles import GuardedFile
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.results.schema import to_jsonable, variant_from_json

#: exit code of a worker that stopped itself because the CUDA context was lost
CONTEXT_LOST_EXIT = 86


#: the NVTX range ``compare --profile`` has ncu profile (measure/profile_call.py makes it; here,
#: where the parent can read it without importing torch)
PROFILE_RANGE = "kbench_ci_profile"


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
    #: the suite's ``bytes``/``flops`` expressions over the dims: the work one call must do
    bytes_expr: str | None = None
    flops_expr: str | None = None


@dataclass(frozen=True, slots=True)
class StoppingRule:
    """Adaptive rounds (``compare``): after the job's ``rounds`` (the minimum), keep timing both
    sides in batches until the head/base verdict at ``threshold`` is decided (``unchanged``,
    ``slower`` or ``faster``: :func:`kbench_ci.stats.classify`), or ``budget_s`` seconds of
    timing are spent, or ``max_rounds`` rounds are done.

    A batch is even (at least ``batch_rounds``, about ``batch_growth`` times the rounds done), so
    every batch keeps the A B / B A alternation balanced; the interim verdicts use
    ``check_bootstrap`` bootstrap replicates (:mod:`kbench_ci.measure.schedule` says why both
    are kept small). A ``slower`` reached this way still goes through the parent's
    re-measurement before it fails the gate: stopping when the interval first clears the band
    is a form of optional stopping.
    """

    threshold: float
    budget_s: float
    max_rounds: int
    batch_rounds: int
    batch_growth: float
    check_bootstrap: int
    confidence: float
    alpha: float


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
    #: adaptive rounds between exactly two sides (compare); None: exactly ``settings.rounds``
    stopping: StoppingRule | None = None
    #: compare: the case is accepted (``--accept``), so a head that fails the base's reference
    #: after changing ref.py is noted, not failed
    accept_changed_reference: bool = False
    #: compare: the head's ref.py differs from the base's (the parent compared the files): under
    #: the judge, which never loads the pull request's code, it runs in a process of its own
    head_reference_changed: bool = False
    #: bytes the worker allocates before it loads anything, held for the whole case: a
    #: re-measurement lays its buffers out elsewhere (see gate/compare_case.py)
    placement_pad_bytes: int = 0
    #: compare: the base kernel's files as they were before any pull-request code ran
    #: (kbench_ci.basefiles), put back and checked before each load of the base
    base_files: tuple[GuardedFile, ...] = ()

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @staticmethod
    def from_json(text: str) -> CaseJob:
        data = json.loads(text)
        data["sides"] = tuple(SideSpec(**side) for side in data["sides"])
        data["baselines"] = tuple(data["baselines"])
        data["skip"] = tuple(data.get("skip", ()))
        data["base_files"] = tuple(GuardedFile(**entry) for entry in data.get("base_files", ()))
        data["settings"] = MeasureSettings(**{**data["settings"], "seeds": tuple(data["settings"].get("seeds", ()))})
        if data.get("stopping") is not None:
            data["stopping"] = StoppingRule(**data["stopping"])
        return CaseJob(**data)

    def variant_labels(self) -> tuple[str, ...]:
        return tuple(side.label for side in self.sides) + tuple(self.baselines)

    def why_not_timed(self, statuses: Mapping[str, str]) -> str | None:
        """Why the variants that passed their checks are not timed, or None to time them. A
        compare (sides base, head) whose head failed its checks (incorrect, raised, or skipped
        after a crash) has its verdict whatever the times, and the base's time (and the
        baselines', timed to say the head's speed-up) would be compared with nothing: a trial
        spent 37 of 235 s on it. ``statuses``: label -> status of the variants checked (a head
        that is not there was skipped)."""
        if len(self.sides) < 2:
            return None  # bench and run: one side, timed with its baselines
        heads = [side.label for side in self.sides[1:]]
        if any(statuses.get(label) == "ok" for label in heads):
            return None
        return "the head is incorrect" if any(statuses.get(label) == "incorrect" for label in heads) else "the head failed"

    def failed_result(self, label: str, message: str) -> VariantResult:
        """The final result of variant ``label`` (a side or a baseline) that could not be measured."""
        side = next((side for side in self.sides if side.label == label), None)
        if side is None:
            return VariantResult(label=label, kind=label, role="baseline", status="error", message=message)
        return VariantResult(label=label, kind=side.implementation, role="solution", status="error", message=message)


# --------------------------------------------------------------------------------------------
# Events: what a worker reports, one JSON line each, in the order it happens
# --------------------------------------------------------------------------------------------

Phase = Literal["load", "compile", "correctness", "timing", "audit"]


@dataclass(frozen=True, slots=True)
class Begin:
    """The worker starts ``phase`` of ``variant``: a crash from here on is that variant's."""

    variant: str
    phase: Phase
    #: when, on the system-wide monotonic clock: the parent reads events only every few ms, and
    #: a 20 ms phase timed on arrival read as 0 or one poll interval
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class ReferenceCall:
    """The worker calls ref.py's reference() for ``variant`` (``running``), or it returned: a hang
    or crash in between is the reference's (exit 2), not the variant's it was checking."""

    variant: str
    running: bool


@dataclass(frozen=True, slots=True)
class Progress:
    variant: str
    phase: Phase
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class VariantDone:
    """A variant's final result (written as soon as it is final, so a later crash keeps it)."""

    result: VariantResult


@dataclass(frozen=True, slots=True)
class EnvironmentReport:
    environment: dict[str, Any]


@dataclass(frozen=True, slots=True)
class GpuStateReport:
    when: Literal["before", "after"]
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TimingDescription:
    text: str
    event_overhead_ms: float | None
    #: the median of the variants' shifts beyond the event overhead (measure/calibration.py)
    cupti_residual_ms: float | None = None


#: whose a :class:`LoadError` is: the kernel's own code (a solution file that cannot load), or
#: the user's ref.py (its reference() or setup()), a setup() that breaks the contract, or a
#: setting (sizes that overflow 64 bits)
Blame = Literal["kernel", "user"]


@dataclass(frozen=True, slots=True)
class LoadError:
    """A broken user-file contract or a missing package: the CLI's message and exit code.

    ``blame``: ``bench`` exits with ``exit_code`` either way; ``run`` and ``compare`` exit 2 for a
    case that failed with a ``user`` error (fix your files) and 1 for the kernel's (see
    :func:`kbench_ci.cli.suite_common.finish`).
    """

    variant: str
    error_type: str
    exit_code: int
    message: str
    hint: str | None
    blame: Blame = "kernel"

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


@dataclass(frozen=True, slots=True)
class CaseStarted:
    """The worker took the job: which process serves it, and how many cases it served before
    (0 in a fresh worker). The first event of every job."""

    worker_pid: int
    served_before: int
    #: when, on the system-wide monotonic clock (see Begin.at)
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class CaseFinished:
    """The job ended well and the worker cleaned up after it: the last event of every job.

    ``retire``: the worker must not serve another case (``reason`` says why: a CUDA error left
    behind after the case, a case that could not be cleaned up after); it exits, and the parent
    starts a fresh one for the next case.
    """

    retire: bool = False
    reason: str | None = None
    #: when, on the system-wide monotonic clock (see Begin.at)
    at: float = field(default_factory=time.monotonic)


WorkerEvent = (
    Begin | ReferenceCall | Progress | VariantDone | EnvironmentReport | GpuStateReport | TimingDescription | LoadError
    | CaseStarted | CaseFinished
)

_TAGS: dict[type[Any], str] = {
    Begin: "begin",
    ReferenceCall: "reference_call",
    Progress: "progress",
    VariantDone: "variant",
    EnvironmentReport: "environment",
    GpuStateReport: "gpu_state",
    TimingDescription: "timing_description",
    LoadError: "load_error",
    CaseStarted: "case_started",
    CaseFinished: "case_finished",
}
_TYPES = {tag: cls for cls, tag in _TAGS.items()}


def encode_event(event: WorkerEvent) -> str:
    """One JSON line (no newline). NaN and infinities are encoded as results.json encodes them."""
    payload = {"event": _TAGS[type(event)], **to_jsonable(event)}
    return json.dumps(payload, allow_nan=False)


def decode_event(line: str | bytes) -> WorkerEvent:
    data = json.loads(line)
    cls = _TYPES[data.pop("event")]
    if cls is VariantDone:
        return VariantDone(variant_from_json(data["result"]))
    event: WorkerEvent = cls(**data)
    return event


class ForgedEvent(ValueError):
    """A line in the events file that the judge did not write (its key's mark is wrong or
    missing, or it is out of order)."""


@dataclass(slots=True)
class EventSigner:
    """Marks (judge) and checks (parent) every line of one case's events file: an HMAC-SHA256,
    under the ticket's key, of the line's number and text. A line added, changed, moved or
    replayed from another case fails the check. The key exists in the parent and in the
    judge, which is not dumpable: no side reads it from its memory or its /proc files."""

    key: bytes
    number: int = 0

    def _mark(self, text: str) -> str:
        return hmac.new(self.key, f"{self.number}:{text}".encode(), hashlib.sha256).hexdigest()

    def sign(self, text: str) -> str:
        line = f"{self._mark(text)} {text}"
        self.number += 1
        return line

    def check(self, line: str) -> str:
        """The text of a signed ``line`` (no newline); :class:`ForgedEvent` when it is not the
        judge's next line."""
        mark, _, text = line.partition(" ")
        # as bytes: compare_digest refuses a str that is not ASCII (a forged mark may be anything)
        if not hmac.compare_digest(mark.encode("utf-8", "replace"), self._mark(text).encode()):
            raise ForgedEvent(f"line {self.number + 1} of the events file was not written by the judge: {line[:120]!r}")
        self.number += 1
        return text


# --------------------------------------------------------------------------------------------
# Jobs: what the parent sends a worker, one line each on the worker's lifeline pipe
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobTicket:
    """Run the :class:`CaseJob` stored at ``job_path``; append its events to ``events_path``.

    A worker serves tickets one at a time, in the order they come; the parent sends the next
    only after the previous job's :class:`CaseFinished`.
    """

    job_path: str
    events_path: str
    #: hex key of this case's event lines (:class:`EventSigner`): set for the judge, whose
    #: sides' code must not be able to add a line (where no sandbox holds them, the events
    #: file is theirs to write); empty for the in-process worker, whose user code could read it
    key: str = ""
    #: SHA-256 of the job file as the parent wrote it (the judge checks it: without Landlock
    #: a side could rewrite the file, say to time the head's solution as the base); empty:
    #: not checked
    job_sha256: str = ""

    def encode(self) -> bytes:
        """One JSON line, newline included (a pipe write this small is atomic)."""
        return (json.dumps(dataclasses.asdict(self)) + "\n").encode("utf-8")

    @staticmethod
    def decode(line: str | bytes) -> JobTicket:
        return JobTicket(**json.loads(line))
