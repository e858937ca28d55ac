"""kbench-ci's own temporary folders (a worker's events and libraries, a run's build staging),
each marked with the process that owns it, and the removal of those whose owner is gone.

A run removes its folders on every exit path it gets to run; a run that is SIGKILLed (a
cancelled job's last signal, the OOM killer) runs none, and its folders would stay in /tmp for
ever. So every folder holds an owner file (the pid and its start time, which tells a reused pid
from the owner), and the next run removes the folders whose owner no longer runs.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["OWNER_FILE", "PREFIXES", "make_scratch", "remove_left_by", "remove_stale", "remove_tree"]

#: the prefixes of every temporary folder kbench-ci makes
PREFIXES = ("kbench-worker-", "kbench-build-", "kbench-judge-", "kbench-side-")
#: shared memory, where each side's worker makes its files in a folder of its own (kbench-side-)
SHARED_MEMORY = Path("/dev/shm")
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


def make_scratch(prefix: str, root: Path | None = None) -> Path:
    """A new folder ``<root>/<prefix>XXXX`` (default: the temp folder) marked as this process's."""
    if not prefix.startswith(PREFIXES):
        raise ValueError(f"not a kbench-ci scratch prefix: {prefix}")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    (folder / OWNER_FILE).write_text(_me(), encoding="utf-8")
    return folder


def create_new(folder: Path, name: str, *, flags: int = os.O_WRONLY) -> int:
    """The descriptor of a file made new as ``folder / name`` (mode 0600): never one that exists
    and never through a link, the folder itself opened without following one. For files kbench-ci
    makes where a side's code could have planted a link first (its output, a CPU arena): a
    worker's output linked to the parent's next events file let a head write whole cases into
    the results."""
    where = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.open(name, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=where)
    finally:
        os.close(where)


#: how the remover names a folder it moved up to the top of the tree it removes
_MOVED = ".kbench-rm-"
_MOVED_SERIAL = itertools.count()


def remove_tree(path: Path) -> bool:
    """Remove the folder ``path`` and everything in it, never raising; whether it is gone.

    For every folder a side's code could have written (its folder, its caches, a worker's
    scratch): ``shutil.rmtree`` recurses once per level, and a side's tree 3000 folders deep
    made it raise RecursionError even with ``ignore_errors`` (the judge crashed as it retired a
    worker, and a stale folder crashed every later run's ``remove_stale``). Here no recursion and
    no long path: two descriptors at a time, the top folder's and one folder's below it; each
    folder found inside that one is moved up to the top (a rename in the same tree) and emptied
    in a later pass. Links are unlinked, never followed (every open is ``O_NOFOLLOW``, relative
    to a descriptor), so a link to a folder outside removes nothing there. ``path`` itself, a
    link, is unlinked only."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.open(path, flags)
    except FileNotFoundError:
        return True
    except OSError:
        try:
            path.unlink()  # a link or a file where a folder was
        except OSError:
            return not os.path.lexists(path)
        return True
    try:
        stuck: set[str] = set()
        while True:
            progress = False
            with os.scandir(top) as entries:
                names = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
            for name, is_dir in names:
                if name in stuck:
                    continue
                if not is_dir:
                    progress |= _unlink(name, top)
                elif _empty_into(top, name, flags):
                    progress = True
                else:
                    stuck.add(name)
            if not progress:
                break
    finally:
        os.close(top)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _unlink(name: str, folder: int) -> bool:
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _empty_into(top: int, name: str, flags: int) -> bool:
    """Remove the folder ``name`` of ``top``: its files unlinked, its folders moved up into
    ``top`` (emptied by a later pass), then itself. Whether anything was removed or moved."""
    try:
        folder = os.open(name, flags, dir_fd=top)
    except OSError:
        return _unlink(name, top)  # no longer a folder (or never was one we may open)
    moved = False
    try:
        with os.scandir(folder) as entries:
            inside = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for child, is_dir in inside:
            if not is_dir:
                moved |= _unlink(child, folder)
                continue
            target = f"{_MOVED}{os.getpid()}-{next(_MOVED_SERIAL)}"
            try:
                os.stat(target, dir_fd=top, follow_symlinks=False)
                continue  # never over something that is there (a side's own planted name)
            except FileNotFoundError:
                pass
            except OSError:
                continue
            try:
                os.rename(child, target, src_dir_fd=folder, dst_dir_fd=top)
                moved = True
            except OSError:
                pass
    except OSError:
        pass
    finally:
        os.close(folder)
    try:
        os.rmdir(name, dir_fd=top)
    except OSError:
        return moved
    return True


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
    """Every kbench-ci folder under ``root`` (default: the temp folder and shared memory), links
    left out."""
    bases = [root] if root is not None else [Path(tempfile.gettempdir()), SHARED_MEMORY]
    for base in bases:
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
            remove_tree(folder)
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
            remove_tree(folder)
            removed.append(folder)
    return removed
