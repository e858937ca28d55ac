"""Building a side's ``.cu`` without writing into the user's tree: a private staging folder per
side and kernel, every build of a suite begun at once in a pool of threads, a kernel's own
``build`` command in its own process group.

Never touching the user's tree
------------------------------
* A ``.cu`` solution is compiled with its library written to a private staging directory, next
  to a copy of the source (the worker loads ``<stem>.so`` beside the ``.cu`` it is given). The
  compiler still reads the original, so ``#include "..."`` resolves as in the tree.
* Workers write no bytecode of the user's code (``sys.dont_write_bytecode`` before the first
  case, :func:`kbench_ci.measure.child.serve`), so importing a user's ``kernel.py`` leaves no
  ``__pycache__`` beside it; torch's may go to the cache folder
  (:meth:`~kbench_ci.suite.settings.Execution.worker_environment`).
* A kernel's own ``build`` command runs in the suite's directory; what it writes besides ``{out}``
  is its own business.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

from kbench_ci.cuda import build as build_module
from kbench_ci.cuda.build import shared_library_path
from kbench_ci.errors import EnvironmentProblem, KbenchError
from kbench_ci.measure.impls import COMPILED_KINDS
from kbench_ci.procgroup import kill_process_group, kill_tracked, module_command, tracked, user_code_environment
from kbench_ci.results.outcome import BuildOutcome
from kbench_ci.suite.model import KernelSpec
from kbench_ci.suite.settings import SANDBOX_MODULE, parallel_builds
from kbench_ci.wire.protocol import SideSpec

#: seconds a kernel's own ``build`` command or nvcc may run
BUILD_TIMEOUT_S = 900.0

class SideBuildFailed(Exception):
    """Compiling one side's ``.cu`` failed. Not a KbenchError: it is a verdict, not an abort."""

    def __init__(self, message: str, *, command: str | None, compiler_output: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.command = command
        self.compiler_output = compiler_output


#: ``build_fn(kernel, kind, source, output, cwd) -> the command that ran``; raises
#: :class:`SideBuildFailed` when the build fails, a KbenchError when it cannot even start.
BuildFn = Callable[[KernelSpec, str, Path, Path, Path], str]


def default_build(kernel: KernelSpec, kind: str, source: Path, output: Path, cwd: Path) -> str:
    """The kernel's ``build`` command when the config gives one, else build.py's nvcc line."""
    return _build_side(kernel, kind, source, output, cwd, cache=None)[0]


def _build_side(
    kernel: KernelSpec, kind: str, source: Path, output: Path, cwd: Path, *, cache: build_module.BuildCache | None,
    gpu_index: int | None = None, sandbox: bool = False,
) -> tuple[str, bool]:
    """:func:`default_build` with the build cache: the command, and whether the library came
    from the cache. A kernel's own ``build`` command is never cached: it may read anything.
    ``sandbox``: that command is the pull request's (a compare's head under ``--isolation
    judge``): it runs in the side's sandbox, writing only its own tree and the library's folder."""
    custom = kernel.build_command(source, output)
    if custom is not None:
        code, text = _run_shell(custom, cwd=cwd, timeout_s=BUILD_TIMEOUT_S,
                                writable=(cwd, output.parent) if sandbox else None)
        if code != 0:
            raise SideBuildFailed(f"build command failed (exit {code})", command=custom, compiler_output=text)
        if not output.is_file():
            raise SideBuildFailed(
                "build command succeeded but wrote no library at {out}", command=custom, compiler_output=text
            )
        return custom, False
    plan = build_module.plan_build(source, cutlass=kind == "cutlass", output=output, gpu_index=gpu_index)
    command = build_module.format_command(plan)
    try:
        built = build_module.build(plan, use_cache=False, cache=cache, timeout_s=BUILD_TIMEOUT_S)
    except build_module.CompileError as exc:
        raise SideBuildFailed(exc.one_line(), command=command, compiler_output=exc.compiler_output) from None
    except KbenchError as exc:
        if isinstance(exc, EnvironmentProblem):
            raise
        raise SideBuildFailed(exc.one_line(), command=command, compiler_output=None) from None
    return command, built.cached


def _run_shell(command: str, *, cwd: Path, timeout_s: float, writable: Sequence[Path] | None = None) -> tuple[int, str]:
    """A user's build command in its own process group, so a timeout or Ctrl-C ends all of it,
    without the runner's step files and tokens (it is code from the repository under test).
    ``writable``: run it in the side's sandbox (:data:`SANDBOX_MODULE`), able to write only
    there; its temporary folder, home and tools' caches (ccache, Triton, torch extensions) are
    folders of its own inside the last of them, the library's."""
    environment = user_code_environment()
    argv: str | list[str] = command
    if writable is not None:
        own = Path(writable[-1]) / "build-home"
        for name, folder in (("TMPDIR", "tmp"), ("HOME", "home"), ("XDG_CACHE_HOME", "cache"), ("CCACHE_DIR", "ccache"),
                             ("TRITON_CACHE_DIR", "triton"), ("TORCH_EXTENSIONS_DIR", "torch_extensions")):
            (own / folder).mkdir(parents=True, exist_ok=True)
            environment[name] = str(own / folder)
        argv = module_command(sys.executable, SANDBOX_MODULE, *map(str, writable), "--", "/bin/sh", "-c", command)
    process = subprocess.Popen(
        argv, shell=writable is None, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True, env=environment,
    )
    try:
        with tracked(process):  # builds run in threads: Ctrl-C's clean-up kills it from there
            out, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process_group(process)
        return 124, f"build command timed out after {timeout_s:g} s"
    except BaseException:
        kill_process_group(process)
        raise
    return process.returncode, out.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class BuildRequest:
    """One kernel of one side to build: what :meth:`SideBuilder.start` takes."""

    kernel: KernelSpec
    label: str
    kind: str
    cwd: Path


class SideBuilder:
    """Turns a kernel of one side into the worker's :class:`SideSpec`, building ``.cu`` first.

    The library goes to ``staging/<side>/<kernel>/<stem>.so`` next to a copy of the source, so
    no tree (the user's, or a worktree) gets build products. Each kernel is built once per side,
    however many shapes it has. :meth:`start` begins every build of a suite at once, in a pool
    of threads (compilers are processes: the threads only wait), so later cases find theirs
    done; ``cache`` keeps libraries across runs (:class:`~kbench_ci.cuda.build.BuildCache`).

    A context manager: leaving it (Ctrl-C included) cancels builds not begun and kills the
    compilers still running.
    """

    def __init__(
        self, staging: Path, build_fn: BuildFn | None = None, *, cache: build_module.BuildCache | None = None,
        parallel: int | None = None, gpu_index: int | None = None, sandboxed: Collection[str] = (),
    ) -> None:
        """``sandboxed``: the sides whose own ``build`` commands are pull-request code (a
        compare's head under ``--isolation judge``), run in the side's sandbox."""
        self.staging = Path(staging)
        self.sandboxed = frozenset(sandboxed)
        #: the GPU the libraries will run on (``--gpu N``; with ``--gpus``, all are one model):
        #: nvcc targets its architecture
        self.gpu_index = gpu_index
        self.build_fn = build_fn
        self.cache = cache
        self._pool = ThreadPoolExecutor(max_workers=parallel or parallel_builds(), thread_name_prefix="kbench-build")
        self._lock = threading.Lock()
        self._futures: dict[tuple[str, str], Future[tuple[Path | None, BuildOutcome]]] = {}
        self._handed_out: set[tuple[str, str]] = set()

    def __enter__(self) -> SideBuilder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Cancel builds not begun, kill running compilers, and wait for the threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        if any(not future.done() for future in self._futures.values()):
            kill_tracked()
        self._pool.shutdown(wait=True)

    def start(self, requests: Sequence[BuildRequest]) -> None:
        """Begin building every compiled kernel of ``requests`` (the others need no build)."""
        for request in requests:
            if request.kind in COMPILED_KINDS:
                self._future(request)

    def side(
        self, kernel: KernelSpec, *, label: str, kind: str, cwd: Path
    ) -> tuple[SideSpec | None, BuildOutcome | None]:
        """The side's spec, and its build outcome for a compiled kernel (None otherwise); waits
        for the build when it is still running.

        A failed build gives ``(None, outcome)``.
        """
        solution: Path = kernel.solution
        outcome: BuildOutcome | None = None
        if kind in COMPILED_KINDS:
            key = (label, kernel.name)
            staged, outcome = self._future(BuildRequest(kernel, label, kind, cwd)).result()
            with self._lock:  # cases of several GPUs ask from their own threads
                if key in self._handed_out:
                    # Built once per side; later shapes reuse it and add no build time.
                    outcome = replace(outcome, duration_s=0.0)
                self._handed_out.add(key)
            if staged is None:
                return None, outcome
            solution = staged
        spec = SideSpec(
            label=label,
            solution=str(Path(solution).resolve()),
            ref=str(Path(kernel.ref).resolve()),
            implementation=kind,
            atol=kernel.atol,
            rtol=kernel.rtol,
            ptr_sizes=dict(kernel.ptr_sizes),
            ptr_size=kernel.ptr_size,
            bytes_expr=kernel.bytes_expr,
            flops_expr=kernel.flops_expr,
        )
        return spec, outcome

    def _future(self, request: BuildRequest) -> Future[tuple[Path | None, BuildOutcome]]:
        key = (request.label, request.kernel.name)
        with self._lock:
            if key not in self._futures:
                self._futures[key] = self._pool.submit(self._build, request)
            return self._futures[key]

    def _build(self, request: BuildRequest) -> tuple[Path | None, BuildOutcome]:
        kernel, label = request.kernel, request.label
        directory = self.staging / label / kernel.name
        directory.mkdir(parents=True, exist_ok=True)
        source = Path(kernel.solution)
        staged_source = directory / source.name
        output = shared_library_path(staged_source)
        started = time.perf_counter()
        try:
            shutil.copyfile(source, staged_source)
            if self.build_fn is not None:
                command, cached = self.build_fn(kernel, request.kind, source, output, request.cwd), False
            else:
                command, cached = _build_side(
                    kernel, request.kind, source, output, request.cwd, cache=self.cache, gpu_index=self.gpu_index,
                    sandbox=label in self.sandboxed,
                )
            return staged_source, BuildOutcome(
                label, kernel.name, True, time.perf_counter() - started, command, cached=cached,
            )
        except SideBuildFailed as exc:
            return None, BuildOutcome(
                label, kernel.name, False, time.perf_counter() - started, exc.command, exc.message, exc.compiler_output,
            )
        except OSError as exc:
            return None, BuildOutcome(
                label, kernel.name, False, time.perf_counter() - started, None, f"cannot read {source}: {exc.strerror or exc}",
            )

