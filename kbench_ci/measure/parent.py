"""Cases in worker subprocesses: crash and timeout isolation, and the one place that spawns workers.

A :class:`WorkerPool` keeps one worker process warm across the cases of a suite: torch is
imported and the CUDA context created once, not once per case (on an H200 that start-up was
most of a 6-case compare's wall time). The worker is ``python -m kbench_ci.measure.worker
LIFELINE`` (:mod:`~kbench_ci.wire.lifeline`: a pipe that ends the worker when the parent
dies, and down which the parent sends one :class:`~kbench_ci.wire.protocol.JobTicket` per
case). For each case the parent writes the job to a file; the child appends one JSON event per
line to the case's events file as it goes (progress, each variant's final result), so
everything measured before a segfault, a CUDA error or a hang survives it. A case ends at the
worker's :class:`~kbench_ci.wire.protocol.CaseFinished`; between cases the worker takes away
what the case left (:mod:`kbench_ci.measure.isolation`).

When a worker dies or hangs (the timeout is per case), the variant it was working on is
blamed, the worker is replaced, and the case is run again in the fresh one without that
variant, so one crashing kernel does not take its neighbours' results with it; the next case
goes on in the new worker. ``WorkerPool(warm=False)`` (``--fresh-worker``) starts a worker per
case instead, as before the warm worker, for debugging.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from kbench_ci.errors import ExitCode
from kbench_ci.measure.deadlines import CaseClock, Expired
from kbench_ci.procgroup import kill_process_group, make_non_dumpable, module_command, user_code_environment
from kbench_ci.results.model import CaseResult, VariantResult
from kbench_ci.results.outcome import BASE
from kbench_ci.scratch import create_new, make_scratch, remove_left_by, remove_tree
from kbench_ci.suite.settings import IN_PROCESS_MODULE, JUDGE_MODULE
from kbench_ci.wire.lifeline import USER_EXIT, USER_EXIT_PREFIX
from kbench_ci.wire.protocol import (
    CONTEXT_LOST_EXIT,
    Begin,
    CaseFinished,
    CaseJob,
    CaseStarted,
    EnvironmentReport,
    EventSigner,
    ForgedEvent,
    GpuStateReport,
    JobTicket,
    LoadError,
    ReferenceCall,
    TimingDescription,
    VariantDone,
    WorkerEvent,
    decode_event,
)

__all__ = ["ProgressCallback", "WorkerOutcome", "WorkerPool", "WorkerPoolClosed", "run_case_in_worker"]

_log = logging.getLogger(__name__)

#: how often the parent reads the events file and checks the worker and the deadline: a case's
#: end is seen at most this late, and the next case waits that long (a read is ~20 µs)
_POLL_SECONDS = 0.01


@dataclass(slots=True)
class WorkerOutcome:
    """Everything the parent learned about one case, across restarts."""

    variants: dict[str, VariantResult] = field(default_factory=dict)
    environment: dict[str, Any] | None = None
    gpu_state_before: dict[str, Any] | None = None
    gpu_state_after: dict[str, Any] | None = None
    timing_description: str | None = None
    event_overhead_ms: float | None = None
    cupti_residual_ms: float | None = None
    load_error: LoadError | None = None
    #: one line per worker that crashed or hung, naming the variant blamed
    incidents: list[str] = field(default_factory=list)
    #: the process id of every worker that served this case (one, unless one crashed or hung)
    worker_pids: list[int] = field(default_factory=list)
    #: why the worker retired after this case (a CUDA error outlived it), if it did
    retired: str | None = None


ProgressCallback = Callable[[WorkerEvent], None]


@dataclass(slots=True)
class _Worker:
    """One worker process, and the write end of its lifeline (its job pipe)."""

    process: subprocess.Popen[bytes]
    lifeline: int
    stderr_path: Path
    device: str
    #: cases it finished: before the first, all of its stderr (its start-up included) is the case's
    served: int = 0

    def send(self, ticket: JobTicket) -> bool:
        """Hand the worker a job; False when it is gone (its end of the pipe is closed)."""
        try:
            os.write(self.lifeline, ticket.encode())
        except OSError:  # BrokenPipeError: the worker died since its last case
            return False
        return True

    def stderr_size(self) -> int:
        if not self.served:
            return 0
        try:
            return self.stderr_path.stat().st_size
        except OSError:
            return 0

    def stop(self) -> None:
        """End the worker and everything it started, and reap it. Closing the lifeline alone
        would do (the worker kills its own group), but not before the kernel sees it."""
        # with what left its group, looked up while the worker still holds it (a judge is a child
        # subreaper: its sides' orphans are under it); the lifeline closes after
        kill_process_group(self.process)
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1
        # A judge makes a scratch folder of its own (its sides' folders in it), and a SIGKILL
        # leaves it behind
        remove_left_by(self.process.pid)


class WorkerPoolClosed(RuntimeError):
    """A case asked a closed pool for a worker: the run is being stopped (Ctrl-C) while another
    thread's case was still running. Not a KbenchError: it never reaches the user."""


