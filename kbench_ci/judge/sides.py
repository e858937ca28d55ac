"""The judge's side workers: one process per side (base, head, each baseline), each over a
socket pair, each with caches of its own.

A side that dies, hangs past its deadline, or answers with anything but a well-formed reply
fails, and only that side: :class:`SideFailed` carries the message. Workers run in the judge's
process group (a timeout of the case ends them with the judge) and are started with the
environment the judge got minus nothing it needs: the runner's secrets were taken out by the
parent already. Each side gets its own Triton, TorchInductor and bytecode folders below the
ones the parent gave, so a head cannot leave compiled code for the base to load.
"""

from __future__ import annotations

import itertools
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kbench_ci.basefiles import remove
from kbench_ci.measure.deadlines import WORKER_START_TIMEOUT_S
from kbench_ci.procgroup import (
    Scheduling,
    descendants,
    end_strays,
    end_strays_seen,
    module_command,
    parents,
    restore_scheduling,
    scheduling_of,
    state,
)
from kbench_ci.scratch import SHARED_MEMORY, create_new, make_scratch, remove_tree
from kbench_ci.wire.sideproto import (
    SIDE_DEVICE_ENV,
    SIDE_PRELOAD_ENV,
    WAKE,
    BadReply,
    Called,
    Loaded,
    Ready,
    Reply,
    Request,
    decode_reply,
    encode_request,
)

#: the bytecode folder's variable (Python's)
BYTECODE_ENV = "PYTHONPYCACHEPREFIX"
#: caches the parent sets for workers; each side gets a sub-folder of its own of each
_PER_SIDE_CACHES = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", BYTECODE_ENV)


#: the judge's own scheduling attributes, read as it starts its first worker (before any side's
#: code has run): every worker is set back to them before each of its turns
_JUDGE_SCHEDULING: Scheduling | None = None


def judge_scheduling() -> Scheduling:
    """The judge's scheduling attributes as they were before any side's code ran."""
    global _JUDGE_SCHEDULING  # noqa: PLW0603  (read once, before the first worker exists)
    if _JUDGE_SCHEDULING is None:
        _JUDGE_SCHEDULING = scheduling_of(os.getpid())
    return _JUDGE_SCHEDULING


#: this judge's side workers, by process id: every other child of the judge is a stray
#: (:func:`end_side_strays`)
_WORKERS: dict[int, SideWorker] = {}


def end_side_strays() -> list[int]:
    """End every child of the judge that is not a side's worker, with what runs under it: a
    process a side double-forked away (the judge is a child subreaper, so its orphans come here)
    would otherwise run on while that side's worker is paused, in the other side's turn. The
    judge starts no other process of its own that outlives a call (kbench_ci.judge.main keeps
    TorchInductor's compile pool out of it). The ids it ended."""
    return end_strays(keep=frozenset(_WORKERS))


def hold_all_but(current: SideWorker | None) -> None:
    """Every worker of this judge but ``current`` stopped with everything under it (a worker
    whose load failed and a worker kept warm for other cases alike), every stray ended, and then
    the stop done again: a stray may have continued a stopped worker (``SIGCONT``, from inside
    that side's sandbox) before it was ended."""
    for pid in [pid for pid, worker in _WORKERS.items() if not worker.alive()]:
        del _WORKERS[pid]
    # A spare (nothing claimed it yet) has run no side's code, and once started it runs nothing
    # (the judge waits for its start before any side is timed): it is left be through every turn
    others = [worker for worker in _WORKERS.values() if worker is not current and not worker.spare]
    ran = [worker for worker in others if not worker.paused]
    _stop(others)
    # A worker that ran until now and filled a disk is stopped here, before the next turn, whose
    # writes (the judge's own) would fail on it.
    for worker in ran:
        worker.check_disk()
    _, tree = end_strays_seen(keep=frozenset(_WORKERS))
    _stop(others, again=True, tree=tree)


