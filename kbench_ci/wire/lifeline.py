"""What the worker process and its parent agree on beyond :mod:`~kbench_ci.wire.protocol`: the
lifeline that ends a worker whose parent died, and how a worker reports user code that ended it.

**The lifeline.** The worker runs in its own session, so that a timeout can kill the kernel's
whole process group, and for the same reason no signal aimed at the parent's terminal or process
group reaches it. The parent kills it on every exit path it gets to run, but a parent that is
SIGKILLed (the runner ending a cancelled job, the OOM killer) runs none of them. So the parent
keeps the write end of a pipe whose read end the worker watches: the kernel closes that write end
when the parent dies, however it dies, and the worker then kills its own process group. A pipe is
used rather than ``PR_SET_PDEATHSIG``, which fires when the *thread* that spawned the worker
ends, not the process, and is Linux-only.

**Jobs come down the same pipe.** A warm worker serves case after case: the parent writes one
line per job (a :class:`~kbench_ci.wire.protocol.JobTicket`) and the thread that watches for
end-of-file hands each whole line on. One pipe, so there is no state in which the worker waits
for a job from a parent that is gone: closing the pipe (the parent's exit, or the parent
retiring the worker) always ends it.

**User code that ends the process.** ``sys.exit()`` (or ``exit()``) in a kernel raises
``SystemExit``, which the worker's own error handling does not catch (it is not an
``Exception``). :mod:`~kbench_ci.measure.worker` catches it and reports it by :data:`USER_EXIT`
and a stderr line starting with :data:`USER_EXIT_PREFIX`, so the parent can say what the user's
code did instead of "the worker stopped".

Kept apart from :mod:`~kbench_ci.measure.worker` (which ``python -m`` runs) so that the parent can
import these without importing the module it starts as ``__main__``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

__all__ = ["USER_EXIT", "USER_EXIT_PREFIX", "exit_call", "watch_lifeline"]

#: exit code of a worker whose user code called sys.exit() / exit() / quit()
USER_EXIT = 87
#: the stderr line the parent quotes: ``user code called sys.exit(3)``
USER_EXIT_PREFIX = "user code called "


def exit_call(code: object) -> str:
    """``sys.exit()``, ``sys.exit(3)``, ``sys.exit('message')``: how the user's call read."""
    return "sys.exit()" if code is None else f"sys.exit({code!r})"


def watch_lifeline(fd: int, on_line: Callable[[bytes], None] | None = None) -> threading.Thread:
    """Kill this process's group when the other end of the pipe ``fd`` closes (the parent died,
    or it retired this worker); hand every whole line written to it to ``on_line``."""

    def watch() -> None:
        pending = b""
        try:
            while chunk := os.read(fd, 65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip() and on_line is not None:
                        on_line(line)
        except OSError:
            pass
        # Our own group only when we lead it (the parent starts us in a new session); otherwise
        # (a test calling this directly) killing the group would take the caller with us.
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="kbench-ci-lifeline", daemon=True)
    thread.start()
    return thread