class WorkerPool:
    """Worker processes for the cases of one suite: one warm worker, replaced when it crashes,
    hangs or retires (``warm=False``: a fresh worker per case).

    The one place that spawns workers. Use it as a context manager, or call :meth:`close`: a
    worker left running would keep the GPU. ``environment`` is added to each worker's environment
    (the Triton and TorchInductor cache folders).
    """

    def __init__(
        self, *, warm: bool = True, environment: Mapping[str, str] | None = None, python: str | None = None,
        preload: Sequence[str] = (), module: str = IN_PROCESS_MODULE,
    ) -> None:
        self.warm = warm
        #: what each worker process runs: the in-process worker, or the judge (kbench_ci.judge.main)
        self.module = module
        self.environment = dict(environment or {})
        self.python = python or sys.executable
        #: modules every worker imports before its first case (``triton`` for a suite with
        #: Triton kernels), while the parent is still setting up
        self.preload = tuple(preload)
        #: process ids of every worker this pool started, in order
        self.started_pids: list[int] = []
        self._worker: _Worker | None = None
        self._scratch: Path | None = None
        self._cases = 0
        #: set by close(): a thread still inside run_case (another GPU's, after Ctrl-C) starts no worker
        self._closed = False

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def start(self, device: str) -> None:
        """Start the warm worker now (it imports torch meanwhile, e.g. while kernels build)."""
        if self.warm:
            self._ready(device)

    def close(self) -> None:
        """Stop the worker (if any) and remove the pool's scratch folder; no worker starts after."""
        self._closed = True
        self._discard()
        if self._scratch is not None:
            remove_tree(self._scratch)
            self._scratch = None

    def run_case(
        self, job: CaseJob, *, timeout_s: float, on_event: ProgressCallback | None = None
    ) -> tuple[CaseResult, WorkerOutcome]:
        """Run ``job`` until every variant has a final result: a variant that crashes or hangs
        the worker is failed, and the case goes on in a fresh worker without it."""
        outcome = WorkerOutcome()
        labels = job.variant_labels()
        current = job
        for _attempt in range(len(labels) + 1):
            pending = [label for label in labels if label not in outcome.variants and label not in current.skip]
            if not pending:
                break
            blamed, incident = self._run_once(current, outcome, timeout_s=timeout_s, on_event=on_event)
            if incident is None:
                break
            outcome.incidents.append(incident)
            if outcome.load_error is not None:
                if blamed is not None:
                    outcome.variants.setdefault(blamed, job.failed_result(blamed, incident))
                break
            if blamed is None or blamed in outcome.variants:
                # Nothing identifiable to blame: give every unfinished variant the incident.
                for label in labels:
                    outcome.variants.setdefault(label, job.failed_result(label, incident))
                break
            outcome.variants[blamed] = job.failed_result(blamed, incident)
            current = replace(current, skip=tuple(set(current.skip) | {blamed}))
        for label in labels:
            outcome.variants.setdefault(label, job.failed_result(label, "not run: the worker stopped before reaching it"))
        result = CaseResult(
            case_id=job.case_id,
            dims=job.dims,
            seed=job.settings.seed,
            variants=tuple(outcome.variants[label] for label in labels),
            timing_method=job.settings.timing_method,
            timing_description=outcome.timing_description,
            event_overhead_ms=outcome.event_overhead_ms,
            cupti_residual_ms=outcome.cupti_residual_ms,
            error="; ".join(outcome.incidents) or None,
            gpu_state_before=outcome.gpu_state_before,
            gpu_state_after=outcome.gpu_state_after,
        )
        return result, outcome

    # -- workers -----------------------------------------------------------------------------

    def _scratch_dir(self) -> Path:
        if self._scratch is None:
            self._scratch = make_scratch("kbench-worker-")
        return self._scratch

    def _ready(self, device: str) -> _Worker:
        """The live worker for ``device``, started when there is none (or it has died)."""
        if self._closed:
            raise WorkerPoolClosed("the worker pool was closed (the run is stopping)")
        worker = self._worker
        if worker is not None and (worker.device != device or worker.process.poll() is not None):
            self._discard()
            worker = None
        if worker is None:
            worker = self._worker = self._spawn(device)
        return worker

    def _discard(self) -> None:
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.stop()

    def _spawn(self, device: str) -> _Worker:
        if self.module == JUDGE_MODULE:
            # This process holds the lifeline's write end, and on it each case's key to the
            # judge's events: a side of the same user without Landlock could read the pipe
            # through /proc/PID/fd of a dumpable process.
            make_non_dumpable()
        # The kernel is code from the repository under test: none of the runner's step files or
        # tokens (see procgroup.RUNNER_SECRETS).
        environment = user_code_environment()
        environment.update(self.environment)
        if device == "cpu":
            # Triton kernels run on CPU tensors only under its interpreter, set before import.
            environment["TRITON_INTERPRET"] = "1"
        environment.setdefault("PYTHONUNBUFFERED", "1")
        stderr_path = self._scratch_dir() / f"worker-{len(self.started_pids) + 1}.stderr"
        # The lifeline: the worker dies when this write end closes, i.e. when this process ends,
        # however it ends (see kbench_ci.wire.lifeline). Both ends are non-inheritable; only
        # the read end is handed to this one worker.
        lifeline_read, lifeline_write = os.pipe()
        try:
            # New, never through a link: where a sandbox does not hold a side, its code could
            # plant one under the next worker's name.
            with open(create_new(stderr_path.parent, stderr_path.name), "wb") as stderr:
                process = subprocess.Popen(
                    # With the device, the worker creates its CUDA context and imports what the
                    # cases need before the first job comes (kbench_ci.measure.worker). Every
                    # hash-based .pyc is checked against its source: an "unchecked" one beside a
                    # kernel's helper would run code that no reviewer reads in the diff.
                    # the in-process worker runs the user's code and may need the user's own
                    # packages from the working folder; the judge runs none
                    module_command(self.python, self.module, str(lifeline_read), device, *self.preload,
                                   user_code=self.module != JUDGE_MODULE),
                    stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=environment,
                    pass_fds=(lifeline_read,),
                    start_new_session=True,  # so a timeout kills the kernel's whole process group
                )
        except BaseException:
            os.close(lifeline_write)
            raise
        finally:
            os.close(lifeline_read)
        self.started_pids.append(process.pid)
        _log.debug("worker %d started for %s (preload: %s)", process.pid, device, ", ".join(self.preload) or "nothing")
        return _Worker(process, lifeline_write, stderr_path, device)

    def _run_once(
        self, job: CaseJob, outcome: WorkerOutcome, *, timeout_s: float, on_event: ProgressCallback | None
    ) -> tuple[str | None, str | None]:
        """One attempt at the case in one worker. Returns (blamed variant, incident) — (None,
        None) when it ended well."""
        self._cases += 1
        case_dir = self._scratch_dir() / f"case-{self._cases}"
        case_dir.mkdir()
        try:
            job_path = case_dir / "job.json"
            events_path = case_dir / "events.jsonl"
            job_text = job.to_json().encode("utf-8")
            job_path.write_bytes(job_text)
            events_path.touch()
            # The judge marks every line with a key made for this case alone (sent on the
            # lifeline, which no side holds): a line it did not write fails the case.
            key = secrets.token_bytes(32) if self.module == JUDGE_MODULE else b""
            signer = EventSigner(key) if key else None
            ticket = JobTicket(str(job_path), str(events_path), key.hex(),
                               hashlib.sha256(job_text).hexdigest() if key else "")
            worker = self._ready(job.settings.device)
            stderr_from = worker.stderr_size()
            if not worker.send(ticket):
                # It died between cases (killed from outside): one fresh worker gets the case.
                self._discard()
                worker = self._ready(job.settings.device)
                stderr_from = worker.stderr_size()
                worker.send(ticket)
            sent = time.monotonic()
            _log.debug("case %s sent to worker %d", job.case_id, worker.process.pid)
            cursor = _Cursor()
            # The case's timeout counts the sides' turns; the process's own time (a worker's start,
            # the judge's between turns) an allowance of its own (kbench_ci.measure.deadlines).
            judged = self.module == JUDGE_MODULE
            clock = CaseClock(timeout_s, sent, judged=judged)
            offset = 0
            expired: Expired | None = None
            try:
                while True:
                    # The time since the last look was spent in the turn the cursor showed then.
                    clock.advance(time.monotonic(), side_has_turn=cursor.variant is not None)
                    offset = _drain(events_path, offset, outcome, cursor, on_event, signer)
                    if cursor.finished is not None or worker.process.poll() is not None:
                        break
                    expired = clock.expired()
                    if expired is not None:
                        break
                    time.sleep(_POLL_SECONDS)
                offset = _drain(events_path, offset, outcome, cursor, on_event, signer)
            except ForgedEvent as exc:
                # Not the judge's: nothing this case's file says can be trusted any more.
                self._discard()
                outcome.variants.clear()
                outcome.load_error = None
                return None, f"the case's results were tampered with, so none of them is kept: {exc}"
            except BaseException:
                # Ctrl-C, SIGTERM or an error here: the child is in its own session and would
                # not see the terminal's signal, so it would keep the GPU busy. Take it down first.
                self._discard()
                raise
            timed_out = expired is not None
            if cursor.finished is not None and not timed_out:
                seen = time.monotonic()
                _log.debug(
                    "case %s finished in worker %d: taken %.0f ms after it was sent, done %.0f ms after, "
                    "seen %.1f ms later", job.case_id, worker.process.pid,
                    1e3 * ((cursor.started.at if cursor.started is not None else sent) - sent),
                    1e3 * (cursor.finished.at - sent), 1e3 * (seen - cursor.finished.at),
                )
                worker.served += 1
                if cursor.finished.retire:
                    outcome.retired = cursor.finished.reason
                if cursor.finished.retire or not self.warm:
                    self._discard()
                return None, None
            # Hung, crashed, or ended from inside: this worker serves no other case.
            self._discard()
            if expired == "own":
                who = ("the judge (which runs no pull-request code; no side is blamed)" if judged
                       else "the worker (before any kernel's code ran in it)")
                return None, (f"{who} took more than {clock.own_allowance_s:g} s of its own, with no side's turn "
                              "(starting up): re-run the job, and if it recurs, give the runner fewer jobs at once")
            return _incident(job, cursor, worker, stderr_from, timed_out=timed_out, timeout_s=timeout_s, outcome=outcome,
                             judge=judged)
        finally:
            remove_tree(case_dir)


