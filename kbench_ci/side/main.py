"""A side's worker: ``python -m kbench_ci.side.main SOCKET_FD WRITABLE...``, started by the judge
(:mod:`kbench_ci.judge.sides`) and nothing else.

It hardens itself first (:mod:`.harden`, before torch or any other thread exists), then
answers the judge's requests on the socket, one JSON line each way, until the judge closes it.
Nothing imports this module (``python -m`` warns about one imported before it runs).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from kbench_ci.measure.sideproto import SIDE_DEVICE_ENV, SIDE_PRELOAD_ENV
from kbench_ci.side.harden import harden

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    fd, *writable = argv
    layers = harden([Path(folder) for folder in writable])
    sys.dont_write_bytecode = True
    channel = socket.socket(fileno=int(fd))
    # Imported once hardened: torch starts threads, and Landlock binds only the calling thread
    # and what it starts afterwards.
    from kbench_ci.side.serve import serve, warm_up  # noqa: PLC0415

    warm_up(os.environ.get(SIDE_DEVICE_ENV, ""), [name for name in os.environ.get(SIDE_PRELOAD_ENV, "").split(",") if name])

    try:
        return serve(channel, layers)
    except SystemExit as exc:  # pull-request code that exits: the judge reads it as a dead side
        sys.stderr.write(f"the side's code called sys.exit({exc.code!r})\n")
        return 1
    finally:
        sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
