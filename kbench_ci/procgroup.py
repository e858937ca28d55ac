"""What every child process that runs user code shares: killing its process group, and the
environment it is started with."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass

__all__ = [
    "EXIT_WITH_PARENT_ENV", "RUNNER_SECRETS", "kill_process_group", "kill_tracked", "make_non_dumpable", "on_parent_death", "tracked",
    "user_code_environment", "become_subreaper", "children_of", "descendants", "end_strays", "end_strays_seen",
    "parents", "state", "LANDLOCK_SYSCALLS", "landlock_abi", "libc", "Scheduling", "scheduling_of", "restore_scheduling"]

#: Variables a GitHub Actions step holds that code from a pull request must not get: the files
#: through which a step sets the *next* steps' environment, PATH, outputs and summary (a kernel
#: that appends ``PYTHONPATH=...`` to ``$GITHUB_ENV`` would run its own Python in the later
#: comment step, which holds a write token), and the job's tokens.
RUNNER_SECRETS = frozenset({
    "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
    "GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN", "INPUT_GITHUB-TOKEN",
})
#: every ``ACTIONS_*`` variable: the runtime, cache, results and OIDC token endpoints and tokens
_RUNNER_PREFIXES = ("ACTIONS_",)


def user_code_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default :data:`os.environ`) without the runner's secrets and step files.

    For every process that runs code from the repository under test: benchmark workers and a
    kernel's own ``build`` command.
    """
    source = os.environ if environ is None else environ
    return {
        name: value for name, value in source.items()
        if name.upper() not in RUNNER_SECRETS and not name.upper().startswith(_RUNNER_PREFIXES)
    }


#: prctl(2) option: whether this process may be dumped or traced, and its /proc entries read,
#: by other processes of the same user
_PR_SET_DUMPABLE = 4


#: ``python -c`` of this, then the module and its arguments: runs the module as ``-m`` would,
#: but with the working folder taken off ``sys.path`` before anything is imported. ``-m`` puts
#: the working folder first, and ours is the pull request's (its checkout, a side's folder): a
#: ``kbench_ci/`` it committed there would have run as the judge, or as a side before its
#: sandbox. ``-P`` does this from Python 3.11; this works from 3.10.
_RUN_MODULE = (
    "import sys, runpy; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def module_command(python: str, module: str, *args: str, user_code: bool = False) -> list[str]:
    """The command that runs ``module`` of kbench-ci (``python -m module args``) in a fresh
    interpreter whose ``sys.path`` does not hold the folder it starts in. ``user_code``: a
    process that runs the user's code in itself anyway (the in-process worker, ncu's profile
    call) keeps ``python -m``'s path, working folder first, where a solution's own packages
    (``from kernels.helpers import ...``) are found: whatever that folder holds could run
    there as the solution does. (Put last instead, it still shadows an editable install.)
    Every hash-based .pyc is checked against its source (an "unchecked" one beside a kernel's
    helper would run code no reviewer reads in the diff)."""
    if user_code:
        return [python, "--check-hash-based-pycs", "always", "-m", module, *args]
    return [python, "--check-hash-based-pycs", "always", "-c", _RUN_MODULE, module, *args]


def make_non_dumpable() -> bool:
    """Make this process non-dumpable (Linux): from now on a process of the same user that is
    not root can read neither its ``/proc/PID/environ`` nor its memory. For the action's steps,
    whose environment holds the runner's step files and tokens while the pull request's kernels
    run beside them. False where it could not be done (not Linux, no libc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


#: seconds :func:`kill_process_group` waits for a killed group's leader to be reaped
REAP_TIMEOUT_S = 5.0


def kill_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole group (nvcc's cicc/ptxas, a worker's kernel) and reap it.

    Children are started with ``start_new_session=True`` so that a timeout can take down
    everything they spawned; the same isolation means no terminal signal reaches them, so every
    exit path of the parent must call this. What left the group (a ``setsid`` daemon) is ended
    too, looked up before the group goes: it would otherwise be re-parented to this process and
    live until the command ends (a side's daemon beside the next judge, a head build's beside
    the base's turns).
    """
    under = descendants(process.pid) if process.poll() is None else []
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in under:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    # Bounded: a process killed while it waits in the kernel (a page fault on a loaded machine)
    # dies only when that wait ends, and a pipe a process outside the group still holds never
    # reads EOF; a parent stopping on Ctrl-C or SIGTERM must not wait for either without end.
    # Killed is killed; Popen reaps it later.
    with suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=REAP_TIMEOUT_S)