def run_case_in_worker(
    job: CaseJob,
    *,
    timeout_s: float,
    on_event: ProgressCallback | None = None,
    python: str | None = None,
    module: str = IN_PROCESS_MODULE,
) -> tuple[CaseResult, WorkerOutcome]:
    """Run one ``job`` in a worker of its own (``bench``: one case, nothing to keep warm);
    ``module``: the in-process worker, or the judge (``--isolation judge``)."""
    with WorkerPool(warm=False, python=python, module=module) as pool:
        return pool.run_case(job, timeout_s=timeout_s, on_event=on_event)


@dataclass(slots=True)
class _Cursor:
    """Where the worker is: the variant and phase of the last ``Begin`` not yet finished, and the
    case's ``CaseFinished`` once it came."""

    variant: str | None = None
    phase: str | None = None
    #: ref.py's reference() is running for ``variant`` (a ReferenceCall, not yet returned)
    in_reference: bool = False
    started: CaseStarted | None = None
    finished: CaseFinished | None = None


def _incident(
    job: CaseJob, cursor: _Cursor, worker: _Worker, stderr_from: int, *, timed_out: bool, timeout_s: float,
    outcome: WorkerOutcome, judge: bool = False,
) -> tuple[str | None, str | None]:
    """Who is to blame for a worker that did not finish the case, and what to say.

    ``judge``: the worker was the judge (``--isolation judge``), which runs no variant's code.
    In the turn of a side whose code is not trusted (a compare's head, a bench's solution)
    that side is blamed as in process (it hung past the case's timeout, say: the base is then
    checked without it). In a trusted side's turn (the base, a baseline) nobody is blamed and
    every variant not yet done gets the incident: blaming the base let a head that hung the
    judge in the base's turn (a ptraced zombie it left to be reaped) or crashed it there
    (SIGBUS: the scratch disk filled) read `fixed`."""
    in_progress = cursor.variant
    who = in_progress or "worker"
    if cursor.in_reference and in_progress is not None:
        # The reference was running: ref.py hung or crashed the worker, not the variant it checks.
        side = next((side for side in job.sides if side.label == in_progress), job.sides[0])
        who = f"{Path(side.ref).name} reference() (checking {in_progress})"
        blamed, incident = _incident_words(job, cursor, worker, stderr_from, who, timed_out=timed_out, timeout_s=timeout_s,
                                           outcome=outcome)
        if incident is not None:
            outcome.load_error = LoadError(
                in_progress, "UserFileError", int(ExitCode.USAGE), incident,
                "fix reference(): every variant is checked against it", blame="user",
            )
        return blamed, incident
    if judge and (in_progress is None or in_progress == BASE or in_progress in job.baselines):
        turn = f" in {in_progress}'s turn {_where(job, cursor)}" if in_progress else ""
        who = f"the judge (which runs no pull-request code; no side is blamed){turn}"
        _, incident = _incident_words(job, cursor, worker, stderr_from, who, timed_out=timed_out, timeout_s=timeout_s,
                                      outcome=outcome)
        return None, incident
    return _incident_words(job, cursor, worker, stderr_from, who, timed_out=timed_out, timeout_s=timeout_s, outcome=outcome)


