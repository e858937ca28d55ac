"""The output folder of a run: checked before any work, held against a second run, and never
left with a report that belongs to another run's results.

``bench``, ``run`` and ``compare`` write ``results.json`` and ``benchmark.md`` into one folder,
results first (a measured result is on disk before anything else can fail). Three things must not
happen: a folder that is a file, or cannot be written, found only after the whole run (the results
lost); two runs interleaving their writes in one folder; and, after a run that failed between the
two writes, a new results.json beside the previous run's benchmark.md.
"""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbench_ci.errors import UsageError

__all__ = ["PAIR", "check_output_file", "output_folder"]

#: the files of one run, which must come from the same run
PAIR = ("results.json", "benchmark.md")

_Identity = tuple[int, int, int] | None


def _check_folder(path: Path, option: str) -> None:
    """``path`` is a folder this process can create files in (created when missing)."""
    if path.exists() and not path.is_dir():
        raise UsageError(
            f"{option} {path} is a file, not a folder", hint="pass a folder (it is created when missing)"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{option} {path} cannot be created: {exc.strerror or exc}", hint="pass a folder you can write to"
        ) from None
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".kbench-ci-write-test.")
    except OSError as exc:
        raise UsageError(
            f"cannot write into {option} {path}: {exc.strerror or exc}", hint="pass a folder you can write to"
        ) from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: Path, option: str) -> None:
    """A file the run will write at the end (``--json-summary``): checked before any work."""
    if path.is_dir():
        raise UsageError(f"{option} {path} is a folder, not a file", hint="pass the path of a .json file")
    _check_folder(path.parent, f"{option}'s folder")


def _identity(path: Path) -> _Identity:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_mtime_ns)


@contextmanager
def output_folder(path: Path, *, option: str = "--output-dir") -> Iterator[Path]:
    """Check ``path`` and hold it for the block; on the way out (however the block ends), remove
    a file of :data:`PAIR` that the run did not rewrite when it did rewrite the other."""
    _check_folder(path, option)
    holder = _hold(path, option)
    before = {name: _identity(path / name) for name in PAIR}
    try:
        yield path
    finally:
        try:
            _unpair(path, before)
        finally:
            if holder is not None:
                os.close(holder)


def _hold(path: Path, option: str) -> int | None:
    """An exclusive lock on the folder itself (no lock file to upload with the report); released
    when the descriptor closes, also when the process dies. None where the file system has no
    such locks (some network file systems): then the run goes on unguarded."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise UsageError(
                f"{option} {path} is being written by another kbench-ci run",
                hint="wait for that run to finish, or pass another --output-dir",
            ) from None
        return None
    return fd


def _unpair(path: Path, before: dict[str, _Identity]) -> None:
    rewritten = {name for name in PAIR if _identity(path / name) != before[name]}
    if len(rewritten) != 1:
        return  # both new (a finished run), or neither (the run wrote nothing)
    for name in PAIR:
        if name not in rewritten:
            # The previous run's file beside this run's: it would be read as describing it.
            (path / name).unlink(missing_ok=True)
