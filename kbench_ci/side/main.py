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

from kbench_ci.side.harden import harden
from kbench_ci.wire.sideproto import SIDE_DEVICE_ENV, SIDE_PRELOAD_ENV, WAKE, Ready, encode_reply

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    fd, *writable = argv
    layers = harden([Path(folder) for folder in writable])
    channel = socket.socket(fileno=int(fd))
    # Imported once hardened: torch starts threads, and Landlock binds only the calling thread
    # and what it starts afterwards.
    from kbench_ci.measure.usercode import import_quietly  # noqa: PLC0415
    from kbench_ci.side.serve import make_context, serve  # noqa: PLC0415

    # The modules its cases import (``triton``: ~0.5 s). A module that fails to import is
    # forgotten again: the load reports it.
    import_quietly([name for name in os.environ.get(SIDE_PRELOAD_ENV, "").split(",") if name])
    make_context(os.environ.get(SIDE_DEVICE_ENV, ""))
    # No bytecode of the side's own code (its modules load after this line), as in the
    # in-process worker (measure/child.serve). torch's and the preloaded modules' bytecode goes
    # to the side's cache folder (PYTHONPYCACHEPREFIX, where the environment sets it): set
    # before the imports, it left every side on the H200 compiling torch's ~1,000 modules from
    # source at each start (3.5 s of cProfile's compile() a side). The folder is the
    # side's own and writable to its code anyway (docs/isolation.md).
    sys.dont_write_bytecode = True
    channel.sendall(encode_reply(Ready()))
    if not _woken(channel):
        return 0  # the judge closed it unclaimed (a spare it no longer needs)

    try:
        return serve(channel, layers)
    except SystemExit as exc:  # pull-request code that exits: the judge reads it as a dead side
        sys.stderr.write(f"the side's code called sys.exit({exc.code!r})\n")
        return 1
    finally:
        sys.stderr.flush()


def _woken(channel: socket.socket) -> bool:
    """Whether the judge's :data:`WAKE` came (read a byte at a time: what follows it is the
    requests' inbox's to read); False where the socket closed first."""
    line = b""
    while not line.endswith(b"\n"):
        byte = channel.recv(1)
        if not byte:
            return False
        line += byte
    return line == WAKE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
