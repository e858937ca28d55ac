r"""The worker process's entry point: the lifeline to the parent, then :func:`serve`.

``python -m kbench_ci.measure.worker LIFELINE_FD [DEVICE [MODULE ...]]``, started by
:mod:`kbench_ci.measure.parent` and nothing else. With a ``DEVICE`` it warms up before the
first job (:func:`~kbench_ci.measure.child.warm_up`: the CUDA context, and the ``MODULE``\ s
its cases will import), while the parent is still setting up. The parent writes one
:class:`~kbench_ci.wire.protocol.JobTicket` per case down the lifeline pipe;
:mod:`kbench_ci.wire.lifeline` says why jobs and the lifeline share a pipe, and how user code
that ends the process is reported. Nothing imports this module:
``python -m`` warns about a module that is imported before it runs as ``__main__``.
"""

from __future__ import annotations

import queue
import sys
from collections.abc import Sequence

from kbench_ci.wire.lifeline import USER_EXIT, USER_EXIT_PREFIX, exit_call, watch_lifeline
from kbench_ci.wire.protocol import JobTicket

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    lifeline, *warm = argv
    tickets: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    watch_lifeline(int(lifeline), tickets.put)
    # Imported once the lifeline is up: torch takes seconds to import, and the parent may die
    # meanwhile. A warm worker imports it while the parent is still building the kernels.
    from kbench_ci.measure.child import serve, warm_up  # noqa: PLC0415

    if warm:
        device, *preload = warm
        warm_up(device, preload)
    try:
        return serve(lambda: JobTicket.decode(tickets.get()))
    except SystemExit as exc:
        # Only user code raises SystemExit inside serve: say what it did, for the parent.
        sys.stderr.write(f"{USER_EXIT_PREFIX}{exit_call(exc.code)}\n")
        sys.stderr.flush()
        return USER_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
