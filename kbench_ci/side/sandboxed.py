"""Run one command of the pull request's in the side's sandbox: ``python -m
kbench_ci.side.sandboxed WRITABLE... -- PROGRAM ARG...``.

Under ``--isolation judge`` a compare's head may bring its own ``build`` command (a shell line
in its kbench.toml): that is pull-request code too, and before this it ran as the runner's user
with nothing between it and the base's worktree (the base's ref.py, which the judge loads), the
runner's files, and every process of the run. This hardens itself as a side's worker does
(:func:`kbench_ci.side.harden.harden`: writes only under ``WRITABLE``, no signals out of its
sandbox, no new privileges) and then becomes the command: Landlock's rules hold across exec and
bind every process the command starts.

Nothing imports this module (``python -m`` warns about one imported before it runs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kbench_ci.side.harden import harden

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
    harden([Path(folder) for folder in writable])
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"cannot run {command[0]}: {exc.strerror or exc}\n")
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
