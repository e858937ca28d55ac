"""The base's files out of every side's reach: a record of them taken before any pull-request
code runs, checked (and put back) before each load of the base.

Landlock keeps a side from writing the base's worktree, but not from ``chmod``, ``chown`` or
``chattr``: a head that set the base's helper module to mode 000 at its load made the next
fresh base worker (a re-measurement's) fail to import it, and a 30x slower head read ``fixed``
(docs/isolation.md). Whatever differs from the record when the base is about to load is the
pull request's doing (its build command or a side's worker: the only code that runs between
the record and a base load and is not trusted); a mode, an owner or a flag is put back, a
content cannot be and is only named. Times are not recorded: a source whose time changed is
compiled again, never refused.

Trusted code only (the parent, the judge): nothing here is imported by a side.
"""

from __future__ import annotations

import array
import fcntl
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kbench_ci.scratch import remove_tree

#: folders never recorded: bytecode the base's own worker may write (each side's bytecode
#: folder is its own under the judge; in process Python writes ``__pycache__`` beside the
#: sources) and git's own data
_SKIPPED = frozenset({"__pycache__", ".git"})
#: the inode flags (``chattr``) a root side can set, which Landlock does not cover: immutable
#: and append-only; each blocks writes to the file or folder (a base writes into its own folders)
_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602
_LOCKING_FLAGS = 0x10 | 0x20


@dataclass(frozen=True, slots=True)
class GuardedFile:
    """One file or folder of the base's as it was before any pull-request code ran."""

    path: str
    mode: int
    uid: int
    gid: int
    #: sha256 of a file's contents; None for a folder
    sha256: str | None = None
    #: its immutable and append-only flags (``chattr +i``, ``+a``)
    flags: int = 0


@dataclass(frozen=True, slots=True)
class Change:
    """How a guarded file differs from its record, and whether it was put back."""

    path: str
    what: str
    restored: bool

    def describe(self, root: str | None = None) -> str:
        name = os.path.relpath(self.path, root) if root else self.path
        return f"{name} ({self.what}{'; put back' if self.restored else ''})"


def record(root: Path, folders: Iterable[Path]) -> tuple[GuardedFile, ...]:
    """Every file and folder under ``folders`` (recursively, bytecode and git's data left out)
    and every folder from ``root`` down to each of them, with its mode, owner and (a file's)
    contents' hash. A path that cannot be read is left out (the base fails there by itself)."""
    root = root.resolve()
    paths: dict[str, None] = {}
    for folder in folders:
        folder = folder.resolve()
        for parent in reversed((folder, *folder.parents)):
            if parent == root or root in parent.parents:
                paths[str(parent)] = None
        for here, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED)
            for name in (*dirs, *sorted(files)):
                paths[os.path.join(here, name)] = None
    guarded = (_guard(path) for path in paths)
    return tuple(entry for entry in guarded if entry is not None)


def _guard(path: str) -> GuardedFile | None:
    try:
        status = os.lstat(path)
        digest = _sha256(path) if stat.S_ISREG(status.st_mode) else None
    except OSError:
        return None
    if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        return None  # a link or a device: nothing the base loads through its own mode
    return GuardedFile(path, stat.S_IMODE(status.st_mode), status.st_uid, status.st_gid, digest, _flags(path) or 0)


def _flags(path: str) -> int | None:
    """The immutable and append-only flags of ``path``; None where they cannot be read (a file
    system without them, a file this user cannot open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        value = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, value, True)
        return value[0] & _LOCKING_FLAGS
    except OSError:
        return None
    finally:
        os.close(fd)


def _set_flags(path: str, flags: int) -> bool:
    """``path``'s immutable and append-only flags set to ``flags`` (its other flags kept)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        value = array.array("i", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, value, True)
        value[0] = (value[0] & ~_LOCKING_FLAGS) | flags
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, value, True)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    # O_NOFOLLOW: a file swapped for a link is read as the link it now is (refused), never
    # through it
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def restore(guarded: Sequence[GuardedFile]) -> tuple[Change, ...]:
    """Each guarded file checked against its record: a mode or an owner put back (the same
    user may; root may change an owner back), a changed content or kind only named. Folders
    are put back first, top down, so that a folder set to 000 does not hide what is in it."""
    changes: list[Change] = []
    for entry in guarded:
        change = _restore(entry)
        if change is not None:
            changes.append(change)
    return tuple(changes)


