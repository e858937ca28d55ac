"""Which kernels a change can affect, for ``compare --changed-only``.

A kernel depends on:

* its kbench.toml entry as loaded (``[defaults]`` merged in, paths relative to the suite root),
  so that editing another kernel's entry does not mark this one;
* its solution file and its ref.py;
* for a CUDA source, the files the compiler reads for it (``nvcc -MM``, run in each side's tree:
  a header may be added, moved or dropped between them);
* for a Python solution and ref.py, the repository's modules they import, transitively.

A kernel is affected when its entry differs between the sides, or a file it depends on at the
base *or* at the head is among the changed paths. Taking both sides' dependencies is what makes a
dependency that disappeared count (a deleted or renamed header is a dependency of the base, and
git lists it as changed), and one that appeared (a new module that now shadows an old one).
Everything is measured when something every kernel depends on differs: the suite's settings,
where the suite file sits, the toolchain, kbench-ci's version, or a side without a suite.

This module runs neither git nor the compiler: both live beside ``suite`` in the layers, not
below it. The caller passes the changed paths (:meth:`kbench_ci.git.GitRepo.changed_paths`) and
a header scanner (:func:`kbench_ci.cuda.build.header_dependencies`).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from typing import Protocol

from kbench_ci.errors import KbenchError
from kbench_ci.suite.closed_python import OpenReach
from kbench_ci.suite.model import KernelSpec, Suite
from kbench_ci.suite.settings import SuiteSettings

__all__ = ["AffectedPlan", "HeaderScanner", "KernelChange", "Side", "affected_kernels"]

#: what a header, or a C/C++/CUDA source compiled with one, may be named: when the compiler could
#: not say which headers a CUDA kernel reads, a change to any such file counts for it
_C_FAMILY_SUFFIXES = frozenset(
    {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc", ".ipp", ".tcc", ".tpp", ".cu", ".c", ".cc", ".cpp", ".cxx"}
)


class HeaderScanner(Protocol):
    """Every file the compiler reads for ``source`` (absolute paths), as
    :func:`kbench_ci.cuda.build.header_dependencies` answers. Raises a :class:`KbenchError` when it
    cannot tell (no nvcc, a preprocess that fails): the kernel then counts every header."""

    def __call__(self, source: Path, *, cutlass: bool) -> Collection[Path]: ...


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison, as the plan reads it.

    ``tree`` is the root of that side's checkout: the repository's top level, to which the
    changed paths are relative. ``suite`` is None where that side has no suite that loads
    (everything is measured then). ``toolchain`` is whatever the caller says builds and runs the
    kernels there (nvcc's, torch's and triton's versions, say), compared as text;
    ``tool_version`` is kbench-ci's version there.
    """

    tree: Path
    suite: Suite | None
    toolchain: str
    tool_version: str


@dataclass(frozen=True, slots=True)
class KernelChange:
    """A kernel that must be measured, and why.

    ``reasons`` are sentences for a report, each naming a changed file and what it is to the
    kernel, or the entry's keys that differ; ``changed_files`` are those files, relative to the
    repository root.
    """

    name: str
    reasons: tuple[str, ...]
    changed_files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AffectedPlan:
    """What ``compare --changed-only`` measures.

    ``affected`` lists every kernel to measure (the head's in file order, then those only the
    base has); ``not_affected`` the head's kernels that no change reaches. When
    ``everything_reason`` is set, a change reaches every kernel: each is in ``affected`` with
    that reason. ``notes`` say where the plan had to guess wide (no header scan for a kernel).
    """

    affected: tuple[KernelChange, ...]
    not_affected: tuple[str, ...]
    everything_reason: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return self.everything_reason is not None

    @property
    def affected_names(self) -> frozenset[str]:
        return frozenset(change.name for change in self.affected)

    def change_of(self, name: str) -> KernelChange | None:
        """Why ``name`` is measured; None where it is not affected."""
        return next((change for change in self.affected if change.name == name), None)


@dataclass(frozen=True, slots=True)
class _Dependencies:
    """What one kernel depends on at one side."""

    #: path relative to the repository root -> what it is to the kernel ("ref.py", ...)
    files: Mapping[str, str]
    #: set where the compiler could not say which headers the kernel reads: why. Every changed
    #: C/C++/CUDA file then counts.
    every_header_because: str | None = None
    #: a kernel built by its own command: every changed file under this folder counts (the
    #: command may compile or read any of them)
    folder: str | None = None
    #: a Python solution: every changed file that is not Python under this folder counts (a
    #: .cu it compiles with torch.utils.cpp_extension, a table it reads)
    python_folder: str | None = None
    #: the suite's kernel files (solutions and references): each is its own kernel's, not a file
    #: a Python solution beside it reads
    kernel_files: frozenset[str] = frozenset()
    #: set where the kernel's Python uses a name not known to be safe, one that may load code
    #: or read files by a name no import states (``pickle.loads``, ``exec``, ``__file__`` ...):
    #: where, and every changed file then counts
    any_file_because: str | None = None