def _stop(workers: Sequence[SideWorker], *, again: bool = False, tree: Mapping[int, int] | None = None) -> None:
    """SIGSTOP each of ``workers`` and every process under it, and wait until they have stopped.
    A process forked while the others were being stopped escaped the look that found them:
    look again (one read of /proc a look; ``tree``, a read just made, serves as the first) until
    a look finds nothing new, or found only processes stopped already (they fork nothing).
    ``again``: stop even what each worker holds stopped already, and wait for it."""
    for worker in workers:
        if again:
            worker._paused = []
    for _ in range(STOP_LOOKS):
        tree = parents() if tree is None else tree
        found: list[int] = []
        for worker in workers:
            held = set(worker._paused)
            mine = [pid for pid in (worker.process.pid, *descendants(worker.process.pid, tree)) if pid not in held]
            worker._paused += mine
            found += mine
        tree = None
        if not found:
            return
        # Read before the signal: a process not stopped then may fork before the signal lands.
        running = [pid for pid in found if not _stopped(pid)]
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        # A signal is delivered, not obeyed, when kill() returns: the turn passes only once they
        # have stopped (a process still running its last instructions is not paused yet).
        deadline = time.monotonic() + STOP_TIMEOUT_S
        waiting = found
        while waiting and time.monotonic() < deadline:
            waiting = [pid for pid in waiting if not _stopped(pid)]
            if waiting:
                time.sleep(50e-6)
        if not running:
            return


#: free space under which a file system is short (a base's failure beside it is not taken as its
#: own; a side that brought it there in its turn fails): this many bytes and this share of the
#: file system both (Docker's /dev/shm is 64 MiB in all)
_LOW_SPACE_BYTES = 64 << 20
_LOW_SPACE_SHARE = 0.05


def short_of_space(folders: Sequence[Path]) -> str | None:
    """Words naming the first of ``folders`` whose file system is nearly full (under 64 MiB and
    under 5% of it free), or None."""
    for folder in folders:
        try:
            stats = os.statvfs(folder)
        except OSError:
            continue
        free = stats.f_bavail * stats.f_frsize
        if free < min(_LOW_SPACE_BYTES, _LOW_SPACE_SHARE * stats.f_blocks * stats.f_frsize):
            return f"{folder} had {free / 2**20:.0f} MiB free"
    return None


def _free_bytes(folders: Sequence[Path]) -> int | None:
    """The least free space of the file systems ``folders`` are on; None where none can be read."""
    free = []
    for folder in folders:
        try:
            stats = os.statvfs(folder)
        except OSError:
            continue
        free.append(stats.f_bavail * stats.f_frsize)
    return min(free) if free else None


class SideFailed(Exception):
    """The side's worker died, hung or sent what is not a reply: the side fails with this."""


def side_folder_name(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label)


