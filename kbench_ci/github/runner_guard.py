"""What the compare step guards around the pull request's code: the runner's file-command files
and the action's own virtual environment.

A kernel run by the compare step may write to any file its user may write (outside
``--isolation judge``'s Landlock sandbox). Two places would let it run code of its own in the
job's later steps, the comment step with its write token among them: the runner's file-command
files (a ``BASH_ENV=...`` line appended to ``$GITHUB_ENV`` runs in every later bash step) and
the venv the later steps' Python comes from. So the step takes a :class:`Snapshot` of both before
compare starts and, after it ends, puts every file-command file back as it was (removing files
that appeared) and reports any change to the venv, which cannot be undone in place: the later
steps then refuse to run (action.yml reads the step's ``tampered`` output).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: the runner's folder of file-command files, below RUNNER_TEMP
FILE_COMMANDS_FOLDER = "_runner_file_commands"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The file-command files' bytes, and every venv file's identity (size, mtime and ctime in
    ns, inode): ctime cannot be set back by a process, so a file rewritten and re-dated still
    differs."""

    #: the runner's file-command folder (files that appear there are removed), or None
    commands_dir: Path | None
    #: each guarded file's bytes, by path (None: it did not exist)
    commands: dict[Path, bytes | None]
    venv_dir: Path | None
    venv: dict[str, tuple[int, int, int, int]]


def take(files: list[Path], venv_dir: Path | None) -> Snapshot:
    """``files``: the step's file-command files ($GITHUB_ENV, $GITHUB_OUTPUT, ...). Their folder
    is guarded whole only when it is the runner's own (named :data:`FILE_COMMANDS_FOLDER`)."""
    folders = {path.parent for path in files}
    commands_dir = next(iter(folders)) if len(folders) == 1 and next(iter(folders)).name == FILE_COMMANDS_FOLDER else None
    guarded = set(files)
    if commands_dir is not None and commands_dir.is_dir():
        guarded |= {entry for entry in commands_dir.iterdir()}
    commands = {path: _read(path) for path in guarded}
    return Snapshot(commands_dir, commands, venv_dir, _venv_identity(venv_dir))


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def restore(snapshot: Snapshot) -> list[str]:
    """Put the file-command files back as they were; what was found changed (file commands
    restored, venv files changed), one phrase each. Empty: nothing was touched."""
    found: list[str] = []
    folder = snapshot.commands_dir
    if folder is not None and folder.is_dir():
        for entry in sorted(folder.iterdir()):
            if entry not in snapshot.commands:
                found.append(f"{entry.name} appeared beside the runner's file commands (removed)")
                _remove(entry)
    for path, before in sorted(snapshot.commands.items()):
        now = _read(path)
        if now == before and (before is not None or not path.exists()):
            continue
        _remove(path)
        if before is None:
            found.append(f"{path.name} appeared among the runner's file commands (removed)")
        else:
            found.append(f"the runner's file command {path.name} was changed (put back as it was)")
            path.write_bytes(before)
    if snapshot.venv_dir is not None:
        now_venv = _venv_identity(snapshot.venv_dir)
        changed = sorted(name for name in set(snapshot.venv) | set(now_venv) if snapshot.venv.get(name) != now_venv.get(name))
        if changed:
            shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
            found.append(f"the action's venv {snapshot.venv_dir} changed ({shown})")
    return found


def venv_changed(found: list[str]) -> bool:
    return any(phrase.startswith("the action's venv") for phrase in found)


def _venv_identity(venv_dir: Path | None) -> dict[str, tuple[int, int, int, int]]:
    identity: dict[str, tuple[int, int, int, int]] = {}
    if venv_dir is None or not venv_dir.is_dir():
        return identity
    # Bytecode too: a .pyc planted in the venv runs in the later steps as surely as a .py (the
    # step runs compare with PYTHONDONTWRITEBYTECODE, so none of its own appears meanwhile).
    for root, _folders, files in os.walk(venv_dir):
        for name in files:
            path = os.path.join(root, name)
            try:
                stat = os.lstat(path)
            except OSError:
                continue
            identity[os.path.relpath(path, venv_dir)] = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    return identity


def _remove(entry: Path) -> None:
    try:
        if entry.is_dir() and not entry.is_symlink():
            for child in entry.iterdir():
                _remove(child)
            entry.rmdir()
        else:
            entry.unlink()
    except OSError:
        pass