def affected_kernels(
    base: Side,
    head: Side,
    changed_paths: Collection[str],
    *,
    scan_headers: HeaderScanner | None,
) -> AffectedPlan:
    """The kernels that ``changed_paths`` (relative to the repository root, ``/``-separated: as
    :meth:`~kbench_ci.git.GitRepo.changed_paths` gives them) can affect, each with its reasons.

    ``scan_headers`` is :func:`kbench_ci.cuda.build.header_dependencies` in real use; with None,
    every changed C/C++/CUDA file counts for every CUDA kernel (and the notes say so).
    """
    base_suite, head_suite = base.suite, head.suite
    head_kernels = head_suite.kernels if head_suite is not None else ()
    base_kernels = base_suite.kernels if base_suite is not None else ()
    head_names = {kernel.name for kernel in head_kernels}
    only_in_base = tuple(kernel for kernel in base_kernels if kernel.name not in head_names)
    everything_reason = _global_change(base, head)
    if everything_reason is not None or base_suite is None or head_suite is None:
        why = everything_reason or "a side has no suite"  # _global_change names a missing suite first
        every = tuple(KernelChange(kernel.name, (why,)) for kernel in (*head_kernels, *only_in_base))
        return AffectedPlan(affected=every, not_affected=(), everything_reason=why)

    changed = frozenset(changed_paths)
    base_by_name = {kernel.name: kernel for kernel in base_kernels}
    base_deps = _DependencyFinder(base_suite, base.tree, scan_headers, "base")
    head_deps = _DependencyFinder(head_suite, head.tree, scan_headers, "head")
    affected: list[KernelChange] = []
    not_affected: list[str] = []
    for kernel in head_kernels:
        before = base_by_name.get(kernel.name)
        if before is None:
            affected.append(KernelChange(kernel.name, ("added in the head",)))
            continue
        reasons: list[str] = []
        entry_keys = _entry_differences(before, base_suite, kernel, head_suite)
        if entry_keys:
            reasons.append(f"its kbench.toml entry changed ({', '.join(entry_keys)})")
        hits = _hits(base_deps.of(before), changed) | _hits(head_deps.of(kernel), changed)
        reasons.extend(f"{path} changed ({role})" for path, role in sorted(hits.items()))
        if reasons:
            affected.append(KernelChange(kernel.name, tuple(reasons), tuple(sorted(hits))))
        else:
            not_affected.append(kernel.name)
    affected.extend(KernelChange(kernel.name, ("removed in the head",)) for kernel in only_in_base)
    return AffectedPlan(
        affected=tuple(affected), not_affected=tuple(not_affected), notes=(*base_deps.notes, *head_deps.notes)
    )


# -- changes every kernel depends on ----------------------------------------------------------


def _global_change(base: Side, head: Side) -> str | None:
    """Why every kernel must be measured; None when nothing global differs."""
    if base.suite is None:
        return "the base has no suite that loads"
    if head.suite is None:
        return "the head has no suite that loads"
    if base.tool_version != head.tool_version:
        return f"kbench-ci's version changed ({base.tool_version} -> {head.tool_version})"
    if base.toolchain != head.toolchain:
        return f"the toolchain changed ({base.toolchain} -> {head.toolchain})"
    base_file, head_file = _relative(base.suite.source, base.tree), _relative(head.suite.source, head.tree)
    base_root, head_root = _relative(base.suite.root, base.tree), _relative(head.suite.root, head.tree)
    if (base_file, base_root) != (head_file, head_root):
        # Kernel paths are relative to the suite root: when it moves, every path means another file.
        return f"the suite file moved ({base_file} -> {head_file})"
    keys = _settings_differences(base.suite, head.suite)
    if keys:
        return f"the suite's settings in [defaults] changed ({', '.join(keys)})"
    return None


def _settings_differences(base: Suite, head: Suite) -> tuple[str, ...]:
    def comparable(suite: Suite, name: str) -> object:
        value = getattr(suite.settings, name)
        # The loader makes cache_dir absolute, inside each side's own checkout.
        return _relative(value, suite.root) if isinstance(value, Path) else value

    return tuple(f.name for f in fields(SuiteSettings) if comparable(base, f.name) != comparable(head, f.name))


