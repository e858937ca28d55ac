"""Compile a CUDA C++ (or CUTLASS) solution ``kernel.cu`` into ``kernel.so`` beside it.

The gate compares sources, not binaries, so each side of a comparison builds its own ``.so``
from its own tree. Rebuilding is skipped only when a hash of everything that can change the
binary (the source, the local headers it includes, the exact command line) matches the hash
stored beside the ``.so`` by the last successful build.

Every compiler run goes through :func:`_run_compiler`, the one choke point for subprocesses
in this module.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kbench_ci.cuda import ptxas
from kbench_ci.cuda.driver import cuda_devices
from kbench_ci.errors import (
    BuildError,
    EnvironmentProblem,
    KbenchError,
    MissingExtraError,
    UserFileError,
)
from kbench_ci.procgroup import kill_process_group, tracked, user_code_environment

__all__ = [
    "BuildCache",
    "BuildPlan",
    "BuildResult",
    "CompileError",
    "build",
    "cache_key",
    "detect_arch",
    "find_cutlass_include",
    "find_nvcc",
    "format_command",
    "hash_path",
    "header_dependencies",
    "library_status",
    "needs_arch_specific",
    "plan_build",
    "shared_library_path",
]

#: bumped when the meaning of the stored hash changes, so old hash files never match
_HASH_VERSION = b"kbench-build-v1"

_BASE_FLAGS: tuple[str, ...] = (
    "-shared",
    "-std=c++17",
    "-O3",
    "-Xcompiler",
    "-fPIC",
    "-lineinfo",
    # ptxas's registers, spills, stack and shared memory per kernel (cuda/ptxas.py): the
    # report's "why it changed"
    "--resource-usage",
)
# CuTe's constexpr helpers are called from device code; NDEBUG drops CUTLASS's device asserts,
# which cost registers and time in a benchmark.
_CUTLASS_FLAGS: tuple[str, ...] = ("--expt-relaxed-constexpr", "-DNDEBUG")

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d{2,3})(a|f)?$")

# Tokens that only compile for an arch-specific target (sm_90a): Hopper's warpgroup MMA and
# register reallocation, and the CUTLASS / CuTe SM90 building blocks that emit them.
_ARCH_SPECIFIC_RE = re.compile(r"wgmma|setmaxnreg|KernelTmaWarpSpecialized|Sm90|SM90_")
_COMMENT_RE = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LOCAL_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)

#: where the CUDA toolkit installs nvcc by default, tried when PATH has none
_DEFAULT_NVCC = Path("/usr/local/cuda/bin/nvcc")

_NVCC_HINT = (
    "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads), "
    "put nvcc on PATH or point the NVCC environment variable at it"
)


class CompileError(BuildError):
    """nvcc ran and failed; ``compiler_output`` holds everything it printed."""

    def __init__(
        self, source: Path, returncode: int, compiler_output: str, command: Sequence[str]
    ) -> None:
        super().__init__(
            f"nvcc failed for {source.name} (exit {returncode})",
            hint=_first_error_line(compiler_output),
        )
        self.source = source
        self.returncode = returncode
        self.compiler_output = compiler_output
        self.command = tuple(command)


@dataclass(frozen=True, slots=True)
class BuildPlan:
    """What to compile and exactly how; ``arch`` is the real target (``sm_90a`` when upgraded)."""

    source: Path
    output: Path
    command: tuple[str, ...]
    arch: str
    cutlass_include: Path | None


@dataclass(frozen=True, slots=True)
class BuildResult:
    plan: BuildPlan
    cached: bool
    duration_s: float
    compiler_output: str


# --------------------------------------------------------------------------- arch


def detect_arch(gpu_index: int | None = None, *, arch_option: str | None = None) -> str:
    """The ``sm_XY`` of a GPU (default: the first this process sees), or of ``KBENCH_CUDA_ARCH``
    when set (CI without a GPU uses it). Asked of the driver, not torch: the parent builds
    while the worker imports torch. ``arch_option``: the command's own flag for the
    architecture (``build --arch``), which the hint names first."""
    override = os.environ.get("KBENCH_CUDA_ARCH", "").strip()
    if override:
        return _normalise_arch(override, origin="KBENCH_CUDA_ARCH")
    devices = cuda_devices()
    if not devices:
        raise EnvironmentProblem(
            "cannot pick a CUDA architecture: no CUDA GPU is visible",
            hint=(
                f"pass {arch_option} sm_90, the architecture the library will run on, or set KBENCH_CUDA_ARCH=sm_90"
                if arch_option is not None
                else "run on a GPU machine or set KBENCH_CUDA_ARCH (e.g. KBENCH_CUDA_ARCH=sm_90)"
            ),
        )
    index = 0 if gpu_index is None else gpu_index
    if not 0 <= index < len(devices):
        raise EnvironmentProblem(
            f"cannot pick a CUDA architecture: GPU {index} does not exist ({len(devices)} visible)",
            hint=f"use a GPU index 0..{len(devices) - 1}, or set KBENCH_CUDA_ARCH",
        )
    return devices[index].arch


def _normalise_arch(text: str, *, origin: str) -> str:
    match = _ARCH_RE.match(text.strip().lower())
    if match is None:
        raise EnvironmentProblem(
            f"{origin}={text!r} is not a CUDA architecture",
            hint="use the form sm_90 (or sm_90a for arch-specific features)",
        )
    number, suffix = match.groups()
    return f"sm_{number}{suffix or ''}"


def needs_arch_specific(source_text: str) -> bool:
    """True when the source uses features that exist only on an ``a`` target (e.g. ``sm_90a``).

    Comments are ignored so that a kernel which merely mentions wgmma is not forced onto a
    target that runs on one architecture only.
    """
    return _ARCH_SPECIFIC_RE.search(_COMMENT_RE.sub(" ", source_text)) is not None


def _arch_flags(arch: str, source_text: str) -> tuple[str, tuple[str, ...]]:
    """The effective target and its nvcc flags.

    An arch-specific target is spelled as ``-gencode=arch=compute_90a,code=sm_90a``: with nvcc
    13.0, ``-arch=sm_90a`` also runs a plain ``sm_90`` pass, which rejects wgmma.
    """
    number = arch.removeprefix("sm_").rstrip("af")
    specific = arch.endswith("a") or (
        int(number) >= 90 and not arch.endswith("f") and needs_arch_specific(source_text)
    )
    if specific:
        return f"sm_{number}a", (f"-gencode=arch=compute_{number}a,code=sm_{number}a",)
    return arch, (f"-arch={arch}",)


# --------------------------------------------------------------------------- tools


def find_nvcc() -> str:
    """``$NVCC``, else ``nvcc`` on PATH, else ``$CUDA_HOME/bin/nvcc``, else the default install."""
    explicit = os.environ.get("NVCC", "").strip()
    if explicit:
        resolved = shutil.which(explicit)
        if resolved is None:
            raise EnvironmentProblem(
                f"NVCC={explicit!r} does not name an executable", hint=_NVCC_HINT
            )
        return resolved
    on_path = shutil.which("nvcc")
    if on_path is not None:
        return on_path
    candidates = [_DEFAULT_NVCC]
    cuda_home = os.environ.get("CUDA_HOME", "").strip()
    if cuda_home:
        candidates.insert(0, Path(cuda_home) / "bin" / "nvcc")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise EnvironmentProblem("nvcc, the CUDA compiler, was not found", hint=_NVCC_HINT)


def _is_cutlass_include(path: Path) -> bool:
    return (path / "cutlass" / "cutlass.h").is_file() and (path / "cute" / "tensor.hpp").is_file()


def find_cutlass_include() -> Path:
    """The CUTLASS include directory (the one holding ``cutlass/`` and ``cute/``).

    ``CUTLASS_PATH`` wins and may name the repository root or its ``include/``; a set but wrong
    ``CUTLASS_PATH`` is an error rather than a silent fall-back, so a CI job never builds against
    headers it did not ask for. Otherwise the headers that the ``nvidia-cutlass`` wheel ships in
    ``cutlass_library/source/include`` are used.
    """
    explicit = os.environ.get("CUTLASS_PATH", "").strip()
    if explicit:
        root = Path(explicit).expanduser()
        for candidate in (root / "include", root):
            if _is_cutlass_include(candidate):
                return candidate.resolve()
        raise EnvironmentProblem(
            f"CUTLASS_PATH={explicit!r} holds neither include/cutlass/cutlass.h nor "
            "cutlass/cutlass.h with cute/tensor.hpp",
            hint="point CUTLASS_PATH at a CUTLASS checkout (or its include/ directory)",
        )
    # find_spec on a top-level name locates the package without running its __init__.
    spec = importlib.util.find_spec("cutlass_library")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "source" / "include"
            if _is_cutlass_include(candidate):
                return candidate.resolve()
    raise MissingExtraError("nvidia-cutlass", "cutlass", "CUTLASS kernels")


# --------------------------------------------------------------------------- plan


def shared_library_path(source: Path) -> Path:
    """Where a solution's ``.so`` lives: beside its ``.cu``, same stem (``bench`` loads it there)."""
    return source.with_suffix(".so")


