"""The user's Python files: ref.py (``reference(**kwargs)``, optional ``setup(**dims)``, ``atol`` /
``rtol``) as a :class:`Problem`, Python solutions, and calling their functions by name."""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kbench_ci.errors import UserFileError


class _FromSource(importlib.machinery.SourceFileLoader):
    """Compiles the file from its source on every load: no bytecode is read or written for it.
    Python takes a cached ``.pyc`` as current when the source's mtime (whole seconds) and size
    match, so a kernel rewritten to the same size within a second, or copied with its mtime kept,
    would run its old code."""

    def get_code(self, fullname: str) -> Any:
        return self.source_to_code(self.get_data(self.path), self.path)


def load_module(path: Path, *, role: str) -> ModuleType:
    """Import a user's .py file under a name unique to its path.

    Unique names matter because a compare run loads the base and the head copy of the same file
    in one process; a shared name would make the second import return the first module.
    """
    path = path.resolve()
    if not path.is_file():
        raise UserFileError(f"{role} file not found: {path}", hint="check the path you passed")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    name = f"kbench_user_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserFileError(f"{role} {path} cannot be imported as Python", hint="is it a .py file?")
    if isinstance(spec.loader, importlib.machinery.SourceFileLoader):
        spec.loader = _FromSource(name, str(path))
    module = importlib.util.module_from_spec(spec)
    # Let the file import siblings (helpers next to the kernel), as `python file.py` would, and
    # its own tree's packages (`from kernels.helpers import ...`) from its suite's root. Before
    # the root was put here a compare's base found `kernels` through the working folder, which is
    # the head's checkout: the base ran the head's helpers (in process), or none (under the judge).
    root = import_root(path.parent)
    folders = [str(path.parent)] + ([str(root)] if root is not None and root != path.parent else [])
    sys.path[0:0] = folders
    sys.modules[name] = module
    modules_before = set(sys.modules)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        if exc.lineno is None:  # no line to point at: NUL bytes, a binary file, bad encoding
            raise UserFileError(
                f"{role} {path.name} is not Python source ({exc.msg})",
                hint=f"pass the .py file of the {role}, not a compiled or binary file",
            ) from exc
        raise UserFileError(
            f"{role} {path.name} has a syntax error at line {exc.lineno}: {exc.msg}"
        ) from exc
    except ImportError as exc:
        del sys.modules[name]
        raise UserFileError(
            f"{role} {path.name} failed to import: {exc}",
            hint="install the missing package or fix the import",
        ) from exc
    except Exception as exc:
        del sys.modules[name]
        raise UserFileError(
            f"{role} {path.name} raised {type(exc).__name__} while loading: {exc}"
        ) from exc
    except SystemExit as exc:
        # Not an Exception: uncaught, it would end the worker and be blamed on whatever variant
        # was loading (the solution, even when ref.py exits). Name the file that did it.
        del sys.modules[name]
        call = "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"
        raise UserFileError(
            f"{role} {path.name} called {call} while loading: importing it must not end the process",
            hint=f"remove the call, or put it under `if __name__ == \"__main__\":` in {path.name}",
        ) from None
    finally:
        for folder in folders:
            sys.path.remove(folder)
        _forget_sibling_modules(path.parent, modules_before)
        if root is not None:
            _forget_tree_packages(root, modules_before)
    return module


def import_quietly(names: Sequence[str]) -> None:
    """Import each of ``names`` now (the packages a worker's cases will import, ahead of them);
    one that fails (or exits) is taken out of ``sys.modules`` again, so the case that needs it
    imports it afresh and reports its own error."""
    for name in names:
        before = frozenset(sys.modules)
        try:
            importlib.import_module(name)
        except (Exception, SystemExit):  # noqa: BLE001  (a package's import that exits, too)
            for module in set(sys.modules) - before:
                if module == name or module.startswith(f"{name}."):
                    del sys.modules[module]


def import_root(folder: Path) -> Path | None:
    """The folder a user's file in ``folder`` imports its repository's own packages from: the
    nearest one up holding ``kbench.toml`` (the suite's root, where ``kbench-ci`` runs); None
    outside a suite (``bench`` of a file of its own). A compare's base is a worktree of its own,
    so its root is its own tree's, never the head's."""
    for candidate in (folder, *folder.parents):
        if (candidate / "kbench.toml").is_file():
            return candidate
    return None


def _forget_tree_packages(root: Path, modules_before: set[str]) -> None:
    """Drop from the module cache the tree's own packages the load imported (``kernels``,
    ``kernels.helpers``): the other side's load must import its own tree's. Only a module whose
    top-level name is a package or module right in ``root``: a virtual environment inside the
    repository (``.venv/``) holds packages that must stay imported once."""
    for module_name in set(sys.modules) - modules_before:
        top = module_name.partition(".")[0]
        module_file = getattr(sys.modules[module_name], "__file__", None)
        own = (root / top, root / f"{top}.py")
        if module_file and any(Path(module_file).resolve().is_relative_to(place) for place in own if place.exists()):
            del sys.modules[module_name]