class SideWorker:
    """One side's worker process and the judge's end of its socket."""

    def __init__(
        self, label: str, device: str, scratch: Path, environment: Mapping[str, str], preload: Sequence[str] = (),
        *, spare: bool = False,
    ) -> None:
        """``spare``: started ahead of need, for a re-measurement's new processes: it starts as
        any worker does (torch, ``preload``, its CUDA context, :class:`Ready`) and then waits,
        running nothing, until claimed (:meth:`claim`). Until then it is no side's worker: the
        judge's holds leave it be."""
        self.label = label
        self.device = device
        #: each worker of a label has folders of its own: a spare starts beside the worker it
        #: will replace, whose folders go with it (:meth:`remove_files`)
        self.folder = _own_folder(scratch, f"side-{side_folder_name(label)}")
        own_name = self.folder.name
        env = dict(environment)
        #: where in shared memory it may make files (Landlock lets it write only existing files
        #: elsewhere in /dev/shm): removed with the worker (:meth:`stop`), so nothing it made
        #: there outlives it; None where the machine has no /dev/shm
        self.shared_memory = make_scratch(f"kbench-{own_name}-", SHARED_MEMORY) if SHARED_MEMORY.is_dir() else None
        writable = [self.folder, *([self.shared_memory] if self.shared_memory is not None else [])]
        for name in _PER_SIDE_CACHES:
            if env.get(name):
                own = Path(env[name]) / own_name
                own.mkdir(parents=True, exist_ok=True)
                env[name] = str(own)
                writable.append(own)
        self.writable = tuple(writable)
        env["TMPDIR"] = str(self.folder)
        env[SIDE_DEVICE_ENV] = device
        env[SIDE_PRELOAD_ENV] = ",".join(preload)
        env["HOME"] = str(self.folder)
        # No TorchInductor compile pool: its processes share work through POSIX semaphores, which
        # a side cannot make (they live in /dev/shm, where Landlock lets it make files only in
        # its own folder: kbench_ci.side.harden).
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        wanted = judge_scheduling()  # before this worker exists: no side's code has run yet
        mine, theirs = socket.socketpair()
        self.stderr_path = _new_log(scratch, label)
        try:
            with open(create_new(self.stderr_path.parent, self.stderr_path.name, flags=os.O_WRONLY | os.O_APPEND),
                      "ab") as stderr:
                self.process = subprocess.Popen(
                    module_command(sys.executable, "kbench_ci.side.main", str(theirs.fileno()), *map(str, writable)),
                    stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=env, cwd=self.folder,
                    pass_fds=(theirs.fileno(),),
                )
        finally:
            theirs.close()
        self.channel = mine
        #: unclaimed: started ahead of need and not woken (:meth:`claim`)
        self.spare = spare
        if not spare:
            self._wake()
        self._buffer = b""
        self._paused: list[int] = []
        self._scheduling = wanted
        #: what of its scheduling could not be set back at its last resume (another process
        #: raised its nice value, and this user may not lower it): its times are not its own
        self.scheduling_refused: tuple[str, ...] = ()
        #: whether it was ever asked to load anything: until then no side's code has run in it
        self.loaded_once = False
        #: whether its Ready has been read; why it failed to start, where it did
        self._started = False
        self._start_failure: str | None = None
        #: free space on its folders' file systems as its last request went out; why it was
        #: stopped for filling one, where it was (every later request fails with it)
        self._free_before: int | None = None
        self._filled: str | None = None
        _WORKERS[self.process.pid] = self

    def alive(self) -> bool:
        return self.process.poll() is None

    def claim(self) -> None:
        """A spare made this label's worker: woken, it goes on to serve. Continued first: it
        runs no side's code, so nothing of the judge's stopped it, but another process of this
        user may have."""
        if not self.spare:
            return
        self.spare = False
        _signal(self.process.pid, signal.SIGCONT)
        self._wake()

    def _wake(self) -> None:
        try:
            self.channel.sendall(WAKE)
        except OSError:
            pass  # it died as it started: its first request says so (wait_started)

    def remove_files(self) -> None:
        """What this (stopped) worker wrote: its folder and its caches. A head that filled the
        disk there would otherwise make the base fail again when measured without it, and read
        `fixed`. Removed whatever a side did to keep them (a root side's
        ``chattr +i``: :func:`kbench_ci.basefiles.remove`)."""
        for folder in self.writable:
            remove(folder)

    def pause(self) -> None:
        """SIGSTOP the worker and every process under it while another side has the turn: a
        thread still launching, or a child process of its own, must not reach the other side's
        calls. (A process it double-forked away is re-parented to the judge, a child subreaper,
        which ends it at the change of turn: :func:`end_side_strays`.)"""
        _stop([self], again=True)

    @property
    def paused(self) -> bool:
        return bool(self._paused)

    def resume(self) -> None:
        """Continue what :meth:`pause` stopped, each thread of it with the judge's scheduling
        attributes first: a head reniced or pinned the base's worker (found through /proc, a
        sibling of its own worker) while the base was stopped, and a real +35% regression read
        +14.7% with another job on the runner. The side's own seccomp filter
        refuses such calls where libseccomp is present; this holds where it is not."""
        self.scheduling_refused = tuple(restore_scheduling(self._paused, self._scheduling))
        # Only those it stopped: a stopped process forks nothing, so nothing new is stopped.
        for pid in self._paused:
            _signal(pid, signal.SIGCONT)
        self._paused = []

    @property
    def start_failure(self) -> str | None:
        """Why it failed to start (read by :meth:`wait_started`), or None."""
        return self._start_failure

    def wait_started(self, timeout_s: float) -> None:
        """Until the worker has started (its :class:`Ready`), read before its first request: a
        worker is paused only once started, so new workers import torch and make their CUDA
        contexts at the same time (a fresh pair took ~7 s on an H100 host when the first load
        paused the other worker's start; one start alone was not timed). A worker that dies or hangs as it
        starts is failed by its first request, with this message. Runs no side's code: nothing
        is loaded in a worker before it has started."""
        if self._started or self._start_failure is not None:
            return
        if self.channel.fileno() < 0:  # stopped by the judge before it was ever asked anything
            self._start_failure = "it was stopped before it had started"
            return
        # A hold of every worker (the judge's own calibration between cases) may have stopped
        # it mid-start; nothing of a side's has run in it yet, so it may go on. A spare is held
        # by nothing of the judge's, but another process of this user may have stopped it.
        self.resume()
        if self.spare:
            _signal(self.process.pid, signal.SIGCONT)
        try:
            self.receive(Ready, timeout_s=timeout_s)
            self._started = True
        except SideFailed as exc:
            self._start_failure = f"it did not start: {exc}"

    def send(self, request: Request, *, fds: Sequence[int] = ()) -> None:
        """``fds``: descriptors handed over with the request's line (``SCM_RIGHTS``): a CPU
        arena's memfd, which only this side's worker then holds (of the sides)."""
        self.wait_started(STARTUP_TIMEOUT_S)
        if self._start_failure is not None:
            raise SideFailed(self._start_failure)
        self.claim()  # a spare asked anything is a side's worker
        if self._filled is not None:
            raise SideFailed(self._filled)
        self._free_before = _free_bytes(self.writable)
        line = encode_request(request)
        try:
            if fds:
                sent = socket.send_fds(self.channel, [line], list(fds))
                line = line[sent:]
            self.channel.sendall(line)
        except OSError as exc:
            raise SideFailed(self._death(f"its worker stopped taking requests ({exc.strerror})")) from None

    def ask(self, request: Request, expected: type[Reply], *, timeout_s: float) -> Reply:
        self.send(request)
        return self.receive(expected, timeout_s=timeout_s)

    def receive(self, expected: type[Reply], *, timeout_s: float) -> Reply:
        """The reply to a request already sent."""
        line = self._read_line(timeout_s)
        if self.check_disk():
            assert self._filled is not None
            raise SideFailed(self._filled)
        try:
            return decode_reply(line, expected)
        except BadReply as exc:
            self.stop()
            raise SideFailed(f"its worker sent what is not a reply: {exc}") from None

    def _read_line(self, timeout_s: float) -> bytes:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise SideFailed(f"its worker did not answer within {timeout_s:.0f} s (hung)")
            ready, _, _ = select.select([self.channel], [], [], min(left, 1.0))
            if not ready:
                if not self.alive():
                    raise SideFailed(self._death("its worker died"))
                continue
            try:
                chunk = self.channel.recv(1 << 16)
            except ConnectionResetError:  # it died with the judge's WAKE unread
                chunk = b""
            if not chunk:
                raise SideFailed(self._death("its worker died"))
            self._buffer += chunk
            if len(self._buffer) > (1 << 21):
                self.stop()
                raise SideFailed("its worker sent a reply of more than 2 MiB")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    @property
    def filled(self) -> str | None:
        """Why it was stopped for filling a disk in its turn (:meth:`check_disk`), or None."""
        return self._filled

    def check_disk(self) -> bool:
        """Whether it filled a disk it writes to since its last request went out (a file system
        of its folders short of space now, with less free than then): it is then stopped and
        its files removed at once, in its own turn, and every later request fails with why. The
        judge's next write of its own (its events file, on the same disk) otherwise failed in
        the next side's turn: a head that filled the disk at its first call had the judge fail
        in the base's reference check, which blamed the base's ref.py."""
        if self._filled is not None:
            return True
        if self._free_before is None:
            return False  # never asked anything: none of a side's code has had a turn in it
        short = short_of_space(self.writable)
        if short is None:
            return False
        now = _free_bytes(self.writable)
        if now is None or now >= self._free_before:
            return False  # short already before it ran: not its doing
        self._filled = (f"it filled the disk in its own turn ({short} after it ran, from "
                        f"{self._free_before / 2**20:.0f} MiB before); its files were removed")
        self.stop()
        self.remove_files()
        return True

    def _death(self, what: str) -> str:
        _WORKERS.pop(self.process.pid, None)
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.stop()
            code = None
        tail = _last_line(self.stderr_path)
        how = f" (exit {code})" if code is not None and code >= 0 else (f" (signal {-code})" if code is not None else "")
        return f"{what}{how}" + (f": {tail}" if tail else "")

    def stop(self) -> None:
        _WORKERS.pop(self.process.pid, None)
        self.resume()
        try:
            self.channel.close()
        except OSError:
            pass
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        # What it made in shared memory: it is gone, and its strays end with the case.
        if self.shared_memory is not None:
            remove_tree(self.shared_memory)


