"""The worker process's entry point: the lifeline to the parent, then :func:`child_main`.

``python -m kbench_ci.measure.worker LIFELINE_FD JOB EVENTS``, started by
:mod:`kbench_ci.measure.parent` and nothing else; :mod:`kbench_ci.measure.lifeline` says why
the lifeline, and how user code that ends the process is reported. Nothing imports this module:
``python -m`` warns about a module that is imported before it runs as ``__main__``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kbench_ci.measure.lifeline import USER_EXIT, USER_EXIT_PREFIX, exit_call, watch_lifeline

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    lifeline, job_path, events_path = argv
    watch_lifeline(int(lifeline))
    # Imported once the lifeline is up: torch takes seconds to import, and the parent may die
    # meanwhile.
    from kbench_ci.measure.child import child_main  # noqa: PLC0415

    try:
        return child_main(job_path, events_path)
    except SystemExit as exc:
        # Only user code raises SystemExit inside child_main: say what it did, for the parent.
        sys.stderr.write(f"{USER_EXIT_PREFIX}{exit_call(exc.code)}\n")
        sys.stderr.flush()
        return USER_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