def timeout_words(job: CaseJob) -> str:
    """What a case's timeout was made of, for the line that reports it: the case timeout (scaled
    with the case's variants and rounds), and the compare's time budget where it adds one, so
    that ``--case-timeout 8`` reporting "timed out after 18 s" says where the other 10 s came
    from (gate.compare_case adds the budget to the job's timeout)."""
    budget_s = job.stopping.budget_s if job.stopping is not None else 0.0
    return f"case timeout, plus the {budget_s:g} s time budget" if budget_s > 0 else "case timeout"


def _incident_words(
    job: CaseJob, cursor: _Cursor, worker: _Worker, stderr_from: int, who: str, *, timed_out: bool, timeout_s: float,
    outcome: WorkerOutcome,
) -> tuple[str | None, str | None]:
    code = worker.process.returncode
    in_progress = cursor.variant
    if timed_out:
        return in_progress, f"{who} timed out after {timeout_s:g} s ({timeout_words(job)})"
    # This case's part of the worker's stderr only: an earlier case's warnings are not this one's.
    stderr = _stderr_since(worker.stderr_path, stderr_from)
    tail = _last_line(stderr)
    if code == USER_EXIT and tail.startswith(USER_EXIT_PREFIX):
        call = tail[len(USER_EXIT_PREFIX):]
        return in_progress, (
            f"{who} called {call} {_where(job, cursor)}: user code must return (or raise), "
            "not end the worker process"
        )
    if code == 0:
        if in_progress is None and all(label in outcome.variants or label in job.skip for label in job.variant_labels()):
            return None, None  # every result is in: nothing of the case was lost
        # Exit status 0 without CaseFinished: no crash of kbench-ci's ends that way.
        return in_progress, _ended_from_inside(job, cursor, code)
    if code == CONTEXT_LOST_EXIT:
        return in_progress, f"{who} broke the CUDA context: {tail}"
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return in_progress, f"{who} crashed the worker ({name}){': ' + tail if tail else ''}"
    if "Traceback (most recent call last):" not in stderr:
        # A failure of kbench-ci's (or an exception nobody caught) leaves a traceback; an exit
        # status without one means the process was ended from inside (os._exit(), a C
        # library's exit()). Warnings alone on stderr do not count.
        return in_progress, _ended_from_inside(job, cursor, code)
    return in_progress, f"{who} failed the worker (exit {code}): {tail}"


