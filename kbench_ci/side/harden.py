"""The sandbox a side's worker puts itself in before it loads pull-request code.

Layers, each applied where Linux offers it and reported by name (the judge puts them in the
report):

- ``not-dumpable`` (``PR_SET_DUMPABLE`` 0): another process of the same user can neither
  ``ptrace`` this one nor read its ``/proc/PID/mem`` or ``fd/`` without ``CAP_SYS_PTRACE``.
- ``no-ptrace-capability``: ``CAP_SYS_PTRACE`` dropped from every capability set, so a worker
  run as root cannot ``ptrace`` the judge or the other side either (both are not dumpable).
- ``no-new-privs``: nothing it executes gains privileges (and Landlock needs it).
- ``landlock-write`` (Landlock ABI >= 1): it may write only under the folders it is given (its
  scratch folder, its own caches, the shared-memory folder) and open the GPU's device files and
  the harmless ones (``/dev/null`` ...: :data:`DEVICE_PATTERNS`) for writing; every other
  path is read-only to it: the runner's step files, the action's venv, the other side's caches.
- ``landlock-signal`` (ABI >= 6): it cannot signal a process outside its own sandbox (the
  judge, the parent, the other side's worker), nor reach their abstract unix sockets.
- ``seccomp`` (libseccomp, through ``pyseccomp``): system calls that no benchmark needs and a
  head could turn on another process or file fail with ``EPERM`` (:func:`seccomp_rules`):
  changing a file's mode, owner, times, extended attributes or inode flags (Landlock does not
  govern them, and seccomp cannot read a path, so anywhere); the scheduling of any process but
  its own (another's nice, CPUs, policy, I/O priority, limits); another process's memory
  (``process_vm_readv``/``writev``, ``ptrace``, ``process_madvise``, ``pidfd_getfd``); a new
  user namespace; and what only root could do with the kernel (``kexec``, ``bpf``,
  ``perf_event_open``).

Landlock restricts the calling thread and what it starts afterwards, so :func:`harden` must run
before any other thread exists (before torch is imported). It is a defence in depth beside the
judge's design, not the design: the judge never trusts what a side says.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from kbench_ci.procgroup import LANDLOCK_SYSCALLS as _SYS_LANDLOCK
from kbench_ci.procgroup import landlock_abi, make_non_dumpable
from kbench_ci.procgroup import libc as _libc

__all__ = ["harden", "landlock_abi", "seccomp_available"]

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAP_SYS_PTRACE = 19

_LANDLOCK_RULE_PATH_BENEATH = 1

# filesystem rights (uapi/linux/landlock.h)
_WRITE_FILE = 1 << 1
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6

#: folders where every side may write files that exist, and make none: shared memory (torch's
#: IPC reference counts, made by the judge) and its own threads' entries (the CUDA driver names
#: its threads there: without it cudaGetDeviceCount fails with error 304, seen on the H200).
#: A file a side made in /dev/shm would stay after the run (256 MiB of it), so a side makes its
#: files in a /dev/shm folder of its own (kbench_ci.judge.sides),
#: among its writable folders, which the judge removes with its worker.
SHARED_WRITABLE = ("/dev/shm", "/proc/self/task")

#: device files a side may open for writing: the GPU's (opened read-write by the driver) and
#: the harmless ones. Not the whole of /dev: a worker run as root could write a loop device,
#: /dev/kmsg or, where the kernel lets it, a raw disk
DEVICE_PATTERNS = ("nvidia*", "nvidia-caps", "dri", "kfd", "null", "zero", "full", "random", "urandom", "tty", "ptmx",
                   "pts")


def writable_devices(dev: Path = Path("/dev")) -> list[str]:
    """The device files (and folders of them) of :data:`DEVICE_PATTERNS` present under ``dev``;
    the whole of ``dev`` where the GPU driver is there but its unified-memory device is not yet
    (on bare metal the driver makes ``nvidia-uvm`` at the first CUDA start, which may come after
    this side hardened: a rule binds only files that exist when it is made)."""
    if (dev / "nvidiactl").exists() and not (dev / "nvidia-uvm").exists():
        return [str(dev)]
    found: list[str] = []
    for pattern in DEVICE_PATTERNS:
        found.extend(sorted(str(path) for path in dev.glob(pattern)))
    return list(dict.fromkeys(found))  # nvidia-caps matches two patterns


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def harden(writable: Sequence[Path], *, pretend_file_metadata: bool = False) -> tuple[str, ...]:
    """Apply every layer this machine offers; the names of those in force. Never raises: a layer
    that cannot be had is left out of the answer, and the report says which were in force.
    ``pretend_file_metadata``: a file's mode, owner and times are left as they are while the
    calls that change them succeed (a build's sandbox: :func:`_seccomp`)."""
    if platform.system() != "Linux":
        return ()
    libc = _libc()
    layers: list[str] = []
    if make_non_dumpable():
        layers.append("not-dumpable")
    if _drop_ptrace_capability(libc):
        layers.append("no-ptrace-capability")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        layers.append("no-new-privs")
        layers.extend(_landlock(libc, writable))
        if _seccomp(pretend_file_metadata=pretend_file_metadata):
            layers.append("seccomp")
    return tuple(layers)


#: a file's metadata: Landlock governs none of these, so a side could chmod, chown or mark
#: immutable the base's files (its ref.py, its cache) as the runner's user
FILE_METADATA_CALLS = ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
                       "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
                       "removexattr", "lremovexattr", "fremovexattr", "removexattrat")
