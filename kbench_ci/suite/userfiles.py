"""The user's Python files checked from their syntax, before any case is measured.

A ref.py without ``reference()``, a Python solution without ``run_kernel()`` or ``setup()``, or a
shape that lacks a dimension ``setup()`` requires would otherwise be found by the worker, once per
shape, after builds and other kernels' cases. They are read here with :mod:`ast` only: the parent
never imports a pull request's code (docs/isolation.md), so nothing in these files runs here.

A file whose names cannot be known without running it (``from x import *``, a module
``__getattr__``, ``globals()`` / ``setattr`` / ``exec``) is given the benefit of the doubt: the
worker still checks it when it loads it. A file that does not parse is a problem of its own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kbench_ci.errors import UserFileError

#: whose words a fix is in: kbench.toml's keys (run, compare) or bench's flags
FixFor = Literal["toml", "flags"]

#: calls that can bind a module's names at run time, out of the syntax's sight
_DYNAMIC_CALLS = frozenset({"globals", "setattr", "exec", "vars", "__import__"})


@dataclass(frozen=True, slots=True)
class _Module:
    """What a file's syntax says it defines at its top level."""

    names: frozenset[str]
    #: its top-level names may include ones the syntax cannot show
    dynamic: bool
    #: each function defined once, plainly (no decorator), at the top level, by name
    functions: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef]

    def lacks(self, name: str) -> bool:
        return not self.dynamic and name not in self.names


def read_module(path: Path, *, role: str) -> _Module:
    """The top-level names of the Python file at ``path``; :class:`UserFileError` when it cannot
    be read or does not parse (with its line)."""
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise UserFileError(f"{role} {path.name} cannot be read: {exc.strerror or exc}") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        if exc.lineno is None:
            raise UserFileError(f"{role} {path.name} is not Python source ({exc.msg})") from None
        raise UserFileError(f"{role} {path.name} has a syntax error at line {exc.lineno}: {exc.msg}") from None
    except ValueError as exc:  # NUL bytes
        raise UserFileError(f"{role} {path.name} is not Python source ({exc})") from None
    names: set[str] = set()
    dynamic = False
    counts: dict[str, int] = {}
    plain: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in _top_level(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            counts[node.name] = counts.get(node.name, 0) + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.decorator_list:
                plain[node.name] = node
            if node.name == "__getattr__":
                dynamic = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    dynamic = True
                names.add(alias.asname or alias.name.split(".")[0])
                counts[alias.asname or alias.name.split(".")[0]] = 2  # not a plain def
        else:
            for bound in _bound_names(node):
                names.add(bound)
                counts[bound] = 2
    if any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC_CALLS
        for node in ast.walk(tree)
    ):
        dynamic = True
    functions = {name: node for name, node in plain.items() if counts.get(name) == 1}
    return _Module(frozenset(names), dynamic, functions)


def _top_level(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run at import, into ``if`` / ``try`` / ``with`` / loops but not into
    functions or classes."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from _top_level(inner)
        for handler in getattr(node, "handlers", ()):
            yield from _top_level(handler.body)


def _bound_names(node: ast.stmt) -> Iterator[str]:
    """Names a non-definition statement binds at the top level (assignments, loop and ``with``
    targets, walrus); nested bodies are visited by :func:`_top_level`."""
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name):
                yield part.id
    for part in ast.walk(node):
        if isinstance(part, ast.NamedExpr) and isinstance(part.target, ast.Name):
            yield part.target.id


def required_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
    """The parameters a call must name: no default, not ``*args`` / ``**kwargs``."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    without_default = positional[: len(positional) - len(arguments.defaults)]
    keyword_only = [arg for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if default is None]
    return tuple(arg.arg for arg in (*without_default, *keyword_only))


def kernel_file_problems(
    *,
    solution: Path,
    ref: Path,
    python_solution: bool,
    shapes: Sequence[Mapping[str, int]],
    fix: FixFor,
    solution_syntax: bool = False,
) -> list[UserFileError]:
    """Every contract the files of one kernel break, each once (not once per shape):
    ``reference()`` in ref.py; ``setup()`` and ``run_kernel()`` in a Python solution; and each
    dimension that the ``setup()`` used (the solution's, or for a CUDA C++ solution ref.py's)
    requires but a shape does not give.

    A ref.py that does not parse is a problem here; a solution that does not parse only with
    ``solution_syntax`` (bench's usage error): in ``run`` and ``compare`` a solution that does
    not load is its kernel's failure (exit 1, docs/compare.md), found by the worker."""
    problems: list[UserFileError] = []
    ref_module: _Module | None = None
    try:
        ref_module = read_module(ref, role="ref")
    except UserFileError as exc:
        problems.append(exc)
    if ref_module is not None and ref_module.lacks("reference"):
        problems.append(UserFileError(
            f"ref {ref.name} does not define reference()",
            hint=f"add `def reference(**kwargs): ...` to {ref.name}, returning the expected output(s)",
        ))
    setup_owner: tuple[Path, _Module] | None = (ref, ref_module) if ref_module is not None else None
    if python_solution:
        setup_owner = None
        try:
            module = read_module(solution, role="solution")
        except UserFileError as exc:
            if solution_syntax:
                problems.append(exc)
        else:
            for name, signature, does in (
                ("setup", "setup(**dims)", "returning {'inputs': {...}, 'outputs': [names]}"),
                ("run_kernel", "run_kernel(**inputs)", "writing its output(s) into the output tensor(s)"),
            ):
                if module.lacks(name):
                    problems.append(UserFileError(
                        f"solution {solution.name} does not define {name}()",
                        hint=f"add `def {signature}: ...` to {solution.name}, {does}",
                    ))
            setup_owner = (solution, module)
    if setup_owner is not None:
        problem = _missing_dimension(*setup_owner, shapes, fix)
        if problem is not None:
            problems.append(problem)
    return problems


def _missing_dimension(
    path: Path, module: _Module, shapes: Sequence[Mapping[str, int]], fix: FixFor
) -> UserFileError | None:
    setup = module.functions.get("setup")
    if setup is None or module.dynamic:
        return None
    # ``seed`` is given to a setup() that names it (measure/setup_inputs.py)
    required = [name for name in required_parameters(setup) if name != "seed"]
    missing = sorted({name for shape in shapes for name in required if name not in shape}, key=required.index)
    if not missing:
        return None
    lacking = [index for index, shape in enumerate(shapes) if any(name not in shape for name in missing)]
    names = ", ".join(repr(name) for name in missing)
    what = f"{path.name}:{setup.lineno} setup() needs {names}, " + ("a dimension" if len(missing) == 1 else "dimensions")
    if fix == "flags":
        flags = " ".join(f"--{name}=VALUE" for name in missing)
        return UserFileError(f"{what} no flag gives", hint=f"pass {flags}, or give the parameter a default")
    which = (
        "no shape in kbench.toml gives" if len(lacking) == len(shapes)
        else "shapes " + ", ".join(f"[{i}]" for i in lacking) + " in kbench.toml do not give"
    )
    example = ", ".join(f"{name} = ..." for name in missing)
    return UserFileError(
        f"{what} {which}",
        hint=f"add {example} to {'each shape' if len(lacking) == len(shapes) else 'those shapes'}"
        ", or give the parameter a default",
    )


def check_kernel_files(kernels: Sequence[tuple[str, Path, Path, bool, Sequence[Mapping[str, int]]]]) -> None:
    """:func:`kernel_file_problems` for every kernel of a suite (name, solution, ref, whether the
    solution is Python, shapes), raised together: one line each, named by kernel."""
    found: list[UserFileError] = []
    for name, solution, ref, python_solution, shapes in kernels:
        for problem in kernel_file_problems(
            solution=solution, ref=ref, python_solution=python_solution, shapes=shapes, fix="toml"
        ):
            found.append(UserFileError(f'kernel "{name}": {problem.message}', hint=problem.hint))
    raise_all(found)


def raise_all(found: Sequence[UserFileError]) -> None:
    """Nothing when ``found`` is empty; its one problem; or all of them, one line each."""
    if len(found) == 1:
        raise found[0]
    if found:
        raise UserFileError(
            f"{len(found)} problems in the kernels' files, found before measuring:"
            + "".join(f"\n  - {problem.one_line()}" for problem in found)
        )
