"""A CPU arena is a memfd that only the judge and one side's worker hold: with
no name in any folder, another side reaches it only through ``/proc/PID/fd`` or
``/proc/PID/map_files`` of a process that holds or maps it, which a side's worker closes to the
same user by being not dumpable. Asserted here with two hardened processes as the side workers
are (kbench_ci.side.harden: not dumpable, CAP_SYS_PTRACE dropped, so also when run as root):
the peer cannot open the holder's memfd, and can open it where the holder stays dumpable (the
control: what the layer is for)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HOLDER = r"""
import ctypes, mmap, os, sys
from pathlib import Path
from kbench_ci.side import harden
if sys.argv[2] == "hardened":
    harden.harden([Path(sys.argv[1])])
else:  # dumpable, with the peer's capabilities (a root holder's own CAP_SYS_PTRACE alone keeps a peer without it out)
    harden._drop_ptrace_capability(ctypes.CDLL(None, use_errno=True))
fd = os.memfd_create("kbench-arena-0", os.MFD_CLOEXEC)
os.write(fd, b"the base's answers")
mapping = mmap.mmap(fd, 18)
print(os.getpid(), fd, flush=True)
sys.stdin.readline()
"""

PEEKER = r"""
import ctypes, json, os, sys
from pathlib import Path
from kbench_ci.side import harden
if sys.argv[4] == "hardened":
    layers = list(harden.harden([Path(sys.argv[1])]))
else:  # only CAP_SYS_PTRACE dropped (no Landlock, which also keeps a sandbox from ptrace's checks)
    layers = ["no-ptrace-capability"] if harden._drop_ptrace_capability(ctypes.CDLL(None, use_errno=True)) else []
pid, fd = int(sys.argv[2]), int(sys.argv[3])
result = {"layers": layers}
try:
    with open(f"/proc/{pid}/fd/{fd}", "rb") as f:
        result["fd"] = f.read().decode()
except OSError as exc:
    result["fd"] = exc.__class__.__name__
try:
    names = os.listdir(f"/proc/{pid}/map_files")
    result["map_files"] = "listed"
    for name in names:
        if "arena" in os.readlink(f"/proc/{pid}/map_files/{name}"):
            with open(f"/proc/{pid}/map_files/{name}", "rb") as f:
                result["map_files"] = f.read().decode()
except OSError as exc:
    result["map_files"] = exc.__class__.__name__
print(json.dumps(result))
"""


def _peek(tmp_path: Path, holder_mode: str, peeker_mode: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    (tmp_path / "holder").mkdir()
    (tmp_path / "peeker").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "holder"), holder_mode], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        pid, fd = holder.stdout.readline().split()
        peek = subprocess.run([sys.executable, "-c", PEEKER, str(tmp_path / "peeker"), pid, fd, peeker_mode], env=env,
                              capture_output=True, text=True, timeout=60)
        assert peek.returncode == 0, peek.stderr
        result: dict[str, object] = json.loads(peek.stdout)
        return result
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(("holder_mode", "peeker_mode"), [("hardened", "hardened"), ("hardened", "no-ptrace-capability"),
                                                        ("dumpable", "no-ptrace-capability")])
def test_a_peer_without_ptrace_reaches_a_memfd_only_where_its_holder_is_dumpable(tmp_path: Path, holder_mode: str,
                                                                                   peeker_mode: str) -> None:
    result = _peek(tmp_path, holder_mode, peeker_mode)
    print(result)
    assert "no-ptrace-capability" in result["layers"]  # type: ignore[operator]
    if holder_mode == "hardened":
        assert result["fd"] == "PermissionError" and result["map_files"] == "PermissionError", result
    else:  # the control: without the holder's layer, the same peer reads it
        assert result["fd"] == "the base's answers", result