def _forget_sibling_modules(directory: Path, modules_before: set[str]) -> None:
    """Drop helpers the file imported from its own folder or tree (``import common``, ``from
    kernels import common``) from the module cache. The loaded module keeps its reference; but a compare loads base and head copies of
    the same tree in one process, and the second ``import common`` must find its own tree's
    file, not the cached first one."""
    for module_name in set(sys.modules) - modules_before:
        module_file = getattr(sys.modules[module_name], "__file__", None)
        if module_file and Path(module_file).resolve().is_relative_to(directory):
            del sys.modules[module_name]


def require_function(module: ModuleType, name: str, *, role: str, path: Path) -> Callable[..., Any]:
    function = getattr(module, name, None)
    if not callable(function):
        raise UserFileError(
            f"{role} {path.name} does not define {name}()",
            hint=f"add `def {name}(**kwargs): ...` to {path.name}",
        )
    checked: Callable[..., Any] = function
    return checked


def accepted_kwargs(function: Callable[..., Any], available: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``available`` that ``function`` takes by name (all of it with ``**kwargs``).

    Users write ``reference(x, out, N)`` or ``reference(**kwargs)``; both must work with the same
    dictionary of inputs and dimensions, so names the function does not take are left out.
    """
    return kwargs_filter(function)(available)


def kwargs_filter(function: Callable[..., Any]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """``accepted_kwargs`` with the signature read once, for calls made in the timed loop."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # builtins and C extensions: pass everything
        return dict
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict
    names = frozenset(
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )
    return lambda available: {key: value for key, value in available.items() if key in names}


def missing_required(function: Callable[..., Any], given: Mapping[str, Any]) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        and p.name not in given
    ]


def call_by_name(
    function: Callable[..., Any], available: Mapping[str, Any], *, what: str, extra: Mapping[str, Any] | None = None
) -> Any:
    """Call ``function`` with the arguments it names, failing clearly when one has no value."""
    kwargs = accepted_kwargs(function, available)
    if extra:
        kwargs.update(extra)
    missing = missing_required(function, kwargs)
    if missing:
        raise UserFileError(
            f"{what} needs {', '.join(repr(m) for m in missing)} but no input or dimension has that name",
            # The worker does not know the command: name both places a dimension comes from
            hint="add it to the shape (a key in kbench.toml's shapes; bench: --NAME=VALUE) or return it from setup()",
        )
    return function(**kwargs)


def takes_seed(function: Callable[..., Any]) -> bool:
    """Does ``function`` name a ``seed`` parameter (not only ``**kwargs``)?"""
    try:
        return "seed" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class Problem:
    path: Path
    reference: Callable[..., Any]
    setup: Callable[..., Any] | None
    atol: float | None
    rtol: float | None


def load_problem(path: Path) -> Problem:
    module = load_module(path, role="ref")
    reference = require_function(module, "reference", role="ref", path=path)
    setup = getattr(module, "setup", None)
    return Problem(
        path=path,
        reference=reference,
        setup=setup if callable(setup) else None,
        atol=_tolerance(module, "atol", path),
        rtol=_tolerance(module, "rtol", path),
    )


def _tolerance(module: object, name: str, path: Path) -> float | None:
    value = getattr(module, name, None)
    if value is None:
        return None
    # inf would pass every element (and NaN none): neither is a tolerance.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise UserFileError(
            f"{path.name}: {name} must be a finite number >= 0, got {value!r}", hint=f"e.g. {name} = 1e-3"
        )
    return float(value)


def collect_outputs(
    result: Any, kwargs: Mapping[str, Any], output_names: Sequence[str], *, what: str
) -> dict[str, torch.Tensor]:
    """Map what a reference (or baseline) returned onto the output names.

    None: outputs were updated in place. A tensor: the only output. A tuple/list: outputs in
    order. A dict: by name.
    """
    names = tuple(output_names)
    if result is None:
        return {name: kwargs[name] for name in names}
    if isinstance(result, torch.Tensor):
        if len(names) != 1:
            raise UserFileError(
                f"{what} returned one tensor but there are {len(names)} outputs ({', '.join(names)})",
                hint="return a tuple in output order or a dict keyed by output name",
            )
        return {names[0]: result}
    if isinstance(result, Mapping):
        missing = [name for name in names if name not in result]
        if missing:
            raise UserFileError(f"{what} returned a dict without output(s) {', '.join(missing)}")
        return {name: result[name] for name in names}
    if isinstance(result, (tuple, list)):
        if len(result) != len(names):
            raise UserFileError(
                f"{what} returned {len(result)} values but there are {len(names)} outputs ({', '.join(names)})"
            )
        return dict(zip(names, result, strict=True))
    raise UserFileError(
        f"{what} returned {type(result).__name__}; expected None (in place), a tensor, a tuple or a dict"
    )