def _ended_from_inside(job: CaseJob, cursor: _Cursor, code: int | None) -> str:
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
    signer: EventSigner | None = None,
) -> int:
    """Read the whole lines added to the events file since ``offset``; with ``signer`` (the
    judge's), each must carry the judge's mark (:class:`ForgedEvent` otherwise)."""
    with open(events_path, "rb") as handle:
        handle.seek(offset)
        chunk = handle.read()
    # Only whole lines: the child may be mid-write.
    end = chunk.rfind(b"\n")
    if end < 0:
        return offset
    for line in chunk[: end + 1].splitlines():
        if not line.strip():
            if signer is not None:
                raise ForgedEvent("a blank line in the events file: the judge writes none")
            continue
        event = decode_event(signer.check(line.decode("utf-8", errors="replace")) if signer is not None else line)
        if isinstance(event, Begin):
            cursor.variant, cursor.phase = event.variant, event.phase
            cursor.in_reference = False
        elif isinstance(event, ReferenceCall):
            cursor.variant, cursor.in_reference = event.variant, event.running
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
            outcome.cupti_residual_ms = event.cupti_residual_ms
        elif isinstance(event, LoadError):
            outcome.load_error = event
        elif isinstance(event, CaseStarted):
            outcome.worker_pids.append(event.worker_pid)
            cursor.started = event
        elif isinstance(event, CaseFinished):
            cursor.finished = event
        if on_event is not None:
            on_event(event)
    return offset + end + 1


def _stderr_since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