#: other processes' memory, or the kernel's (as root). Not the module calls: on bare metal a
#: worker's first CUDA start may have nvidia-modprobe load the driver's unified-memory module
DENIED_CALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kexec_load",
                "kexec_file_load", "bpf", "perf_event_open")
#: calls whose first argument names the process they act on: allowed on 0 (the calling thread,
#: or process), refused on any other id: another side's worker, the judge, the parent, and this
#: process's own id and its other threads' too (libseccomp compares an argument once a rule, with
#: a constant: "not 0 and not mine" is two comparisons of one argument, which it refuses)
OWN_PID_CALLS = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "prlimit64",
                 "migrate_pages", "move_pages")
#: numbers libseccomp 2.5 does not know yet (the same on x86_64 and aarch64, as every call
#: added since 5.1)
_NEW_CALLS = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}
_FS_IOC_SETFLAGS = 0x40086602
_FS_IOC32_SETFLAGS = 0x40046602
_FS_IOC_FSSETXATTR = 0x401C5820
_CLONE_NEWUSER = 0x10000000
_PRIO_PROCESS = 0
_IOPRIO_WHO_PROCESS = 1


def seccomp_available() -> bool:
    """Whether this machine has libseccomp (the ``seccomp`` layer's condition)."""
    try:
        import pyseccomp  # noqa: F401, PLC0415  (raises RuntimeError where libseccomp.so is absent)
    except (ImportError, RuntimeError, OSError):
        return False
    return True


