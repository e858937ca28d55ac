"""Everything the command line says to the person, and the one error boundary of every command.

Results go to stdout; warnings, progress and errors go to stderr. A command runs its work inside
:func:`error_boundary`, the only place that turns a :class:`~kbench_ci.errors.KbenchError` into
its one-line message and exit code, and Ctrl-C, SIGTERM and SIGHUP into 128 + the signal's number
(130, 143, 129), after the same clean-up.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from types import FrameType
from typing import TYPE_CHECKING, Any

import typer

from kbench_ci.errors import ExitCode, KbenchError
from kbench_ci.procgroup import EXIT_WITH_PARENT_ENV, on_parent_death
from kbench_ci.results.controls import show_controls
from kbench_ci.wire.protocol import Progress, WorkerEvent

if TYPE_CHECKING:
    from kbench_ci.gate.progress import SuiteProgress

__all__ = [
    "EXIT_WITH_PARENT_ENV",
    "LOG_ENV",
    "ProgressLine",
    "Terminated",
    "configure_logging",
    "err",
    "error_boundary",
    "log_safe",
    "out",
    "suite_progress",
    "stop_signals",
]


#: ``KBENCH_CI_LOG=debug``: where the time of a run goes (worker start, each case's hand-over,
#: the report), one stderr line per step with the milliseconds since start-up
LOG_ENV = "KBENCH_CI_LOG"


def configure_logging(environ: Mapping[str, str] | None = None) -> None:
    """Library modules log through :mod:`logging` and never print; with ``KBENCH_CI_LOG`` set
    (``debug``, ``info``, or a number) their records go to stderr at that level, each with the
    milliseconds since start-up (since :mod:`logging` was imported: the first few ms of the
    process are not counted). Unset, nothing changes: warnings reach stderr as Python prints them."""
    level_name = (os.environ if environ is None else environ).get(LOG_ENV, "").strip().upper()
    if not level_name:
        return
    level = int(level_name) if level_name.isdigit() else logging.getLevelName(level_name)
    if not isinstance(level, int):
        err(f"kbench-ci: warning: {LOG_ENV}={level_name.lower()!r} is not a log level (use debug or info); ignored")
        return
    # kbench-ci's own records only: GitPython logs every git command it runs at debug
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogSafeFormatter("kbench-ci %(relativeCreated)7.0f ms %(name)s: %(message)s"))
    logger = logging.getLogger("kbench_ci")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # a root handler a dependency set up would print every line twice


#: a line a GitHub Actions runner reads as a workflow command: ``::`` or the older ``##[`` at its
#: start, after any spaces (the runner trims the line first)
_WORKFLOW_COMMAND = re.compile(r"\s*(::|##\[)")


def log_safe(text: str) -> str:
    """``text`` with no line that a GitHub Actions runner would act on. The runner reads every
    line a step writes, to stdout and to stderr, and runs those that start with ``::``:
    ``::add-mask::FAILED`` hides that word for the rest of the job (its log, its annotations,
    the outputs that hold it), ``::stop-commands::`` silences the step's own commands after it.
    A kernel's error message, its compiler's output and a shard's GPU name reach these lines,
    and a newline of their own would start one; such a line keeps its words behind ``": "``.
    Any line break counts (the runner also ends a line at a lone carriage return).

    Control characters but the line feed and the tab are shown as their escapes
    (:func:`~kbench_ci.results.controls.show_controls`): the log's viewer plays ESC sequences
    (``\\x1b[2J`` clears it) and a bidi override (U+202E) turns the rest of a line around."""
    lines = show_controls(str(text)).splitlines(keepends=True)
    return "".join(f": {line}" if _WORKFLOW_COMMAND.match(line) else line for line in lines)


class _LogSafeFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return log_safe(super().format(record))


def err(message: str) -> None:
    """A line (or lines) to stderr, :func:`log_safe`."""
    typer.echo(log_safe(message), err=True)


def out(message: str) -> None:
    """Lines to stdout (a command's result: a report, the files it wrote), :func:`log_safe`."""
    typer.echo(log_safe(message))


#: a CI log gets a heartbeat line at least this often while a suite runs (seconds)
HEARTBEAT_S = 30.0


class ProgressLine:
    """A live progress line (a suite: a rich progress bar) on a terminal; plain lines in CI logs.

    Called with a worker's events (``bench``), it shows the :class:`Progress` ones;
    :func:`suite_progress` drives it for ``run`` and ``compare`` through :meth:`show`,
    :meth:`start_suite`, :meth:`advance` and :meth:`say`. In a log, a suite also gets a heartbeat
    line every ``heartbeat_s`` seconds (a thread), so a quiet minute of timing never reads as a
    hang. Every write holds one lock: the heartbeat and the main thread never interleave.
    """

    def __init__(self, *, tty: bool | None = None, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.heartbeat_s = heartbeat_s
        self.last_plain: tuple[str, str] | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._bar: Any = None  # rich.progress.Progress while a suite runs on a terminal
        self._task: Any = None

    def __call__(self, event: WorkerEvent) -> None:
        if isinstance(event, Progress):
            self.show(event.variant, event.phase, event.done, event.total)

    def show(self, variant: str, phase: str, done: int, total: int) -> None:
        """``[variant] phase done+1/total`` in place on a terminal; ``[variant] phase ...`` once per
        phase in a log."""
        with self._lock:
            if self._bar is not None:
                self._bar.update(self._task, description=" ".join(f"{variant} {phase} {done + 1}/{total}".split()))
            elif self.tty:
                sys.stderr.write(f"\r\033[K[{variant}] {phase} {done + 1}/{total}")
                sys.stderr.flush()
            elif self.last_plain != (variant, phase):
                self.last_plain = (variant, phase)
                err(f"[{variant}] {phase} ...")

    def say(self, message: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        with self._lock:
            if self._bar is not None:
                self._bar.console.print(log_safe(message), markup=False, highlight=False, soft_wrap=True)
                return
            if self.tty:
                sys.stderr.write("\r\033[K")
            err(message)

    def start_suite(self, total: int, status: Callable[[], str]) -> None:
        """A suite of ``total`` cases begins: the bar on a terminal, else heartbeat lines of
        ``status()`` (elapsed time, cases done, time left)."""
        with self._lock:
            if self._bar is not None or self._heartbeat is not None or self._stop.is_set():
                return
            if self.tty:
                from rich.console import Console  # noqa: PLC0415  (only a terminal needs rich)
                from rich.progress import (  # noqa: PLC0415
                    BarColumn,
                    MofNCompleteColumn,
                    TextColumn,
                    TimeElapsedColumn,
                    TimeRemainingColumn,
                )
                from rich.progress import Progress as Bar  # noqa: PLC0415

                self._bar = Bar(
                    TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                )
                self._task = self._bar.add_task("starting", total=max(total, 1))
                self._bar.start()
                return

        def beat() -> None:
            while not self._stop.wait(self.heartbeat_s):
                self.say(status())

        self._heartbeat = threading.Thread(target=beat, name="kbench-ci-heartbeat", daemon=True)
        self._heartbeat.start()

    def advance(self, done: int) -> None:
        """``done`` cases of the suite are finished (moves the bar)."""
        with self._lock:
            if self._bar is not None:
                self._bar.update(self._task, completed=done)

    def close(self) -> None:
        """Stop the heartbeat and the bar and clear the live line (a no-op in a log), so the next
        message starts on a clean line."""
        self._stop.set()
        if self._heartbeat is not None and self._heartbeat is not threading.current_thread():
            self._heartbeat.join(timeout=5)
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None
            elif self.tty:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()


def _duration(seconds: float) -> str:
    """``42 s``, ``3m05s``, ``1h02m``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def suite_progress(
    progress: ProgressLine, *, clock: Callable[[], float] = time.monotonic
) -> Callable[[SuiteProgress], None]:
    """A suite's progress → ``progress``: ``[case i/n case_id side] timing round r/R``.

    On a terminal every event updates the bar's line; in a CI log only a change of case or phase
    prints, so a case writes a handful of lines rather than one per round. Each case ends with a
    line of its own (verdict, change, seconds); a log gets a heartbeat (elapsed, cases done, time
    left) at least every :data:`HEARTBEAT_S` seconds.
    """
    last_key: tuple[object, ...] | None = None
    started = clock()
    state = {"done": 0, "total": 0, "case": ""}
    durations: list[float] = []  # each finished case's wall time
    # With --gpus the cases of several GPUs report from their own threads: one at a time.
    lock = threading.RLock()

    def status() -> str:
        with lock:
            done, total, case = state["done"], state["total"], state["case"]
        elapsed = clock() - started
        estimate = time_left(durations, total - done, elapsed) if isinstance(done, int) and isinstance(total, int) else None
        left = f"about {_duration(estimate)} left" if estimate is not None else "time left known after the first case"
        where = f", now {case}" if case else ""
        return f"kbench-ci: … {_duration(elapsed)} elapsed, {done}/{total} cases done{where}; {left}"

    def forward(variant: str, phase: str, done: int, total: int, key: tuple[object, ...]) -> None:
        nonlocal last_key
        if not progress.tty:
            if last_key == key:
                return
            last_key = key
        progress.show(variant, phase, done, total)

    def on_progress(update: SuiteProgress) -> None:
        with lock:
            handle(update)

    def handle(update: SuiteProgress) -> None:
        state["total"] = update.total
        progress.start_suite(update.total, status)  # at the first update; later calls do nothing
        if update.case_id:
            state["case"] = update.case_id
        on_gpu = f" on GPU {update.gpu}" if update.gpu else ""
        where = f"case {update.index}/{update.total} {update.case_id}{on_gpu}"
        if update.stage == "build":
            forward(where, "build", 0, 1, (update.index, "build"))
        elif update.stage == "remeasure" and update.event is None:
            progress.say(f"kbench-ci: {where}: suspected regression, measuring again with more rounds")
        elif update.stage == "profile":
            progress.say(f"kbench-ci: {where}: profiling base and head under ncu (--profile)")
        elif update.stage in ("measure", "remeasure") and update.event is not None:
            event = update.event
            if not isinstance(event, Progress):
                return
            phase: str = "timing round" if event.phase == "timing" else event.phase
            if update.stage == "remeasure":
                phase = f"re-{phase}"
            forward(
                f"{where} {event.variant}", phase, event.done, event.total,
                # A CI log gets one line per side and phase, not one per round.
                (update.index, update.stage, event.phase, None if event.phase == "timing" else event.variant),
            )
        elif update.stage == "done":
            # Counted, not the case's index: with --gpus the cases finish out of suite order.
            done = state["done"]
            state["done"] = done = (done if isinstance(done, int) else 0) + 1
            state["case"] = ""
            detail = f" — {update.detail}" if update.detail else ""
            took = f" ({update.seconds:.1f} s)" if update.seconds is not None else ""
            if update.seconds is not None:
                durations.append(update.seconds)
            progress.say(
                f"kbench-ci: [{update.index}/{update.total}] {update.case_id}{on_gpu}: {update.outcome}{detail}{took}"
            )
            progress.advance(done)

    return on_progress


def time_left(durations: Sequence[float], remaining: int, elapsed: float) -> float | None:
    """Seconds the ``remaining`` cases should take: the typical (median) finished case, not the
    mean, so a few first cases measured again (twice the rounds and more) do not double the
    estimate; divided by how many cases ran at once so far (their wall times over the elapsed
    time: several with ``--gpus``). None before any case has finished."""
    if not durations or remaining < 0:
        return None
    ordered = sorted(durations)
    middle = len(ordered) // 2
    typical = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    at_once = max(1.0, sum(durations) / elapsed) if elapsed > 0 else 1.0
    return remaining * typical / at_once


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the main thread is, like Ctrl-C's KeyboardInterrupt.

    A subclass of KeyboardInterrupt so that everything that cleans up after Ctrl-C (killing the
    worker's process group, removing worktrees and temporary folders) does so here too.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: the signals that stop a command: Ctrl-C, `kill`, a closed terminal. GitHub cancels a job
#: with SIGINT, then SIGTERM 7.5 s later, then SIGKILL.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _exit_with_parent() -> bool:
    chosen = os.environ.get(EXIT_WITH_PARENT_ENV, "").strip().lower()
    if chosen in ("1", "true", "yes"):
        return True
    if chosen in ("0", "false", "no"):
        return False
    return os.environ.get("GITHUB_ACTIONS", "").strip().lower() == "true"


def _stop_as_on_sigterm() -> None:
    """When the process that started this command dies (a cancelled job's step SIGKILLed, and
    SIGKILL runs no handler), this process is re-parented and would run to its end with its
    worker and worktrees: stop as on SIGTERM instead, so the clean-up (worker killed, worktrees
    removed) runs, as it does for the worker watching its lifeline."""
    os.kill(os.getpid(), signal.SIGTERM)


@contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block, the first stop signal raises (KeyboardInterrupt for SIGINT,
    :class:`Terminated` otherwise); any later one is ignored, also after the block, so the
    clean-up that the first started (worker killed, worktrees removed) and the exit are not cut
    short by the follow-up signal a CI runner sends. Only the main thread can set handlers;
    elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    # A signal ignored on purpose stays ignored (`nohup` ignores SIGHUP; a shell's background
    # job, SIGINT).
    watched = [sig for sig in STOP_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, handler) for sig in watched}
    watching = on_parent_death(_stop_as_on_sigterm) if _exit_with_parent() else nullcontext()
    try:
        with watching:
            yield
    finally:
        for sig, old in previous.items():
            # Once stopping, the process is on its way out: a late follow-up signal must not
            # turn the clean exit (message, exit code) into a death by signal.
            signal.signal(sig, signal.SIG_IGN if stopping else old)


@contextmanager
def error_boundary(*, progress: ProgressLine | None = None, interrupted: str | None = None) -> Iterator[None]:
    """Run the block as a command's work; the only place errors become messages and exit codes.

    ``progress`` (if given) is closed when the block ends, however it ends, before anything
    else is said. Then a :class:`KbenchError` becomes ``kbench-ci: error: MESSAGE (HINT)`` and
    its exit code; Ctrl-C becomes ``kbench-ci: interrupted`` and exit code 130, SIGTERM / SIGHUP
    ``kbench-ci: terminated (SIGTERM)`` and 143 / 129 (``; INTERRUPTED`` appended when given:
    what survives the interruption). Anything else propagates.
    """
    try:
        with stop_signals():
            try:
                yield
            finally:
                if progress is not None:
                    progress.close()
    except KbenchError as exc:
        err(f"kbench-ci: error: {exc.one_line()}")
        raise typer.Exit(int(exc.exit_code)) from None
    except Terminated as exc:
        err(f"kbench-ci: terminated ({signal.Signals(exc.signum).name})" + (f"; {interrupted}" if interrupted else ""))
        raise typer.Exit(128 + exc.signum) from None
    except KeyboardInterrupt:
        err("kbench-ci: interrupted" + (f"; {interrupted}" if interrupted else ""))
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