def plan_build(
    source: Path,
    *,
    cutlass: bool = False,
    arch: str | None = None,
    output: Path | None = None,
    extra_flags: Sequence[str] = (),
    nvcc: str | None = None,
    gpu_index: int | None = None,
    arch_option: str | None = None,
) -> BuildPlan:
    """Decide the exact nvcc command for ``source``; runs nothing. Without ``arch``, for the
    architecture of GPU ``gpu_index`` (default: the first), the one the library will run on;
    ``arch_option`` names the command's flag that gives ``arch`` (see :func:`detect_arch`)."""
    source = Path(source).resolve()
    source_text = _read_source(source)
    target = _normalise_arch(arch, origin="arch") if arch else detect_arch(gpu_index, arch_option=arch_option)
    effective_arch, arch_flags = _arch_flags(target, source_text)
    output = Path(output).resolve() if output is not None else shared_library_path(source)

    cutlass_include, cutlass_flags = _cutlass_flags() if cutlass else (None, ())

    command = (
        nvcc or find_nvcc(),
        *_BASE_FLAGS,
        *arch_flags,
        *cutlass_flags,
        *extra_flags,
        "-o",
        str(output),
        str(source),
    )
    return BuildPlan(
        source=source,
        output=output,
        command=command,
        arch=effective_arch,
        cutlass_include=cutlass_include,
    )


def _cutlass_flags() -> tuple[Path, tuple[str, ...]]:
    """The CUTLASS include directory and every flag a CUTLASS build adds (also to a dependency scan,
    whose includes must resolve as the build's do)."""
    cutlass_include = find_cutlass_include()
    flags = [f"-I{cutlass_include}"]
    # The CUTLASS repo keeps its host utilities (packed_stride.hpp, ...) in tools/util/include;
    # the wheel mirrors that layout under source/.
    util_include = cutlass_include.parent / "tools" / "util" / "include"
    if util_include.is_dir():
        flags.append(f"-I{util_include}")
    flags.extend(_CUTLASS_FLAGS)
    return cutlass_include, tuple(flags)


def format_command(plan: BuildPlan) -> str:
    """The exact command line, quoted for a POSIX shell."""
    return shlex.join(plan.command)


def _read_source(source: Path) -> str:
    try:
        return source.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise UserFileError(f"CUDA source {source} does not exist") from None
    except OSError as exc:
        raise UserFileError(f"cannot read CUDA source {source}: {exc.strerror}") from None


# --------------------------------------------------------------------------- cache


def local_includes(source: Path) -> list[Path]:
    """Every ``#include "..."`` file reachable from ``source`` that resolves beside its includer.

    Quoted includes that resolve only through ``-I`` (e.g. ``"cutlass/gemm/..."``) are library
    headers: they are pinned by the command line (the include path), not hashed.
    """
    found: list[Path] = []
    seen = {source.resolve()}
    pending = [source.resolve()]
    while pending:
        current = pending.pop()
        try:
            text = current.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name in _LOCAL_INCLUDE_RE.findall(_COMMENT_RE.sub(" ", text)):
            candidate = (current.parent / name).resolve()
            if candidate in seen or not candidate.is_file():
                continue
            seen.add(candidate)
            found.append(candidate)
            pending.append(candidate)
    return sorted(found)


#: the make target nvcc names in the dependency file; fixed, so the file is easy to read back
_DEPS_TARGET = "kbench-deps"
#: one path of a make rule: escaped characters (``\\ `` for a space) or anything but blanks
_MAKE_WORD_RE = re.compile(r"(?:\\.|[^\s\\])+")


def header_dependencies(
    source: Path, *, cutlass: bool = False, nvcc: str | None = None, timeout_s: float = 120.0
) -> frozenset[Path]:
    """Every file the preprocessor reads for ``source`` (resolved paths; ``source`` itself left
    out), from nvcc's own dependency output (``-MM``), with the include directories and the
    defines the build uses.

    The compiler's answer, not a scan of ``#include`` lines: it follows ``-I`` directories,
    macros and ``#if`` the way the build does (:func:`local_includes` is the cache's cheaper
    approximation). Host-side preprocessing only: an include under ``#if __CUDA_ARCH__`` is
    not seen. Raises :class:`EnvironmentProblem` without nvcc (or CUTLASS, for ``cutlass``),
    :class:`UserFileError` for a missing source, :class:`CompileError` when nvcc fails.
    """
    source = Path(source).resolve()
    if not source.is_file():
        raise UserFileError(f"CUDA source {source} does not exist")
    flags = _cutlass_flags()[1] if cutlass else ()
    with tempfile.TemporaryDirectory(prefix="kbench-deps-") as folder:
        deps_file = Path(folder) / "deps.d"
        command = (
            nvcc or find_nvcc(), "-std=c++17", *flags,
            "-MM", "-MT", _DEPS_TARGET, "-MF", str(deps_file), str(source),
        )  # fmt: skip
        returncode, output = _run_compiler(command, timeout_s=timeout_s, source=source)
        if returncode != 0:
            raise CompileError(source, returncode, output, command)
        try:
            rule = deps_file.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            raise BuildError(f"nvcc -MM wrote no dependency file for {source.name}: {exc.strerror}") from None
    return _parse_make_rule(rule, cwd=source.parent) - {source}


def _parse_make_rule(rule: str, *, cwd: Path) -> frozenset[Path]:
    """The prerequisites of the first rule of a make dependency file; relative paths are relative
    to ``cwd``, where the compiler ran."""
    joined = rule.replace("\\\n", " ")
    # nvcc writes "target : a b", gcc "target: a b"
    found = re.search(rf"^{re.escape(_DEPS_TARGET)}[ \t]*:(.*)$", joined, re.MULTILINE)
    if found is None:
        # Never "no headers": a rule we cannot read must not make a kernel look unaffected.
        raise BuildError(f"nvcc's dependency output has no rule for {_DEPS_TARGET}: {rule[:200]!r}")
    prerequisites = found.group(1)
    paths = set()
    for word in _MAKE_WORD_RE.findall(prerequisites):
        name = re.sub(r"\\(.)", r"\1", word).replace("$$", "$")
        paths.add((cwd / name).resolve())
    return frozenset(paths)


def build_hash(plan: BuildPlan) -> str:
    """sha256 of the source, its local headers and the command line."""
    digest = hashlib.sha256(_HASH_VERSION)
    for part in plan.command:
        digest.update(b"\0arg\0" + part.encode())
    digest.update(b"\0compiler\0" + _compiler_identity(plan.command[0]).encode())
    digest.update(b"\0source\0" + plan.source.read_bytes())
    for header in local_includes(plan.source):
        # The header's place relative to the source matters as much as its bytes.
        relative = os.path.relpath(header, plan.source.parent)
        digest.update(b"\0header\0" + relative.encode() + b"\0" + header.read_bytes())
    return digest.hexdigest()


def _compiler_identity(nvcc: str) -> str:
    """Where nvcc really lives, its size and mtime: a toolkit upgraded in place (same path)
    must not reuse libraries built by the old one. Cheaper than running ``nvcc --version``."""
    located = shutil.which(nvcc)
    if located is None:
        return ""
    real = os.path.realpath(located)
    try:
        info = os.stat(real)
    except OSError:
        return real
    return f"{real}:{info.st_size}:{info.st_mtime_ns}"


