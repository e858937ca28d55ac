"""kbench-ci's own temporary folders (a worker's events and libraries, a run's build staging),
each marked with the process that owns it, and the removal of those whose owner is gone.

A run removes its folders on every exit path it gets to run; a run that is SIGKILLed (a
cancelled job's last signal, the OOM killer) runs none, and its folders would stay in /tmp for
ever. So every folder holds an owner file (the pid and its start time, which tells a reused pid
from the owner), and the next run removes the folders whose owner no longer runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["OWNER_FILE", "PREFIXES", "make_scratch", "remove_left_by", "remove_stale"]

#: the prefixes of every temporary folder kbench-ci makes
PREFIXES = ("kbench-worker-", "kbench-build-", "kbench-judge-")
OWNER_FILE = ".kbench-owner"
#: a folder without an owner file (a run of an older version) is stale after this long
UNOWNED_STALE_S = 24 * 3600.0


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None
    when no such process runs (or /proc cannot tell)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _me() -> str:
    pid = os.getpid()
    return f"{pid} {_start_time(pid) or '?'}"


def make_scratch(prefix: str) -> Path:
    """A new folder ``<tmp>/<prefix>XXXX`` marked as this process's."""
    if not prefix.startswith(PREFIXES):
        raise ValueError(f"not a kbench-ci scratch prefix: {prefix}")
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / OWNER_FILE).write_text(_me(), encoding="utf-8")
    return folder


def create_new(folder: Path, name: str, *, flags: int = os.O_WRONLY) -> int:
    """The descriptor of a file made new as ``folder / name`` (mode 0600): never one that exists
    and never through a link, the folder itself opened without following one. For files kbench-ci
    makes where a side's code could have planted a link first (its output, a CPU arena): a
    worker's output linked to the parent's next events file let a head write whole cases into
    the results (red team, 2026-12-05)."""
    where = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.open(name, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=where)
    finally:
        os.close(where)


def _owner(folder: Path) -> tuple[int, str] | None:
    """The pid and start time its owner file holds; None without one."""
    try:
        pid_text, start = (folder / OWNER_FILE).read_text(encoding="utf-8").split()
        return int(pid_text), start
    except (OSError, ValueError):
        return None


def _alive(owner: tuple[int, str]) -> bool:
    pid, start = owner
    now = _start_time(pid)
    return now is not None and (start == "?" or now == start)


def _folders(root: Path | None) -> Iterator[Path]:
    """Every kbench-ci folder under ``root`` (default: the temp folder), links left out."""
    base = Path(root if root is not None else tempfile.gettempdir())
    for prefix in PREFIXES:
        for folder in base.glob(f"{prefix}*"):
            if folder.is_dir() and not folder.is_symlink():
                yield folder


def remove_left_by(pid: int, root: Path | None = None) -> list[Path]:
    """Remove the folders under ``root`` (default: the temp folder) that process ``pid`` made,
    once it no longer runs: a worker or judge process ends by SIGKILL (its lifeline), so it
    never removes its own; the process that stopped it does. Returns them."""
    removed: list[Path] = []
    for folder in _folders(root):
        owner = _owner(folder)
        if owner is not None and owner[0] == pid and not _alive(owner):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def remove_stale(root: Path | None = None, *, now: float | None = None) -> list[Path]:
    """Remove every kbench-ci folder under ``root`` (default: the temp folder) whose owner no
    longer runs; returns them. Folders of running kbench-ci processes are left alone."""
    current = time.time() if now is None else now
    removed: list[Path] = []
    for folder in _folders(root):
        owner = _owner(folder)
        if owner is not None:
            alive = _alive(owner)
        else:
            try:
                alive = current - folder.stat().st_mtime < UNOWNED_STALE_S
            except OSError:
                continue
        if not alive:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed
