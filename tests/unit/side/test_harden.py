"""The side's sandbox (kbench_ci/side/harden.py), applied in a fresh process as a side's worker
applies it: writes outside its folders and signals outside its sandbox must fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci.side.harden import landlock_abi, seccomp_available

CHILD = r"""
import json, os, signal, sys
from pathlib import Path
from kbench_ci.side.harden import harden
mine, outside, parent = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
layers = harden([mine])
result = {"layers": list(layers)}
for name, path in (("mine", mine / "ok"), ("outside", outside / "planted")):
    try:
        path.write_text("x")
        result[name] = "written"
    except OSError as exc:
        result[name] = exc.__class__.__name__
for name, device in (("devnull", "/dev/null"), ("kmsg", "/dev/kmsg")):
    try:
        os.close(os.open(device, os.O_WRONLY))  # opened only: nothing is written to the kernel's log
        result[name] = "opened"
    except OSError as exc:
        result[name] = exc.__class__.__name__
try:
    os.kill(parent, 0)
    result["signal"] = "sent"
except OSError as exc:
    result["signal"] = exc.__class__.__name__
# what a head does to another process or to the base's files: a sibling's
# scheduling, a file's mode and times, a user namespace of its own; and its own scheduling
other = int(sys.argv[4])
import ctypes, fcntl, struct
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, call):
    try:
        call()
        result[name] = "done"
    except OSError as exc:
        result[name] = exc.__class__.__name__
attempt("renice_other", lambda: os.setpriority(os.PRIO_PROCESS, other, 19))
attempt("pin_other", lambda: os.sched_setaffinity(other, {min(os.sched_getaffinity(0))}))
attempt("renice_group", lambda: os.setpriority(os.PRIO_PGRP, 0, 19))
attempt("renice_self", lambda: os.setpriority(os.PRIO_PROCESS, 0, 1))
attempt("pin_self", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
attempt("chmod_outside", lambda: os.chmod(outside / "theirs", 0o777))
attempt("touch_outside", lambda: os.utime(outside / "theirs", (0, 0)))
with open(outside / "theirs", "rb") as theirs:
    attempt("setflags_outside", lambda: fcntl.ioctl(theirs.fileno(), 0x40086602, struct.pack("l", 0)))
def new_user_namespace():
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
attempt("user_namespace", new_user_namespace)
print(json.dumps(result))
"""


def _run(tmp_path: Path) -> dict:
    mine, outside = tmp_path / "mine", tmp_path / "outside"
    mine.mkdir()
    outside.mkdir()
    (outside / "theirs").write_text("the base's file")
    (outside / "theirs").chmod(0o644)
    # the sibling a head would renice: a process of the test's own, never the test itself
    other = subprocess.Popen(["sleep", "60"])
    try:
        completed = subprocess.run(
            [sys.executable, "-c", CHILD, str(mine), str(outside), str(os.getpid()), str(other.pid)],
            capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
            start_new_session=True,  # its process group is its own: a renice of "its group" reaches no test
        )
        assert completed.returncode == 0, completed.stderr
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        result["other_nice"] = os.getpriority(os.PRIO_PROCESS, other.pid)
        result["other_cpus"] = sorted(os.sched_getaffinity(other.pid))
    finally:
        other.kill()
        other.wait()
    result["theirs_mode"] = oct((outside / "theirs").stat().st_mode & 0o777)
    return result


def test_the_layers_a_side_puts_itself_in(tmp_path: Path) -> None:
    result = _run(tmp_path)
    print(result)
    assert {"not-dumpable", "no-new-privs"} <= set(result["layers"])
    assert result["mine"] == "written"


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel offers no Landlock")
def test_a_side_cannot_write_outside_its_folders(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert "landlock-write" in result["layers"]
    assert result["outside"] == "PermissionError"
    assert not (tmp_path / "outside" / "planted").exists()


@pytest.mark.skipif(landlock_abi() < 6, reason="Landlock's signal scope needs ABI 6 (Linux 6.12)")
def test_a_side_cannot_signal_a_process_outside_its_sandbox(tmp_path: Path) -> None:
    result = _run(tmp_path)
    assert "landlock-signal" in result["layers"]
    assert result["signal"] == "PermissionError"


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel offers no Landlock")
def test_a_side_opens_the_harmless_devices_for_writing_and_no_others(tmp_path: Path) -> None:
    """Red team: with the whole of /dev writable, a worker run as root opened
    /dev/loop0 and /dev/kmsg for writing. (As another user /dev/kmsg is closed by its mode
    too; the run as root is the one that tells.)"""
    result = _run(tmp_path)
    print(result, "uid", os.getuid())
    assert result["devnull"] == "opened"
    assert result["kmsg"] in ("PermissionError", "FileNotFoundError"), result


def test_the_gpus_device_files_and_the_fallback_where_the_driver_makes_them_late(tmp_path: Path) -> None:
    from kbench_ci.side.harden import writable_devices

    for name in ("nvidiactl", "null", "loop0", "kmsg", "sda"):
        (tmp_path / name).touch()
    # the driver is there, its unified-memory device not yet (bare metal, before the first CUDA
    # start): a rule binds only what exists, so the whole folder, as before
    assert writable_devices(tmp_path) == [str(tmp_path)]
    for name in ("nvidia-uvm", "nvidia0"):
        (tmp_path / name).touch()
    (tmp_path / "nvidia-caps").mkdir()
    assert writable_devices(tmp_path) == [str(tmp_path / name) for name in ("nvidia-caps", "nvidia-uvm", "nvidia0",
                                                                            "nvidiactl", "null")]


@pytest.mark.skipif(not seccomp_available(), reason="libseccomp (libseccomp.so.2) is not installed")
def test_a_side_cannot_reschedule_other_processes_nor_change_files_metadata(tmp_path: Path) -> None:
    """A head reniced and pinned the base's worker (a +35% regression read +14.7%),
    and could chmod the base's files, which Landlock does not govern. Its own scheduling it
    may change (pid 0)."""
    before = os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0))
    result = _run(tmp_path)
    print(result)
    assert "seccomp" in result["layers"]
    for call in ("renice_other", "pin_other", "renice_group", "chmod_outside", "touch_outside", "setflags_outside",
                 "user_namespace"):
        assert result[call] == "PermissionError", (call, result)
    assert (result["other_nice"], result["other_cpus"]) == before
    assert result["theirs_mode"] == "0o644"
    assert result["renice_self"] == "done" and result["pin_self"] == "done"