def hash_path(output: Path) -> Path:
    """Where the build hash of ``output`` is stored: ``<stem>.so.kbench-hash`` beside it."""
    return output.with_name(output.name + ".kbench-hash")


def _cached(plan: BuildPlan, expected: str) -> bool:
    if not plan.output.is_file():
        return False
    try:
        return hash_path(plan.output).read_text(encoding="ascii").strip() == expected
    except OSError:
        return False


# --------------------------------------------------------------------------- cache across runs


@functools.lru_cache(maxsize=8)
def _tool_version(tool: str) -> str:
    """``TOOL --version``'s output (nvcc's names its release and build), once per process; empty
    when it cannot run (the build itself then says why)."""
    try:
        code, output = _run_compiler((tool, "--version"), timeout_s=60, source=Path(tool))
    except KbenchError:
        return ""
    return output if code == 0 else ""


def cache_key(plan: BuildPlan) -> str:
    """The key of ``plan``'s library in a :class:`BuildCache`: sha256 of the source, its local
    headers (bytes and place relative to the source), the flags, the nvcc and host compiler
    versions and the CUTLASS release.

    Unlike :func:`build_hash` it leaves out where the source and the library are: each run
    builds from a fresh worktree into a fresh staging folder, and the same kernel must hit.
    """
    digest = hashlib.sha256(_HASH_VERSION + b"-cache")
    for part in plan.command[1:]:
        if part in (str(plan.output), str(plan.source)):
            part = "<output>" if part == str(plan.output) else "<source>"
        digest.update(b"\0arg\0" + part.encode())
    digest.update(b"\0nvcc\0" + _tool_version(plan.command[0]).encode())
    host = shutil.which("g++") or shutil.which("c++")
    digest.update(b"\0host\0" + (_tool_version(host) if host else "").encode())
    if plan.cutlass_include is not None:
        version = plan.cutlass_include / "cutlass" / "version.h"
        digest.update(b"\0cutlass\0" + (version.read_bytes() if version.is_file() else b""))
    digest.update(b"\0name\0" + plan.source.name.encode())
    digest.update(b"\0source\0" + plan.source.read_bytes())
    for header in local_includes(plan.source):
        relative = os.path.relpath(header, plan.source.parent)
        digest.update(b"\0header\0" + relative.encode() + b"\0" + header.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class BuildCache:
    """Built libraries kept across runs in ``root/builds/<key[:2]>/<key>/``, by :func:`cache_key`.

    Entries are written whole or not at all (a copy, then a rename), so a run killed half way,
    or two runs sharing the folder, never leave a truncated library behind to be loaded.
    """

    root: Path

    def entry(self, key: str, name: str) -> Path:
        return self.root / "builds" / key[:2] / key / name

    def fetch(self, key: str, output: Path) -> bool:
        """Copy the cached library for ``key`` to ``output``; False when there is none."""
        entry = self.entry(key, output.name)
        if not entry.is_file():
            return False
        try:
            _copy_atomically(entry, output)
            sidecar = ptxas.resources_path(entry)
            if sidecar.is_file():
                _copy_atomically(sidecar, ptxas.resources_path(output))
        except OSError:
            return False
        return True

    def store(self, key: str, library: Path) -> None:
        """Keep ``library`` under ``key``. A cache that cannot be written costs a rebuild next
        time, never this build."""
        entry = self.entry(key, library.name)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            sidecar = ptxas.resources_path(library)
            if sidecar.is_file():  # before the library: an entry's library vouches for its sidecar
                _copy_atomically(sidecar, ptxas.resources_path(entry))
            _copy_atomically(library, entry)
        except OSError:
            pass


def _copy_atomically(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    try:
        shutil.copyfile(source, temporary)
        os.chmod(temporary, 0o755)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- build


def build(
    plan: BuildPlan, *, use_cache: bool = True, timeout_s: float = 900, cache: BuildCache | None = None
) -> BuildResult:
    """Run ``plan`` unless the ``.so`` beside it was built from the same inputs, or ``cache``
    holds a library built from them (then it is copied to the plan's output)."""
    _read_source(plan.source)  # a clear UserFileError if the source vanished since planning
    expected = build_hash(plan)
    if use_cache and _cached(plan, expected):
        return BuildResult(plan=plan, cached=True, duration_s=0.0, compiler_output="")
    if cache is None:
        return _compile(plan, expected, timeout_s=timeout_s)
    key = cache_key(plan)
    # One compile per key at a time: base and head of an unchanged kernel build the same library,
    # and the second waits for the first and takes it from the cache.
    with _key_lock(cache.root, key):
        started = time.perf_counter()
        plan.output.parent.mkdir(parents=True, exist_ok=True)
        if cache.fetch(key, plan.output):
            hash_path(plan.output).write_text(expected + "\n", encoding="ascii")
            return BuildResult(plan=plan, cached=True, duration_s=time.perf_counter() - started, compiler_output="")
        result = _compile(plan, expected, timeout_s=timeout_s)
        cache.store(key, plan.output)
        return result


_KEY_LOCKS: dict[tuple[Path, str], threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()


def _key_lock(root: Path, key: str) -> threading.Lock:
    with _KEY_LOCKS_GUARD:
        return _KEY_LOCKS.setdefault((root, key), threading.Lock())


def _compile(plan: BuildPlan, expected: str, *, timeout_s: float) -> BuildResult:
    """Run the plan's compiler and record the build hash beside the library."""
    marker = hash_path(plan.output)
    # Dropped before compiling: a build that fails or is killed half way must not leave a
    # .so that a stale-but-matching hash would vouch for.
    marker.unlink(missing_ok=True)
    plan.output.parent.mkdir(parents=True, exist_ok=True)

    started = time.perf_counter()
    returncode, compiler_output = _run_compiler(plan.command, timeout_s=timeout_s, source=plan.source)
    duration_s = time.perf_counter() - started
    if returncode != 0 or not plan.output.is_file():
        raise CompileError(plan.source, returncode, compiler_output, plan.command)
    ptxas.write_resources(plan.output, ptxas.parse_resource_usage(compiler_output))
    marker.write_text(expected + "\n", encoding="ascii")
    return BuildResult(
        plan=plan, cached=False, duration_s=duration_s, compiler_output=compiler_output
    )


def _run_compiler(command: Sequence[str], *, timeout_s: float, source: Path) -> tuple[int, str]:
    """The one place this module starts a process.

    nvcc runs cicc, ptxas and the host compiler as children; it gets its own process group so a
    timeout ends all of them, not only nvcc.
    """
    try:
        process = subprocess.Popen(
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=source.parent,
            start_new_session=True,
            env=user_code_environment(),  # compiles code under test: no runner secrets
        )
    except FileNotFoundError:
        raise EnvironmentProblem(f"cannot run {command[0]!r}: not found", hint=_NVCC_HINT) from None
    except PermissionError:
        raise EnvironmentProblem(
            f"cannot run {command[0]!r}: not executable", hint=_NVCC_HINT
        ) from None
    try:
        with tracked(process):  # builds run in threads: Ctrl-C's clean-up kills it from there
            stdout, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_process_group(process)
        raise BuildError(
            f"nvcc timed out after {timeout_s:g} s for {source.name}",
            hint="raise the build timeout or simplify the kernel's templates",
        ) from None
    except BaseException:
        # KeyboardInterrupt and friends: never leave a compiler running behind us.
        kill_process_group(process)
        raise
    return process.returncode, stdout.decode("utf-8", errors="replace")




def _first_error_line(compiler_output: str) -> str | None:
    for line in compiler_output.splitlines():
        if "error" in line.lower():
            text = line.strip()
            return text if len(text) <= 200 else text[:197] + "..."
    return None


# --------------------------------------------------------------------------- status


def library_status(source: Path) -> Literal["ok", "missing", "stale"]:
    """Whether ``<stem>.so`` beside ``source`` exists and is newer than it and its local headers."""
    source = Path(source)
    try:
        newest_input = source.stat().st_mtime
    except FileNotFoundError:
        raise UserFileError(f"CUDA source {source} does not exist") from None
    library = shared_library_path(source)
    try:
        built = library.stat().st_mtime
    except FileNotFoundError:
        return "missing"
    for header in local_includes(source):
        newest_input = max(newest_input, header.stat().st_mtime)
    return "stale" if built < newest_input else "ok"
