"""Process-group handling shared by everything that starts a child in its own session."""

from __future__ import annotations

import os
import signal
import subprocess


def kill_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole group (nvcc's cicc/ptxas, a worker's kernel) and reap it.

    Children are started with ``start_new_session=True`` so that a timeout can take down
    everything they spawned; the same isolation means no terminal signal reaches them, so every
    exit path of the parent must call this.
    """
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.communicate()
