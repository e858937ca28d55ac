"""Run one command of the pull request's in the side's sandbox: ``python -m
kbench_ci.side.sandboxed WRITABLE... -- PROGRAM ARG...`` (started through
:func:`kbench_ci.procgroup.module_command`, so that nothing in the folder it starts in is
imported before the sandbox holds).

Under ``--isolation judge`` a compare's head may bring its own ``build`` command (a shell line
in its kbench.toml): that is pull-request code too, and before this it ran as the runner's user
with nothing between it and the base's worktree (the base's ref.py, which the judge loads), the
runner's files, and every process of the run.

This process stays outside the sandbox, as a child subreaper: it starts the command in a child
that hardens itself as a side's worker does (:func:`kbench_ci.side.harden.harden`: writes only
under ``WRITABLE``, no signals out of its sandbox, so none to this process, no new privileges,
the seccomp filter with a file's mode, owner and times left as they are)
and then becomes the command. When the command ends, every process it left (a daemon it
double-forked comes here) is ended with it, and its exit status is this one's.

Nothing imports this module (``python -m`` warns about one imported before it runs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kbench_ci.procgroup import become_subreaper, end_strays

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    if "--" not in argv:
        sys.stderr.write("usage: python -m kbench_ci.side.sandboxed WRITABLE... -- PROGRAM ARG...\n")
        return 2
    split = list(argv).index("--")
    writable, command = argv[:split], list(argv[split + 1:])
    if not command:
        sys.stderr.write("kbench_ci.side.sandboxed: no command after --\n")
        return 2
    become_subreaper()
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:
        try:
            from kbench_ci.side.harden import harden  # noqa: PLC0415  (only the child is hardened)

            # a build's tools chmod and touch what they make: those calls do nothing, and succeed
            harden([Path(folder) for folder in writable], pretend_file_metadata=True)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"cannot run {command[0]}: {exc.strerror or exc}\n".encode())
        finally:
            os._exit(127)
    try:
        _, status = os.waitpid(child, 0)
    finally:
        end_strays()  # what the command left behind, however it ended
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