#: how long a new worker may take to start (torch, its CUDA context, triton) on a busy machine (the
#: parent gives the judge this much of its own time in a case beside the case's timeout)
STARTUP_TIMEOUT_S = WORKER_START_TIMEOUT_S
#: seconds the judge waits for a paused side's processes to be stopped
STOP_TIMEOUT_S = 0.5
#: reads of /proc a pause may take to find every process under a worker
STOP_LOOKS = 4


def _stopped(pid: int) -> bool:
    """Stopped (or traced, or gone): it runs nothing, and forks nothing, until continued."""
    return state(pid) in ("T", "t", "Z", "X", None)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:  # gone already
        pass


_LOG_SERIAL = itertools.count(1)


def _own_folder(scratch: Path, name: str) -> Path:
    """A new folder ``name`` in ``scratch``, or ``name.1``, ``name.2`` ... where a worker of the
    same label still has one (the name also names its caches' and shared memory's folders)."""
    scratch.mkdir(parents=True, exist_ok=True)
    for serial in itertools.count():
        folder = scratch / (f"{name}.{serial}" if serial else name)
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise AssertionError("unreachable")


def _new_log(scratch: Path, label: str) -> Path:
    """The name of a new file (made by scratch.create_new) for one worker's stdout and stderr,
    in a folder of the judge's that no side can write to (Landlock lets a side write only its own folder). In the side's own folder,
    a head replaced it with a link to the parent's next events file, which the judge then
    opened for the next head worker it started: that worker wrote whole cases into the
    results."""
    logs = scratch / "worker-logs"
    logs.mkdir(mode=0o700, exist_ok=True)
    return logs / f"{side_folder_name(label)}-{next(_LOG_SERIAL)}.log"


def _last_line(path: Path) -> str:
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as file:
            file.seek(max(0, os.fstat(file.fileno()).st_size - 4000))
            lines = [line.strip() for line in file.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


__all__ = ["Called", "Loaded", "SideFailed", "SideWorker", "end_side_strays", "hold_all_but", "side_folder_name"]