def _restore(entry: GuardedFile) -> Change | None:
    try:
        status = os.lstat(entry.path)
    except FileNotFoundError:
        return Change(entry.path, "removed", False)
    except OSError as exc:
        return Change(entry.path, f"no longer reachable: {exc.strerror}", False)
    is_file = entry.sha256 is not None
    if (stat.S_ISREG(status.st_mode) if is_file else stat.S_ISDIR(status.st_mode)) is False:
        return Change(entry.path, f"no longer a {'file' if is_file else 'folder'}", False)
    what: list[str] = []
    restored = True
    flags = _flags(entry.path)
    if flags is not None and flags != entry.flags:
        # first: an immutable file's mode and owner cannot be put back
        what.append(f"flags {_flag_names(entry.flags)} → {_flag_names(flags)}")
        restored = _set_flags(entry.path, entry.flags)
    if (status.st_uid, status.st_gid) != (entry.uid, entry.gid):
        what.append(f"owner {entry.uid}:{entry.gid} → {status.st_uid}:{status.st_gid}")
        try:
            os.chown(entry.path, entry.uid, entry.gid)
        except OSError:
            restored = False
    mode = stat.S_IMODE(status.st_mode)
    if mode != entry.mode:
        what.append(f"mode {entry.mode:04o} → {mode:04o}")
        try:
            os.chmod(entry.path, entry.mode)
        except OSError:
            restored = False
    if is_file:
        try:
            digest = _sha256(entry.path)
        except OSError as exc:
            digest = f"unreadable ({exc.strerror})"
        if digest != entry.sha256:
            what.append("contents changed")
            restored = False
    return Change(entry.path, ", ".join(what), restored) if what else None


def _flag_names(flags: int) -> str:
    return "".join(name for bit, name in ((0x10, "i"), (0x20, "a")) if flags & bit) or "none"


def reclaim(folders: Iterable[Path], *, below: bool = True) -> None:
    """A worker's own folders and caches made writable to it again, everything under them
    included: immutable and append-only flags cleared (a root side may set them on another
    side's folders; the base then could not write a library's copy or a compiled kernel
    there), folders ``rwx`` and files ``rw`` for their owner, owned by this user where it is
    root. Nothing is laid on anyone: the base's own code may make a file read-only.
    ``below`` False: each folder alone, not what is in it."""
    uid, gid = os.geteuid(), os.getegid()

    def fix(path: str, folder: bool) -> None:
        try:
            status = os.lstat(path)
        except OSError:
            return
        if not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
            return  # a link, or a node a root side made (opening a device can act): never opened
        _set_flags(path, 0)
        try:
            if uid == 0 and (status.st_uid, status.st_gid) != (uid, gid):
                os.chown(path, uid, gid)
            wanted = stat.S_IMODE(status.st_mode) | (0o700 if folder else 0o600)
            if wanted != stat.S_IMODE(status.st_mode):
                os.chmod(path, wanted)
        except OSError:
            pass

    for top in folders:
        fix(str(top), True)
        if not below:
            continue
        for path, is_folder in _below(str(top)):
            fix(path, is_folder)


def _below(top: str) -> Iterator[tuple[str, bool]]:
    """Every entry under ``top`` (and whether it is a folder), links not followed, without
    recursion: a side can leave a tree thousands of folders deep, which ``os.walk`` (recursive
    before Python 3.12) and ``shutil.rmtree`` raise RecursionError on. A folder that cannot be
    read (its path too long, say) is passed over."""
    pending = [top]
    while pending:
        here = pending.pop()
        try:
            with os.scandir(here) as entries:
                found = [(entry.path, entry.is_dir(follow_symlinks=False)) for entry in entries]
        except OSError:
            continue
        for path, is_folder in found:
            yield path, is_folder
            if is_folder:
                pending.append(path)


def remove(folder: Path) -> None:
    """``folder`` and everything in it removed, whatever a side did to keep it (see :func:`reclaim`)."""
    reclaim([folder])
    remove_tree(folder)


def blame(changes: Sequence[Change], root: str | None = None) -> str:
    """One line for the head that the changes are laid on."""
    named = "; ".join(change.describe(root) for change in changes[:3])
    more = f" and {len(changes) - 3} more" if len(changes) > 3 else ""
    after = ("the base was measured from them as they were" if all(change.restored for change in changes)
             else "what the base read is not its own")
    return f"the pull request's code changed the base's files: {named}{more}; a side never touches the base's files ({after})"
