"""The side's sandbox (kbench_ci/side/harden.py), applied in a fresh process as a side's worker
applies it: writes outside its folders and signals outside its sandbox must fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci.side.harden import landlock_abi

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
print(json.dumps(result))
"""


def _run(tmp_path: Path) -> dict:
    mine, outside = tmp_path / "mine", tmp_path / "outside"
    mine.mkdir()
    outside.mkdir()
    completed = subprocess.run(
        [sys.executable, "-c", CHILD, str(mine), str(outside), str(os.getpid())],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


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
    """Red team (2026-12-05): with the whole of /dev writable, a worker run as root opened
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