#: processes started by threads other than the main one (parallel builds), for :func:`kill_tracked`
_TRACKED: set[subprocess.Popen[bytes]] = set()
_TRACKED_LOCK = threading.Lock()


@contextmanager
def tracked(process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """Within the block, ``process`` is among those :func:`kill_tracked` ends.

    Ctrl-C reaches the main thread only: a compiler started by a build thread would run on (for
    up to the build timeout) while the interpreter waits for that thread at exit. The main
    thread's clean-up kills every tracked group instead, and the build threads return at once.
    """
    with _TRACKED_LOCK:
        _TRACKED.add(process)
    try:
        yield process
    finally:
        with _TRACKED_LOCK:
            _TRACKED.discard(process)


def kill_tracked() -> int:
    """SIGKILL the process group of every :func:`tracked` process; how many there were. Reaping
    is left to the thread that started each one (it is waiting on it)."""
    with _TRACKED_LOCK:
        running = list(_TRACKED)
    for process in running:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(running)


#: "1" makes a command stop (as on SIGTERM) when its parent process dies; "0" never. Unset: on in
#: a GitHub Actions step (``GITHUB_ACTIONS=true``), off elsewhere (``nohup kbench-ci ... &`` then
#: closing the shell must not stop it). The action's compare step sets it for the command it runs.
EXIT_WITH_PARENT_ENV = "KBENCH_CI_EXIT_WITH_PARENT"
#: how often :func:`on_parent_death` looks at the parent (s)
PARENT_POLL_S = 0.2


@contextmanager
def on_parent_death(action: Callable[[], None], *, poll_s: float = PARENT_POLL_S) -> Iterator[None]:
    """Within the block, call ``action`` once (from a daemon thread) when this process's parent
    dies, that is when this process is re-parented and ``os.getppid()`` changes.

    A process killed with SIGKILL runs no clean-up, and its children run on: the GitHub runner's
    worker SIGKILLs a cancelled job's step. ``PR_SET_PDEATHSIG`` cannot stand in for this: it
    fires when the *thread* that spawned the process ends (the runner is a .NET process with
    thread pools), and it is Linux-only. Nothing is watched when the parent is already init
    (pid 1: there is no parent to outlive).
    """
    parent = os.getppid()
    if parent <= 1:
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(poll_s):
            if os.getppid() != parent:
                action()
                return

    thread = threading.Thread(target=watch, name="kbench-ci-parent-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()


#: prctl(2) option: orphaned descendants are re-parented to this process, not to init
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux): a process that a
    kernel double-forks and ``setsid``\\ s away from its worker becomes this process's child,
    where :func:`end_strays` finds it. False where Linux offers no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    return bool(libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The first fields of /proc/PID/stat after the command name (state, parent, ...), None
    where the process is gone. The name (field 2) may hold spaces and parentheses: the fields
    are those after the last ")". Read with os.open/os.read: a third less time than open() (the
    judge reads /proc at every turn)."""
    try:
        handle = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            stat = os.read(handle, 4096)
        finally:
            os.close(handle)
    except OSError:
        return None
    end = stat.rfind(b")")
    return stat[end + 2 : end + 64].split(None, 2)


def state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``T`` ...), None where it is gone."""
    fields = _stat_fields(pid)
    return fields[0].decode() if fields else None


def parents() -> dict[int, int]:
    """Every process's parent, by process id, from one read of /proc (empty where there is none)."""
    found: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit():
            fields = _stat_fields(entry)
            if fields is not None and len(fields) > 1:
                found[int(entry)] = int(fields[1])
    return found


def children_of(pid: int, tree: Mapping[int, int] | None = None) -> list[int]:
    """Process ids whose parent is ``pid`` (in ``tree``, else read from /proc now)."""
    tree = parents() if tree is None else tree
    return [child for child, parent in tree.items() if parent == pid]


def end_strays(keep: Collection[int] = ()) -> list[int]:
    """SIGKILL every child of this process not in ``keep``, and each one's own descendants,
    then reap them: the processes user code left behind (with :func:`become_subreaper`, the
    daemons it double-forked too). The ids it ended."""
    return end_strays_seen(keep)[0]


def end_strays_seen(keep: Collection[int] = ()) -> tuple[list[int], dict[int, int]]:
    """:func:`end_strays`, and the last read of /proc it made (:func:`parents`' form), in which
    no stray was left."""
    ended: list[int] = []
    tree: dict[int, int] = {}
    _UNREAPABLE.difference_update([pid for pid in _UNREAPABLE if state(pid) is None])  # reaped or gone since
    for _ in range(8):  # a stray may fork while it is being ended: look again a few times
        tree = parents()
        strays = [pid for pid in children_of(os.getpid(), tree) if pid not in keep and pid not in _UNREAPABLE]
        if not strays:
            break
        for pid in strays:
            for victim in [*descendants(pid, tree), pid]:
                try:
                    os.kill(victim, signal.SIGKILL)
                except OSError:
                    pass
            ended.append(pid)
        for pid in strays:
            if not _reap(pid):
                _UNREAPABLE.add(pid)
    return ended, tree


#: killed children that could not be reaped (a zombie another process traces): not waited for
#: again while they last (a zombie keeps its process id, so no new process takes it meanwhile)
_UNREAPABLE: set[int] = set()


#: seconds :func:`_reap` waits for a killed child before it ends the child's tracer
_REAP_WAIT_S = 1.0


def _reap(pid: int) -> bool:
    """Wait for a child that was sent SIGKILL, never for ever. A child that another process
    ptraces stays a zombie only its tracer can release: a head's worker that traced its own
    double-forked daemon, stopped by the judge, hung the judge's blocking wait here for the
    whole case. So: wait a while, then kill the tracer where it is a
    process under this one (a side's: that side fails) and wait a while more; a child still
    there is left (a zombie costs nothing; the next look skips what it cannot reap)."""
    for attempt in range(2):
        deadline = time.monotonic() + _REAP_WAIT_S
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except OSError:
                return True  # not our child any more, or already reaped
            if done:
                return True
            time.sleep(0.002)
        tracer = tracer_of(pid)
        # Only a tracer of this process's own tree (a side's process): never a debugger or a
        # tracer wrapped around the whole run, nor this process or one above it.
        if attempt == 0 and tracer and tracer in descendants(os.getpid()):
            with suppress(OSError):
                os.kill(tracer, signal.SIGKILL)
    return False


def tracer_of(pid: int) -> int:
    """The process that ptraces ``pid`` (0: none, or ``pid`` is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def descendants(pid: int, tree: Mapping[int, int] | None = None) -> list[int]:
    """Every process under ``pid`` by the parent links (``tree``, else one read of /proc now),
    children first."""
    tree = parents() if tree is None else tree
    by_parent: dict[int, list[int]] = {}
    for child, parent in tree.items():
        by_parent.setdefault(parent, []).append(child)
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in by_parent.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


#: Landlock's system calls (create_ruleset, add_rule, restrict_self) by machine
LANDLOCK_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_LANDLOCK_CREATE_RULESET_VERSION = 1


def landlock_abi() -> int:
    """The Landlock ABI this kernel offers (0: none, or not Linux). Here, not only in the side's
    sandbox (kbench_ci.side.harden): the judge decides by it which folders a side may write."""
    numbers = LANDLOCK_SYSCALLS.get(platform.machine())
    if numbers is None or os.name != "posix" or platform.system() != "Linux":
        return 0
    version = libc().syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(version), 0)


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library, with ``errno`` kept for the calls that set it. Found once: find_library
    runs ``ldconfig -p``, ~10 ms, and the judge reads each worker's I/O priority at every turn."""
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


#: ioprio_set, ioprio_get by machine (no Python API reads a thread's I/O priority)
_IOPRIO_SYSCALLS = {"x86_64": (251, 252), "aarch64": (30, 31)}
_IOPRIO_WHO_PROCESS = 1


@dataclass(frozen=True, slots=True)
class Scheduling:
    """A thread's scheduling attributes: what another process of the same user can change to
    slow it (``renice``, ``taskset``, ``chrt``, ``ionice``), each as the kernel reports it."""

    nice: int
    affinity: frozenset[int]
    policy: int
    priority: int
    #: the raw ioprio value (class << 13 | level); -1 where this machine's call is unknown
    ioprio: int


def _ioprio(tid: int) -> int:
    numbers = _IOPRIO_SYSCALLS.get(platform.machine())
    if numbers is None:
        return -1
    value = int(libc().syscall(numbers[1], _IOPRIO_WHO_PROCESS, tid))
    if value < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return value


def scheduling_of(tid: int) -> Scheduling:
    """The scheduling attributes of thread ``tid`` (a process id is its main thread's). Raises
    OSError where it is gone."""
    return Scheduling(
        nice=os.getpriority(os.PRIO_PROCESS, tid), affinity=frozenset(os.sched_getaffinity(tid)),
        policy=os.sched_getscheduler(tid), priority=os.sched_getparam(tid).sched_priority, ioprio=_ioprio(tid),
    )


def _threads(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task") if tid.isdigit()]
    except OSError:
        return []


def restore_scheduling(pids: Collection[int], wanted: Scheduling) -> list[str]:
    """Every thread of every process of ``pids`` set back to ``wanted`` where it differs (one
    read of each attribute a thread, a write only where another process changed it: a head
    that reniced or pinned the base's worker, or one of its threads, found through /proc). What
    could not be set back, as words (a user that is not root may not lower a nice value it
    did not raise); a thread gone meanwhile is not among them."""
    refused: list[str] = []
    ioprio_set = _IOPRIO_SYSCALLS.get(platform.machine(), (0, 0))[0]
    for pid in pids:
        for tid in _threads(pid):
            try:
                now = scheduling_of(tid)
            except OSError:
                continue  # gone
            if now.nice != wanted.nice:
                _set(refused, f"thread {tid}'s nice {now.nice}", os.setpriority, os.PRIO_PROCESS, tid, wanted.nice)
            if now.affinity != wanted.affinity:
                _set(refused, f"thread {tid}'s CPUs", os.sched_setaffinity, tid, wanted.affinity)
            if (now.policy, now.priority) != (wanted.policy, wanted.priority):
                _set(refused, f"thread {tid}'s scheduler policy {now.policy}", os.sched_setscheduler, tid, wanted.policy,
                     os.sched_param(wanted.priority))
            if wanted.ioprio >= 0 and now.ioprio != wanted.ioprio:
                _set(refused, f"thread {tid}'s I/O priority {now.ioprio}", _set_ioprio, ioprio_set, tid, wanted.ioprio)
    return refused


def _set(refused: list[str], what: str, call: Callable[..., object], *args: object) -> None:
    try:
        call(*args)
    except OSError as exc:
        if exc.errno != errno.ESRCH:  # gone meanwhile
            refused.append(f"{what} ({exc.strerror})")


def _set_ioprio(number: int, tid: int, value: int) -> None:
    if libc().syscall(number, _IOPRIO_WHO_PROCESS, tid, value) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
