"""One case in a subprocess: crash and timeout isolation, and the one place that spawns workers.

The parent writes the job to a file and starts ``python -m kbench_ci.measure.worker LIFELINE JOB
EVENTS`` (:mod:`~kbench_ci.measure.lifeline`: a pipe that ends the worker when the parent dies, then
:func:`~kbench_ci.measure.child.child_main`). The child appends one JSON object per line to
EVENTS as it goes (progress, each variant's final result), so everything measured before a
segfault, a CUDA error or a hang survives it. When a worker dies, the variant it was working on
is blamed and the case is run again in a fresh process without it, so one crashing kernel does
not take its neighbours' results with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kbench_ci.measure.lifeline import USER_EXIT, USER_EXIT_PREFIX
from kbench_ci.measure.protocol import (
    CONTEXT_LOST_EXIT,
    Begin,
    CaseJob,
    EnvironmentReport,
    GpuStateReport,
    LoadError,
    TimingDescription,
    VariantDone,
    WorkerEvent,
    decode_event,
)
from kbench_ci.procgroup import kill_process_group, user_code_environment
from kbench_ci.results.model import CaseResult, VariantResult

_POLL_SECONDS = 0.1


@dataclass(slots=True)
class WorkerOutcome:
    """Everything the parent learned about one case, across restarts."""

    variants: dict[str, VariantResult] = field(default_factory=dict)
    environment: dict[str, Any] | None = None
    gpu_state_before: dict[str, Any] | None = None
    gpu_state_after: dict[str, Any] | None = None
    timing_description: str | None = None
    event_overhead_ms: float | None = None
    load_error: LoadError | None = None
    #: one line per worker that crashed or hung, naming the variant blamed
    incidents: list[str] = field(default_factory=list)


ProgressCallback = Callable[[WorkerEvent], None]


def run_case_in_worker(
    job: CaseJob,
    *,
    timeout_s: float,
    on_event: ProgressCallback | None = None,
    python: str | None = None,
) -> tuple[CaseResult, WorkerOutcome]:
    """Run ``job`` in worker subprocesses until every variant has a final result."""
    outcome = WorkerOutcome()
    labels = job.variant_labels()
    current = job
    for _attempt in range(len(labels) + 1):
        pending = [label for label in labels if label not in outcome.variants and label not in current.skip]
        if not pending:
            break
        blamed, incident = _run_once(current, outcome, timeout_s=timeout_s, on_event=on_event, python=python)
        if incident is None:
            break
        outcome.incidents.append(incident)
        if outcome.load_error is not None:
            break
        if blamed is None or blamed in outcome.variants:
            # Nothing identifiable to blame: give every unfinished variant the incident.
            for label in labels:
                outcome.variants.setdefault(label, _failed(job, label, incident))
            break
        outcome.variants[blamed] = _failed(job, blamed, incident)
        current = replace(current, skip=tuple(set(current.skip) | {blamed}))
    for label in labels:
        outcome.variants.setdefault(label, _failed(job, label, "not run: the worker stopped before reaching it"))
    result = CaseResult(
        case_id=job.case_id,
        dims=job.dims,
        seed=job.settings.seed,
        variants=tuple(outcome.variants[label] for label in labels),
        timing_method=job.settings.timing_method,
        timing_description=outcome.timing_description,
        event_overhead_ms=outcome.event_overhead_ms,
        error="; ".join(outcome.incidents) or None,
        gpu_state_before=outcome.gpu_state_before,
        gpu_state_after=outcome.gpu_state_after,
    )
    return result, outcome


def _failed(job: CaseJob, label: str, message: str) -> VariantResult:
    is_side = label in {side.label for side in job.sides}
    kind = next((side.implementation for side in job.sides if side.label == label), label)
    return VariantResult(label=label, kind=kind, role="solution" if is_side else "baseline", status="error", message=message)


@dataclass(slots=True)
class _Cursor:
    """Where the worker is: the variant and phase of the last ``Begin`` not yet finished."""

    variant: str | None = None
    phase: str | None = None


def _run_once(
    job: CaseJob,
    outcome: WorkerOutcome,
    *,
    timeout_s: float,
    on_event: ProgressCallback | None,
    python: str | None,
) -> tuple[str | None, str | None]:
    """One worker process. Returns (blamed variant, incident) — (None, None) when it ended well."""
    with tempfile.TemporaryDirectory(prefix="kbench-worker-") as scratch:
        job_path = Path(scratch) / "job.json"
        events_path = Path(scratch) / "events.jsonl"
        stderr_path = Path(scratch) / "stderr.txt"
        job_path.write_text(job.to_json(), encoding="utf-8")
        events_path.touch()
        # The kernel is code from the repository under test: none of the runner's step files or
        # tokens (see procgroup.RUNNER_SECRETS).
        environment = user_code_environment()
        if job.settings.device == "cpu":
            # Triton kernels run on CPU tensors only under its interpreter, set before import.
            environment["TRITON_INTERPRET"] = "1"
        environment.setdefault("PYTHONUNBUFFERED", "1")
        # The lifeline: the worker dies when this write end closes, i.e. when this process ends,
        # however it ends (see kbench_ci.measure.lifeline). Both ends are non-inheritable; only
        # the read end is handed to this one worker.
        lifeline_read, lifeline_write = os.pipe()
        cursor = _Cursor()
        try:
            with open(stderr_path, "wb") as stderr:
                try:
                    process = subprocess.Popen(
                        [python or sys.executable, "-m", "kbench_ci.measure.worker", str(lifeline_read),
                         str(job_path), str(events_path)],
                        stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=environment,
                        pass_fds=(lifeline_read,),
                        start_new_session=True,  # so a timeout kills the kernel's whole process group
                    )
                finally:
                    os.close(lifeline_read)
                deadline = time.monotonic() + timeout_s
                offset = 0
                timed_out = False
                try:
                    while True:
                        offset = _drain(events_path, offset, outcome, cursor, on_event)
                        if process.poll() is not None:
                            break
                        if time.monotonic() > deadline:
                            timed_out = True
                            kill_process_group(process)
                            break
                        time.sleep(_POLL_SECONDS)
                except BaseException:
                    # Ctrl-C, SIGTERM or an error here: the child is in its own session and would
                    # not see the terminal's signal, so it would keep the GPU busy. Take it down first.
                    kill_process_group(process)
                    raise
                offset = _drain(events_path, offset, outcome, cursor, on_event)
        finally:
            os.close(lifeline_write)
        code = process.returncode
        in_progress = cursor.variant
        who = in_progress or "worker"
        if timed_out:
            return in_progress, f"{who} timed out after {timeout_s:g} s (case timeout)"
        tail = _last_line(stderr_path)
        if code == USER_EXIT and tail.startswith(USER_EXIT_PREFIX):
            call = tail[len(USER_EXIT_PREFIX):]
            return in_progress, (
                f"{who} called {call} {_where(job, cursor)}: user code must return (or raise), "
                "not end the worker process"
            )
        if code == 0:
            if in_progress is None or in_progress in outcome.variants:
                return None, None
            # Exit status 0 in the middle of a variant: no crash of kbench-ci's ends that way.
            return in_progress, _ended_from_inside(job, cursor, code)
        if code == CONTEXT_LOST_EXIT:
            return in_progress, f"{who} broke the CUDA context: {tail}"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            return in_progress, f"{who} crashed the worker ({name}){': ' + tail if tail else ''}"
        if not _has_traceback(stderr_path):
            # A failure of kbench-ci's (or an exception nobody caught) leaves a traceback; an exit
            # status without one means the process was ended from inside (os._exit(), a C
            # library's exit()). Warnings alone on stderr do not count.
            return in_progress, _ended_from_inside(job, cursor, code)
        return in_progress, f"{who} failed the worker (exit {code}): {tail}"


def _ended_from_inside(job: CaseJob, cursor: _Cursor, code: int) -> str:
    return (
        f"{cursor.variant or 'worker'} ended the worker process (exit status {code}) {_where(job, cursor)} without "
        "an error: does its code call os._exit() or exit()? User code must return (or raise)"
    )


def _where(job: CaseJob, cursor: _Cursor) -> str:
    """``during correctness``, or for the load phase the files whose top-level code ran."""
    if cursor.phase == "load":
        side = next((side for side in job.sides if side.label == cursor.variant), job.sides[0])
        return f"while loading {Path(side.solution).name} / {Path(side.ref).name} (their top-level code)"
    if cursor.phase is None:
        return "before it reported anything"
    return _PHASE_WORDS.get(cursor.phase, f"during {cursor.phase}")


#: the worker's phases, as a person reads them
_PHASE_WORDS = {
    "compile": "during its first (untimed) call",
    "correctness": "during the correctness check",
    "timing": "while being timed",
    "audit": "during the CUPTI audit",
}


def _drain(
    events_path: Path,
    offset: int,
    outcome: WorkerOutcome,
    cursor: _Cursor,
    on_event: ProgressCallback | None,
) -> int:
    with open(events_path, "rb") as handle:
        handle.seek(offset)
        chunk = handle.read()
    # Only whole lines: the child may be mid-write.
    end = chunk.rfind(b"\n")
    if end < 0:
        return offset
    for line in chunk[: end + 1].splitlines():
        if not line.strip():
            continue
        event = decode_event(line)
        if isinstance(event, Begin):
            cursor.variant, cursor.phase = event.variant, event.phase
        elif isinstance(event, VariantDone):
            outcome.variants[event.result.label] = event.result
            if cursor.variant == event.result.label:
                cursor.variant = cursor.phase = None
        elif isinstance(event, EnvironmentReport):
            outcome.environment = event.environment
        elif isinstance(event, GpuStateReport):
            if event.when == "before":
                outcome.gpu_state_before = event.state
            else:
                outcome.gpu_state_after = event.state
        elif isinstance(event, TimingDescription):
            outcome.timing_description = event.text
            outcome.event_overhead_ms = event.event_overhead_ms
        elif isinstance(event, LoadError):
            outcome.load_error = event
        if on_event is not None:
            on_event(event)
    return offset + end + 1


def _has_traceback(path: Path) -> bool:
    try:
        return "Traceback (most recent call last):" in path.read_text(errors="replace")
    except OSError:
        return False


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
