"""Everything the command line says to the person, and the one error boundary of every command.

Results go to stdout; warnings, progress and errors go to stderr. A command runs its work inside
:func:`error_boundary`, the only place that turns a :class:`~kbench_ci.errors.KbenchError` into
its one-line message and exit code, and Ctrl-C, SIGTERM and SIGHUP into 128 + the signal's number
(130, 143, 129), after the same clean-up.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

import typer

from kbench_ci.errors import ExitCode, KbenchError
from kbench_ci.measure.protocol import Progress, WorkerEvent

if TYPE_CHECKING:
    from kbench_ci.gate.execute import SuiteProgress

__all__ = ["ProgressLine", "Terminated", "err", "error_boundary", "suite_progress", "stop_signals"]


def err(message: str) -> None:
    """One line to stderr."""
    typer.echo(message, err=True)


class ProgressLine:
    """A live progress line on a terminal; plain phase lines in CI logs.

    Called with a worker's events (``bench``), it shows the :class:`Progress` ones;
    :func:`suite_progress` drives it for ``run`` and ``compare`` through :meth:`show`.
    """

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last_plain: tuple[str, str] | None = None

    def __call__(self, event: WorkerEvent) -> None:
        if isinstance(event, Progress):
            self.show(event.variant, event.phase, event.done, event.total)

    def show(self, variant: str, phase: str, done: int, total: int) -> None:
        """``[variant] phase done+1/total`` in place on a terminal; ``[variant] phase ...`` once per
        phase in a log."""
        if self.tty:
            sys.stderr.write(f"\r\033[K[{variant}] {phase} {done + 1}/{total}")
            sys.stderr.flush()
        elif self.last_plain != (variant, phase):
            self.last_plain = (variant, phase)
            err(f"[{variant}] {phase} ...")

    def close(self) -> None:
        """Clear the live line (a no-op in a log), so the next message starts on a clean line."""
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def suite_progress(progress: ProgressLine) -> Callable[[SuiteProgress], None]:
    """A suite's progress → ``progress``: ``[case i/n case_id side] timing round r/R``.

    On a terminal every event updates the line; in a CI log only a change of case or phase
    prints, so a case writes a handful of lines rather than one per round.
    """
    last_key: tuple[object, ...] | None = None

    def forward(variant: str, phase: str, done: int, total: int, key: tuple[object, ...]) -> None:
        nonlocal last_key
        if not progress.tty:
            if last_key == key:
                return
            last_key = key
        progress.show(variant, phase, done, total)

    def on_progress(update: SuiteProgress) -> None:
        where = f"case {update.index}/{update.total} {update.case_id}"
        if update.stage == "build":
            forward(where, "build", 0, 1, (update.index, "build"))
        elif update.stage == "remeasure" and update.event is None:
            progress.close()
            err(f"kbench-ci: {where}: suspected regression, measuring again with more rounds")
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
            progress.close()
            detail = f" — {update.detail}" if update.detail else ""
            err(f"kbench-ci: [{update.index}/{update.total}] {update.case_id}: {update.outcome}{detail}")

    return on_progress


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
    try:
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