def _entry_differences(base_kernel: KernelSpec, base_suite: Suite, head_kernel: KernelSpec, head_suite: Suite) -> tuple[str, ...]:
    """The fields of a kernel's loaded entry that differ, its paths taken relative to each side's
    suite root (the two sides are two checkouts: their absolute paths always differ)."""

    def comparable(kernel: KernelSpec, suite: Suite, name: str) -> object:
        value = getattr(kernel, name)
        return _relative(value, suite.root) if isinstance(value, Path) else value

    return tuple(
        f.name
        for f in fields(KernelSpec)
        if comparable(base_kernel, base_suite, f.name) != comparable(head_kernel, head_suite, f.name)
    )


def _relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` (``..`` spelled out where it is outside), ``/``-separated."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix()


# -- what one kernel depends on ----------------------------------------------------------------


def _hits(deps: _Dependencies, changed: frozenset[str]) -> dict[str, str]:
    """The changed paths among ``deps``: path -> what it is to the kernel."""
    found: dict[str, str] = {}
    for path in changed:
        if path in deps.files:
            found[path] = deps.files[path]
        elif deps.any_file_because is not None:
            found[path] = f"every changed file counts: {deps.any_file_because}"
        elif deps.folder is not None and path.startswith(f"{deps.folder}/"):
            found[path] = "in the folder of a kernel built by its own command"
        elif (deps.python_folder is not None and path.startswith(f"{deps.python_folder}/") and not path.endswith(".py")
              and path not in deps.kernel_files):
            found[path] = "a file beside the Python solution (one it may compile or read)"
        elif deps.every_header_because is not None and PurePosixPath(path).suffix.lower() in _C_FAMILY_SUFFIXES:
            found[path] = f"every C/C++/CUDA file counts: {deps.every_header_because}"
    return found


class _DependencyFinder:
    """The dependencies of one side's kernels, each compiler run and parse done once per file."""

    __slots__ = ("suite", "tree", "real_tree", "scan_headers", "label", "notes", "_headers", "_imports", "_reach")

    def __init__(self, suite: Suite, tree: Path, scan_headers: HeaderScanner | None, label: str) -> None:
        self.suite = suite
        self.tree = Path(os.path.abspath(tree))
        self.real_tree = self.tree.resolve()
        self.scan_headers = scan_headers
        self.label = label
        self.notes: list[str] = []
        self._headers: dict[tuple[Path, bool], frozenset[Path] | str] = {}
        self._imports: dict[tuple[Path, tuple[Path, ...]], dict[Path, Path]] = {}
        self._reach: dict[tuple[Path, ...], OpenReach] = {}

    def of(self, kernel: KernelSpec) -> _Dependencies:
        files: dict[str, str] = {}
        self._add(files, kernel.solution, "the solution")
        self._add(files, kernel.ref, "ref.py")
        every_header_because = folder = python_folder = None
        if kernel.solution.suffix == ".py":
            self._add_imports(files, kernel.solution, "the solution")
            python_folder = self._inside(kernel.solution.parent)
        elif kernel.build is not None:
            folder = self._inside(kernel.solution.parent)
            every_header_because = "the kernel is built by its own command, whose include flags kbench-ci cannot see"
        else:
            scanned = self._scan(kernel.solution, cutlass=kernel.implementation == "cutlass")
            if isinstance(scanned, str):
                every_header_because = scanned
            else:
                for header in sorted(scanned):
                    self._add(files, header, f"a header {kernel.solution.name} includes", keep=True)
        self._add_imports(files, kernel.ref, "ref.py")
        any_file_because = self._dynamic_reach(kernel)
        if any_file_because is not None:
            self.notes.append(f"{kernel.name} ({self.label}): {any_file_because}; every changed file counts for it")
        if every_header_because is not None:
            self.notes.append(f"{kernel.name} ({self.label}): {every_header_because}; every changed C/C++/CUDA file counts for it")
        kernel_files = frozenset(
            inside for k in self.suite.kernels for inside in (self._inside(k.solution), self._inside(k.ref)) if inside
        )
        return _Dependencies(files=files, every_header_because=every_header_because, folder=folder,
                             python_folder=python_folder, kernel_files=kernel_files, any_file_because=any_file_because)

    def _dynamic_reach(self, kernel: KernelSpec) -> str | None:
        """Where the kernel's own Python (its solution, its ref.py and the repository modules
        they import) uses a name not known to be safe, one that may load code or read a file
        by a name no import states (kbench_ci/suite/closed_python.py): the first such place,
        or None. A pull request could otherwise put its change in a file loaded so, and the
        plan would call the kernel "not affected" and measure nothing."""
        for start in dict.fromkeys(path for path in (kernel.solution, kernel.ref) if path.suffix == ".py"):
            roots = self._roots(start)
            if roots not in self._reach:
                self._reach[roots] = OpenReach(roots, self.real_tree)
            imported = self._imports.get((start, roots), {})
            for source in (start.resolve(), *sorted(imported)):
                found = self._reach[roots].first(source)
                if found is not None:
                    return f"{self._inside(source) or source.name}:{found}"
        return None

    def _scan(self, source: Path, *, cutlass: bool) -> frozenset[Path] | str:
        """The files the compiler reads for ``source``, or why there is no answer."""
        key = (source, cutlass)
        if key not in self._headers:
            if self.scan_headers is None:
                self._headers[key] = "no header scan was run"
            else:
                try:
                    self._headers[key] = frozenset(self.scan_headers(source, cutlass=cutlass))
                except KbenchError as exc:
                    self._headers[key] = f"the header scan of {self._inside(source) or source} failed: {exc.one_line()}"
        return self._headers[key]

    def _add_imports(self, files: dict[str, str], start: Path, role: str) -> None:
        roots = self._roots(start)
        key = (start, roots)
        if key not in self._imports:
            self._imports[key] = _python_imports(start, roots, self.real_tree)
        for module, importer in sorted(self._imports[key].items()):
            via = "" if importer == start.resolve() else f" through {self._inside(importer)}"
            self._add(files, module, f"a module {role} imports{via}", keep=True)

    def _roots(self, start: Path) -> tuple[Path, ...]:
        # Where Python looks for a top-level import: the worker puts the file's own folder first
        # on sys.path; the suite root and the repository root are where a helper package sits.
        return tuple(dict.fromkeys((start.parent, self.suite.root, self.tree)))

    def _add(self, files: dict[str, str], path: Path, role: str, *, keep: bool = False) -> None:
        """Record ``path`` both as written and with links resolved: git lists the link or its target."""
        for spelling in (path, path.resolve()):
            relative = self._inside(spelling)
            if relative is not None and not (keep and relative in files):
                files[relative] = role

    def _inside(self, path: Path) -> str | None:
        """``path`` relative to this side's tree, or None where it is outside (a system header)."""
        path = Path(os.path.abspath(path))  # lexically: a config's "sub/../x.cu" is "x.cu"
        for tree in (self.tree, self.real_tree):
            if path.is_relative_to(tree):
                return path.relative_to(tree).as_posix()
        return None


# -- Python imports ----------------------------------------------------------------------------


def _python_imports(start: Path, roots: Sequence[Path], tree: Path) -> dict[Path, Path]:
    """Every module file inside ``tree`` that ``start`` imports, directly or through another such
    module: module -> the file that imports it. ``roots`` are where a top-level import is
    looked for. Imports anywhere in a file count (inside a function too): the plan may measure
    a kernel that needed no measuring, never the other way round."""
    start = start.resolve()
    found: dict[Path, Path] = {}
    pending = [start]
    while pending:
        current = pending.pop()
        for module in _imported_files(current, roots):
            module = module.resolve()
            if module == start or module in found or not module.is_relative_to(tree):
                continue
            found[module] = current
            pending.append(module)
    return found


def _imported_files(source: Path, roots: Sequence[Path]) -> Iterator[Path]:
    try:
        parsed = ast.parse(source.read_bytes(), filename=str(source))
    except (OSError, SyntaxError, ValueError):
        # Missing (deleted on this side) or not Python: the file itself is still a dependency,
        # and its change is seen as such.
        return
    for node in ast.walk(parsed):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _module_files(alias.name.split("."), roots)
        elif isinstance(node, ast.ImportFrom):
            parts = node.module.split(".") if node.module else []
            bases: Sequence[Path] = roots
            if node.level:
                package = source.parent
                for _ in range(node.level - 1):
                    package = package.parent
                bases = (package,)
                if not parts and (package / "__init__.py").is_file():
                    yield package / "__init__.py"
            yield from _module_files(parts, bases)
            for alias in node.names:
                # `from package import name`: name may be a submodule.
                if alias.name != "*":
                    yield from _module_files([*parts, alias.name], bases)


def _module_files(parts: Sequence[str], bases: Sequence[Path]) -> Iterator[Path]:
    """The files importing ``a.b.c`` runs, under each base: ``a/__init__.py``,
    ``a/b/__init__.py``, and ``a/b/c.py`` or ``a/b/c/__init__.py``."""
    if not parts:
        return
    for base in bases:
        folder = base
        for part in parts:
            if (folder / "__init__.py").is_file() and folder != base:
                yield folder / "__init__.py"
            folder = folder / part
        if (folder / "__init__.py").is_file():
            yield folder / "__init__.py"
        module = folder.with_suffix(".py")
        if module.is_file():
            yield module