def _seccomp(*, pretend_file_metadata: bool = False) -> bool:
    """Load the filter (:data:`FILE_METADATA_CALLS` ... ``EPERM``; every other call allowed).
    ``pretend_file_metadata``: those calls succeed without doing anything instead (a build's
    tools chmod and touch what they make: setuptools' copy of an extension, ``touch`` of a
    stamp; a mode or a time they could not set fails no honest build). False where libseccomp
    is absent or refuses: the layer is then not in force, and not reported."""
    try:
        import pyseccomp as seccomp  # noqa: PLC0415  (raises RuntimeError where libseccomp.so is absent)
    except (ImportError, RuntimeError, OSError):
        return False
    eperm = seccomp.ERRNO(errno.EPERM)
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        # Every call the side makes passes the filter, the handoff's reads and writes too: a
        # binary tree of the call numbers (libseccomp >= 2.5), not a chain; and no speculative
        # store bypass mitigation for it (kernels before 5.16 turn it on for every seccomp'd
        # process unless told, slowing the side's own code, which the base's timing would not
        # share with an unfiltered run)
        for attribute in (seccomp.Attr.CTL_OPTIMIZE, seccomp.Attr.CTL_SSB):
            with suppress(OSError):  # an older libseccomp: the filter works all the same
                rules.set_attr(attribute, 2 if attribute == seccomp.Attr.CTL_OPTIMIZE else 1)
        metadata = seccomp.ERRNO(0) if pretend_file_metadata else eperm

        def deny(action: int, name: str, *args: object) -> None:
            number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
            if number == -1:  # unknown to this libseccomp
                number = _NEW_CALLS.get(name, -1)
            if number != -1:
                rules.add_rule(action, number, *args)

        for name in FILE_METADATA_CALLS:
            deny(metadata, name)
        for request in (_FS_IOC_SETFLAGS, _FS_IOC32_SETFLAGS, _FS_IOC_FSSETXATTR):
            deny(eperm, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
        for name in DENIED_CALLS:
            deny(eperm, name)
        for name in OWN_PID_CALLS:
            deny(eperm, name, seccomp.Arg(0, seccomp.NE, 0))
        # setpriority(which, who): a process group (the judge's: workers run in it) or a user
        # is never its own alone
        deny(eperm, "setpriority", seccomp.Arg(0, seccomp.NE, _PRIO_PROCESS))
        deny(eperm, "setpriority", seccomp.Arg(1, seccomp.NE, 0))
        deny(eperm, "ioprio_set", seccomp.Arg(0, seccomp.NE, _IOPRIO_WHO_PROCESS))
        deny(eperm, "ioprio_set", seccomp.Arg(1, seccomp.NE, 0))
        # a user namespace, which any user may make, is one where it is root again, with
        # capabilities of its own
        for name in ("unshare", "clone"):
            deny(eperm, name, seccomp.Arg(0, seccomp.MASKED_EQ, _CLONE_NEWUSER, _CLONE_NEWUSER))
        # clone3 passes its flags in memory, which seccomp cannot read: "not implemented" makes
        # the C library fall back to clone, whose flags it can
        deny(seccomp.ERRNO(errno.ENOSYS), "clone3")
        rules.load()
    except OSError:
        return False
    return True
def _shared_folders(root: str = SHARED_WRITABLE[0]) -> list[str]:
    """The folders that exist in shared memory as the side starts (another program's, a test's
    marks): writable as before, with what is made in them theirs to remove. What the side makes
    anywhere else in /dev/shm goes in its own folder (one of ``writable``)."""
    try:
        with os.scandir(root) as entries:
            return [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _drop_ptrace_capability(libc: ctypes.CDLL) -> bool:
    """CAP_SYS_PTRACE out of the bounding set and out of the effective, permitted and inheritable
    sets (a no-op for a process that never had it, which then needs nothing dropped)."""
    libc.prctl(_PR_CAPBSET_DROP, _CAP_SYS_PTRACE, 0, 0, 0)  # fails without CAP_SETPCAP: then it is not ours to have
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        return False
    mask = ~(1 << _CAP_SYS_PTRACE) & 0xFFFFFFFF
    data[0].effective &= mask
    data[0].permitted &= mask
    data[0].inheritable &= mask
    if libc.capset(ctypes.byref(header), data) != 0:
        return False
    check = (_CapData * 2)()
    libc.capget(ctypes.byref(header), check)
    return not (check[0].effective | check[0].permitted) & (1 << _CAP_SYS_PTRACE)


def _landlock(libc: ctypes.CDLL, writable: Sequence[Path]) -> list[str]:
    abi = landlock_abi()
    if abi < 1:
        return []
    create, add_rule, restrict_self = _SYS_LANDLOCK[platform.machine()]
    handled = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO
               | _MAKE_BLOCK | _MAKE_SYM)
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, 0, scoped)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return []
    try:
        devices = writable_devices()
        for folder in [*devices, *SHARED_WRITABLE, *_shared_folders(), *map(str, writable)]:
            # a device (or a folder of them), or a shared folder, is written, never made or removed in
            rights = (_WRITE_FILE | _TRUNCATE) & handled if folder in devices or folder in SHARED_WRITABLE else handled
            try:
                fd = os.open(folder, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneathAttr(rights, fd)
                libc.syscall(add_rule, ruleset, _LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        if libc.syscall(restrict_self, ruleset, ctypes.c_uint32(0)) != 0:
            return []
    finally:
        os.close(ruleset)
    return ["landlock-write", "landlock-signal"] if scoped else ["landlock-write"]
