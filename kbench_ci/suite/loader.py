"""The suite file: ``kbench.toml`` or ``[tool.kbench]`` → frozen dataclasses, validated once.

The whole file is checked before anything runs, so a typo fails in a second instead of after the
first kernel has been built and timed. Every problem is a :class:`ConfigError` whose one-line
message names the file, the kernel (by index and name) and the key. The format is documented in
``docs/config.md``; keep the two in step.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kbench_ci.errors import ConfigError, ConfigProblems, EnvironmentProblem, UsageError
from kbench_ci.suite import values
from kbench_ci.suite.model import (
    BASELINES,
    CONFIG_FILENAME,
    IMPLEMENTATIONS,
    PYPROJECT_FILENAME,
    TIMING_METHODS,
    FrozenMapping,
    KernelSpec,
    Suite,
)
from kbench_ci.suite.settings import (
    DEFAULT_THRESHOLD,
    DEFAULT_TIMEOUT_S,
    ISOLATIONS,
    MAX_ADAPTIVE_ROUNDS,
    MAX_CONFIG_DEPTH,
    SuiteSettings,
)
from kbench_ci.suite.size_expr import check_size_expression, evaluate_size_expression

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the tomli backport has the same API
    try:
        import tomli as tomllib  # type: ignore[no-redef]  # the same module under another name
    except ModuleNotFoundError:
        tomllib = None  # type: ignore[assignment]


_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
# Dimension names are used as keyword names and inside size expressions, so they must be
# identifiers.
_DIM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# `{word}` not preceded by `$`: a build placeholder. `${CUDA_HOME}` is the shell's business and
# `{a,b}` (brace expansion) does not match, so both pass through untouched.
_PLACEHOLDER_RE = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BUILD_PLACEHOLDERS = ("src", "out")


# --------------------------------------------------------------------------------------------
# Value objects
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Finding and reading the file
# --------------------------------------------------------------------------------------------


def find_config(start: Path, explicit: Path | None = None) -> Path:
    """The suite file for a run started in ``start``.

    ``explicit`` (``--config PATH``) wins and must exist. Otherwise each directory from
    ``start`` upwards is searched for ``kbench.toml``, then for a ``pyproject.toml`` that has a
    ``[tool.kbench]`` table. The search stops at the first directory holding ``.git`` so that a
    suite belonging to an enclosing project is never picked up by accident.
    """
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            what = "is a directory" if path.is_dir() else "does not exist"
            raise ConfigError(
                f"config file {path} {what}",
                hint="pass the path of a kbench.toml or pyproject.toml",
            )
        return path

    start = Path(start).resolve()
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_FILENAME
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT_FILENAME
        if pyproject.is_file() and _tool_table(_read_toml(pyproject), pyproject) is not None:
            return pyproject
        if (directory / ".git").exists():
            break
    raise ConfigError(
        f"no {CONFIG_FILENAME} or [tool.kbench] in pyproject.toml found from {start}",
        hint=f"create {CONFIG_FILENAME} at the repository root (see docs/config.md) "
        "or pass --config PATH",
    )


def load_suite(path: Path, *, root: Path | None = None, check_files: bool = True) -> Suite:
    """Read and validate the suite file at ``path``.

    A file named ``pyproject.toml`` is read from its ``[tool.kbench]`` table; any other file is
    the suite itself. Kernel paths are relative to ``root`` (default: the file's directory).
    ``check_files=False`` skips the existence check of solution and ref files, for callers that
    read one tree's config and look for the files in another.
    """
    path = Path(path)
    label = _display(path)
    data = _read_toml(path)
    if path.name == PYPROJECT_FILENAME:
        table = _tool_table(data, path)
        if table is None:
            raise ConfigError(
                f"{label}: has no [tool.kbench] table",
                hint="add [[tool.kbench.kernels]] entries, or use a kbench.toml "
                "(see docs/config.md)",
            )
        label = f"{label} [tool.kbench]"
    else:
        table = data
    suite_root = Path(root if root is not None else path.parent).absolute()
    return _Loader(label, suite_root, _repository_root(suite_root), check_files).suite(table, source=path.absolute())


def _repository_root(directory: Path) -> Path:
    """The nearest directory from ``directory`` upwards that holds ``.git`` (a worktree's is a
    file); ``directory`` itself when none does."""
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return directory


def _read_toml(path: Path) -> dict[str, Any]:
    label = _display(path)
    if tomllib is None:
        raise EnvironmentProblem(
            "reading kbench.toml on Python 3.10 needs the package 'tomli'",
            hint="pip install tomli",
        )
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except RecursionError:
        # the reader recurses once per level of nesting: a file nested some 400 deep ends here
        raise _too_deep(label) from None
    except tomllib.TOMLDecodeError as exc:
        # The decoder's message carries "(at line L, column C)"; keep it verbatim. At the end
        # of the file it says "(at end of document)" and no line: name the line where the
        # construct left open begins.
        message = str(exc)
        if message.endswith(_AT_END):
            line = _unclosed_from(path)
            if line is not None:
                raise ConfigError(
                    f"{label}: invalid TOML: {message[: -len(_AT_END)]} (at line {line}: the file ends inside "
                    "what begins there)",
                    hint="close the array, inline table or string that line opens",
                ) from None
        raise ConfigError(f"{label}: invalid TOML: {message}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: not valid UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read: {exc.strerror or exc}") from None
    if _depth(data) > MAX_CONFIG_DEPTH:
        raise _too_deep(label)
    return data


def _too_deep(label: str) -> ConfigError:
    return ConfigError(
        f"{label}: arrays and tables nest more than {MAX_CONFIG_DEPTH} deep",
        hint="a suite nests 4 (kernels, a kernel, shapes, a shape): remove the extra brackets (see docs/config.md)",
    )


def _depth(data: Mapping[str, Any]) -> int:
    """How deep arrays and tables nest in parsed TOML (the file's own table: 0; ``kernels``: 1),
    walked without recursion; stops counting past :data:`MAX_CONFIG_DEPTH`."""
    deepest = 0
    pending: list[tuple[object, int]] = [(data, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_CONFIG_DEPTH:
                break
            children = value.values() if isinstance(value, dict) else value
            pending.extend((child, depth + 1) for child in children)
    return deepest


_AT_END = " (at end of document)"


def _unclosed_from(path: Path) -> int | None:
    """The line where a TOML file's last, never-closed construct begins: the line after the
    longest prefix of whole lines that still parses (the decoder reports only "end of
    document"). None when the file cannot be read again or is too long to bisect by lines."""
    assert tomllib is not None
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None
    if len(lines) > 5000:
        return None
    for count in range(len(lines) - 1, -1, -1):
        try:
            tomllib.loads("".join(lines[:count]))
        except (tomllib.TOMLDecodeError, RecursionError):
            continue
        # the next line that is not blank or a comment opens what is never closed
        for index in range(count, len(lines)):
            if lines[index].strip() and not lines[index].lstrip().startswith("#"):
                return index + 1
        return count + 1
    return None


def _tool_table(data: Mapping[str, Any], path: Path) -> Mapping[str, Any] | None:
    tool = data.get("tool")
    if not isinstance(tool, Mapping) or "kbench" not in tool:
        return None
    table = tool["kbench"]
    if not isinstance(table, Mapping):
        raise ConfigError(f"{_display(path)}: [tool.kbench] must be a table, got {_kind(table)}")
    return table


def _display(path: Path) -> str:
    """The path relative to the current directory when it is inside it: short in CI logs, and
    still absolute (hence telling which side) for a file in a temporary worktree."""
    try:
        return str(Path(path).absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------------
# Thresholds
# --------------------------------------------------------------------------------------------


class _Invalid(Exception):
    """A value is wrong; the caller knows where it was and turns this into a located error."""

    def __init__(self, problem: str, hint: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint


def _fraction(value: object, *, below_one: bool, example: str) -> float:
    """A float from ``0.02`` or ``"2%"`` or ``"0.02"``; > 0, and < 1 when ``below_one``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Invalid(f'must be a number or a percentage such as {example}, got {_kind(value)}')
    number: float
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1].strip()) / 100.0 if text.endswith("%") else float(text)
        except ValueError:
            raise _Invalid(
                f"must be a number or a percentage such as {example}, got {value!r}"
            ) from None
    else:
        number = float(value)
    too_big = below_one and number >= 1.0
    if not math.isfinite(number) or number <= 0.0 or too_big:
        bounds = "between 0 and 1 (exclusive)" if below_one else "greater than 0"
        hint = None
        if too_big and not (isinstance(value, str) and value.strip().endswith("%")):
            hint = f'did you mean "{_fmt(value)}%"?'
        raise _Invalid(f"must be {bounds}, such as {example}, got {value!r}", hint)
    return number


def parse_threshold(value: str | float) -> float:
    """The slowdown threshold as a fraction: ``"2%"``, ``"0.02"`` and ``0.02`` all give 0.02.

    Raises :class:`UsageError` (a ``--threshold`` flag is usage); inside a config file the loader
    re-raises it as a :class:`ConfigError` that names the file and kernel.
    """
    try:
        return _fraction(value, below_one=True, example='0.02 or "2%"')
    except _Invalid as exc:
        raise UsageError(f"threshold {exc.problem}", hint=exc.hint) from None


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _kind(value: object) -> str:
    return values.kind_of(value)


def _fmt(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _suggest(key: str, choices: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _one_of(value: object, choices: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be a string, got {_kind(value)}")
    if value not in choices:
        options = ", ".join(choices)
        raise _Invalid(f'unknown {what} "{value}"{_suggest(value, choices)}; one of: {options}')
    return value


def _int(minimum: int, maximum: int = values.INT64_MAX) -> Callable[[object], int]:
    def parse(value: object) -> int:
        try:
            return values.integer(value, minimum=minimum, maximum=maximum)
        except values.InvalidValue as exc:
            raise _Invalid(str(exc)) from None

    return parse


def _isolation(value: object) -> str:
    if not isinstance(value, str) or value not in ISOLATIONS:
        raise _Invalid(f"must be one of {', '.join(repr(i) for i in ISOLATIONS)}, got {_kind(value)}")
    return value


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"must be true or false, got {_kind(value)}")
    return value


def _folder(value: object) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"must be a folder path (a string), got {_kind(value)}")
    return Path(value).expanduser()


def _tolerance(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"must be a number, got {_kind(value)}")
    if not math.isfinite(value) or value < 0:
        raise _Invalid(f"must be a finite number >= 0, got {value}")
    return float(value)


def _positive_seconds(value: object) -> float:
    try:
        return values.timeout_seconds(value)
    except values.InvalidValue as exc:
        raise _Invalid(str(exc)) from None


def _seconds_or_zero(value: object) -> float:
    try:
        return values.budget_seconds(value)
    except values.InvalidValue as exc:
        raise _Invalid(str(exc)) from None


def _expression(value: object) -> str:
    # A plain positive integer is accepted as the expression that evaluates to it.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return str(value)
    if not isinstance(value, str):
        raise _Invalid(f"must be a size expression string such as \"N * 4\", got {_kind(value)}")
    if not value.strip():
        raise _Invalid("must not be empty")
    return value.strip()


def _expression_table(value: object) -> FrozenMapping[str]:
    if not isinstance(value, Mapping):
        raise _Invalid(f'must be a table of name = "size expression", got {_kind(value)}')
    out: dict[str, str] = {}
    for name, expr in value.items():
        try:
            out[name] = _expression(expr)
        except _Invalid as exc:
            raise _Invalid(f'entry "{name}" {exc.problem}') from None
    return FrozenMapping(out)


def _baselines(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Invalid(f'must be an array such as ["pytorch-eager"], got {_kind(value)}')
    try:
        return values.distinct([_one_of(item, BASELINES, "baseline") for item in value])
    except values.InvalidValue as exc:
        raise _Invalid(str(exc)) from None


def _build(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"must be a shell command string, got {_kind(value)}")
    if not value.strip():
        raise _Invalid("must not be empty")
    for match in _PLACEHOLDER_RE.finditer(value):
        if match.group(1) not in _BUILD_PLACEHOLDERS:
            raise _Invalid(
                f'has unknown placeholder "{{{match.group(1)}}}"; only {{src}} and {{out}} exist'
            )
    return value


def _threshold(value: object) -> float:
    return _fraction(value, below_one=True, example='0.02 or "2%"')


def _slowdown(value: object) -> float:
    return _fraction(value, below_one=False, example='0.05 or "5%"')


def _timing_method(value: object) -> str:
    return _one_of(value, TIMING_METHODS, "timing method")


def _implementation(value: object) -> str:
    return _one_of(value, IMPLEMENTATIONS, "implementation")


# key in the file -> (attribute, parser). Shared keys may sit in [defaults] and in a kernel.
_SHARED: dict[str, tuple[str, Callable[[object], Any]]] = {
    "implementation": ("implementation", _implementation),
    "baselines": ("baselines", _baselines),
    "atol": ("atol", _tolerance),
    "rtol": ("rtol", _tolerance),
    "ptr_sizes": ("ptr_sizes", _expression_table),
    "ptr_size": ("ptr_size", _expression),
    "threshold": ("threshold", _threshold),
    "build": ("build", _build),
    "timeout": ("timeout_s", _positive_seconds),
    "bytes": ("bytes_expr", _expression),
    "flops": ("flops_expr", _expression),
}
#: alternative spellings of shared keys
_ALIASES = {"backend": "implementation"}
_SETTINGS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "seed": ("seed", _int(0)),
    "num_warmup": ("num_warmup", _int(0)),
    "num_trials": ("num_trials", _int(1)),
    "discard_first": ("discard_first", _int(0)),
    "correctness_trials": ("correctness_trials", _int(1)),
    "timing_method": ("timing_method", _timing_method),
    "rounds": ("rounds", _int(1, MAX_ADAPTIVE_ROUNDS)),
    "time_budget": ("time_budget_s", _seconds_or_zero),
    "max_geomean_slowdown": ("max_geomean_slowdown", _slowdown),
    "warm_worker": ("warm_worker", _bool),
    "cache": ("cache", _bool),
    "cache_dir": ("cache_dir", _folder),
    "isolation": ("isolation", _isolation),
}
_KERNEL_ONLY = ("name", "solution", "ref", "shapes")
_TOP_LEVEL = ("defaults", "kernels")

_DEFAULTS_KEYS = (*_SHARED, *_ALIASES, *_SETTINGS)
_KERNEL_KEYS = (*_KERNEL_ONLY, *_SHARED, *_ALIASES)


class _Loader:
    """Walks the parsed TOML once; every error it raises carries the location prefix.

    Problems are collected, not raised one by one (:meth:`problem`): a file with three mistakes
    is reported once with all three, not fixed and re-run three times. A problem that leaves
    nothing sensible to check after it (a kernel entry that is not a table) ends only the part
    it is in.
    """

    __slots__ = ("label", "root", "repository", "check_files", "problems")

    def __init__(self, label: str, root: Path, repository: Path, check_files: bool) -> None:
        self.label = label
        self.root = root
        #: kernel files must be inside it (see :meth:`path`)
        self.repository = repository
        self.check_files = check_files
        self.problems: list[ConfigError] = []

    def fail(self, where: str, message: str, hint: str | None = None) -> ConfigError:
        return ConfigError(f"{self.label}: {where}{message}", hint=hint)

    @contextmanager
    def problem(self) -> Iterator[None]:
        """Record a ConfigError raised in the block and go on after it."""
        try:
            yield
        except ConfigError as exc:
            self.problems.append(exc)

    def suite(self, table: Mapping[str, Any], *, source: Path) -> Suite:
        suite = None
        with self.problem():
            suite = self._suite(table, source=source)
        if len(self.problems) == 1:
            raise self.problems[0]
        if self.problems:
            raise ConfigProblems(self.label, tuple(self.problems))
        assert suite is not None  # no problem recorded means _suite returned
        return suite

    def _suite(self, table: Mapping[str, Any], *, source: Path) -> Suite:
        for key in table:
            if key not in _TOP_LEVEL:
                with self.problem():
                    if key in _DEFAULTS_KEYS:
                        raise self.fail("", f'key "{key}" must be inside [defaults]')
                    if key in _KERNEL_ONLY:
                        raise self.fail("", f'key "{key}" must be inside a [[kernels]] entry')
                    raise self.fail("", f'unknown top-level key "{key}"{_suggest(key, _TOP_LEVEL)}')

        defaults_table = table.get("defaults", {})
        shared: dict[str, Any] = {}
        settings = SuiteSettings()
        if not isinstance(defaults_table, Mapping):
            self.problems.append(self.fail(
                "", f'"defaults" must be a table ([defaults]), got {_kind(defaults_table)}'
            ))
        else:
            shared, settings = self.defaults(defaults_table)

        if "kernels" not in table:
            raise self.fail(
                "", "no kernels", hint="add at least one [[kernels]] entry (see docs/config.md)"
            )
        entries = table["kernels"]
        if isinstance(entries, Mapping):
            raise self.fail(
                "",
                '"kernels" must be an array of tables, got a single table',
                hint="write [[kernels]] (double brackets) for each kernel",
            )
        if not isinstance(entries, list) or not entries:
            raise self.fail(
                "",
                f'"kernels" must be a non-empty array of tables, got {_kind(entries)}',
                hint="add at least one [[kernels]] entry (see docs/config.md)",
            )

        kernels: list[KernelSpec] = []
        first_index: dict[str, int] = {}
        for index, entry in enumerate(entries):
            before = len(self.problems)
            with self.problem():
                spec = self.kernel(index, entry, shared)
                if len(self.problems) > before:
                    continue  # reported; the entry is not usable
                if spec.name in first_index:
                    first = first_index[spec.name]
                    raise self.fail(
                        f'kernels[{index}] ("{spec.name}"): ',
                        f'duplicate name "{spec.name}" (already used by kernels[{first}])',
                    )
                first_index[spec.name] = index
                kernels.append(spec)
        if self.problems:
            raise self.problems.pop()  # re-recorded by suite(): the problems end the load here

        return Suite(root=self.root, source=source, settings=settings, kernels=tuple(kernels))

    # -- [defaults] ---------------------------------------------------------------------------

    def defaults(self, table: Mapping[str, Any]) -> tuple[dict[str, Any], SuiteSettings]:
        where = "[defaults]: "
        shared: dict[str, Any] = {}
        settings: dict[str, Any] = {}
        with self.problem():
            self.check_alias_clash(table, where)
        for key, value in table.items():
            canonical = _ALIASES.get(key, key)
            with self.problem():
                if canonical in _SHARED:
                    attr, parse = _SHARED[canonical]
                    shared[attr] = self.parse(where, key, value, parse)
                elif key in _SETTINGS:
                    attr, parse = _SETTINGS[key]
                    settings[attr] = self.parse(where, key, value, parse)
                elif key in _KERNEL_ONLY:
                    raise self.fail(
                        where, f'key "{key}" is only allowed in a [[kernels]] entry, not in [defaults]'
                    )
                else:
                    raise self.fail(where, f'unknown key "{key}"{_suggest(key, _DEFAULTS_KEYS)}')
        if settings.get("cache_dir") is not None:
            settings["cache_dir"] = self.root / settings["cache_dir"]  # relative: to the config's folder
        result = SuiteSettings(**settings)
        if result.discard_first >= result.num_trials:
            self.problems.append(self.fail(
                where,
                f'"discard_first" ({result.discard_first}) must be smaller than '
                f'"num_trials" ({result.num_trials})',
            ))
        return shared, result

    # -- [[kernels]] --------------------------------------------------------------------------

    def kernel(self, index: int, entry: object, shared: Mapping[str, Any]) -> KernelSpec:
        where = f"kernels[{index}]: "
        if not isinstance(entry, Mapping):
            raise self.fail(where, f"must be a table, got {_kind(entry)}")

        if "name" not in entry:
            raise self.fail(where, 'missing required key "name"')
        raw_name = entry["name"]
        if not isinstance(raw_name, str):
            raise self.fail(where, f'"name" must be a string, got {_kind(raw_name)}')
        if not _NAME_RE.fullmatch(raw_name) or raw_name in (".", ".."):
            # "." and ".." would name a folder above the kernel's own in the build staging
            raise self.fail(
                where,
                f'"name" {raw_name!r} may only contain letters, digits, "_", "." and "-", and is not "." or ".."',
            )
        name = raw_name
        where = f'kernels[{index}] ("{name}"): '

        with self.problem():
            self.check_alias_clash(entry, where)
        values: dict[str, Any] = {
            "implementation": "auto",
            "threshold": DEFAULT_THRESHOLD,
            "timeout_s": DEFAULT_TIMEOUT_S,
            **shared,
        }
        for key, value in entry.items():
            canonical = _ALIASES.get(key, key)
            if key in _KERNEL_ONLY:
                continue
            with self.problem():
                if canonical in _SHARED:
                    attr, parse = _SHARED[canonical]
                    parsed = self.parse(where, key, value, parse)
                    if attr == "ptr_sizes":
                        # Merged per pointer: [defaults] can size a common output for all kernels
                        # while one kernel adds or overrides a single entry.
                        parsed = FrozenMapping({**values.get("ptr_sizes", {}), **parsed})
                    values[attr] = parsed
                elif key in _SETTINGS:
                    raise self.fail(
                        where, f'key "{key}" is only allowed in [defaults], not in a kernel'
                    )
                else:
                    raise self.fail(where, f'unknown key "{key}"{_suggest(key, _KERNEL_KEYS)}')

        found: dict[str, Any] = {}
        for key, check in (("solution", self.path), ("ref", self.path), ("shapes", None)):
            with self.problem():
                if key not in entry:
                    raise self.fail(where, f'missing required key "{key}"')
                found[key] = self.shapes(where, entry[key]) if check is None else check(where, key, entry[key])
        if len(found) < 3:
            raise self.problems.pop()  # this entry's last problem, re-recorded by the caller
        kind = values["implementation"]
        python_solution = kind in ("triton", "cute-dsl", "pytorch") or (
            kind == "auto" and Path(found["solution"]).suffix == ".py"
        )
        with self.problem():
            # only those that parsed: a bad value already has its own problem
            given = [key for key in ("ptr_size", "ptr_sizes") if key in entry and key in values]
            if python_solution and given:
                raise self.fail(
                    where, f'"{given[0]}" sizes the pointers of a CUDA C++ solve(); this kernel is a Python '
                    "solution, whose setup() makes its inputs",
                    hint=f'remove "{given[0]}" from this kernel',
                )
        with self.problem():
            # A build command is run for a CUDA C++ kernel only: on a Python one it would be
            # ignored without a word. Set in [defaults] it is for the suite's CUDA kernels.
            if python_solution and "build" in entry and "build" in values:
                raise self.fail(
                    where, '"build" compiles a CUDA C++ solution; this kernel is a Python solution, which is not built',
                    hint='remove "build" from this kernel',
                )
        self.size_expressions(name, values, found["shapes"])
        return KernelSpec(name=name, solution=found["solution"], ref=found["ref"], shapes=found["shapes"], **values)

    def size_expressions(self, name: str, values: Mapping[str, Any], shapes: tuple[FrozenMapping[int], ...]) -> None:
        """Every size expression of a kernel by ``--ptr-size``'s grammar (never evaluated as
        Python), and ``bytes`` / ``flops`` evaluated at each shape as the run will (a name
        that is no dimension, a size past 64 bits), so each is a problem before anything runs."""
        prefix = f'{self.label}: kernel "{name}": '
        named = [(f"ptr_sizes.{pointer}", expression) for pointer, expression in values.get("ptr_sizes", {}).items()]
        given = [(key, values.get(attr)) for key, attr in (("ptr_size", "ptr_size"), ("bytes", "bytes_expr"),
                                                             ("flops", "flops_expr"))]
        for key, expression in [*given[:1], *named, *given[1:]]:
            if expression is None:
                continue
            with self.problem():
                try:
                    check_size_expression(expression)
                    if key in ("bytes", "flops"):
                        for index, shape in enumerate(shapes):
                            try:
                                evaluate_size_expression(expression, shape)
                            except UsageError as exc:
                                raise UsageError(f"shapes[{index}]: {exc.message}", hint=exc.hint) from None
                except UsageError as exc:
                    raise ConfigError(f"{prefix}{key}: {exc.message}", hint=exc.hint) from None

    def check_alias_clash(self, table: Mapping[str, Any], where: str) -> None:
        for alias, canonical in _ALIASES.items():
            if alias in table and canonical in table:
                raise self.fail(
                    where, f'both "{canonical}" and its alias "{alias}" are set; keep one'
                )

    def parse(self, where: str, key: str, value: object, parse: Callable[[object], Any]) -> Any:
        try:
            return parse(value)
        except _Invalid as exc:
            raise self.fail(where, f'"{key}" {exc.problem}', hint=exc.hint) from None

    def path(self, where: str, key: str, value: object) -> Path:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f'"{key}" must be a non-empty path string, got {_kind(value)}')
        relative = Path(value)
        if relative.is_absolute():
            # Base and head each resolve paths inside their own tree; an absolute path would
            # point both sides at the same file and hide any change to it.
            raise self.fail(
                where,
                f'"{key}" must be relative to the config file\'s directory, got {value!r}',
            )
        full = self.root / relative
        # Inside the repository, also after `..` and symbolic links: compare checks each side out
        # of git, and a file outside (or a link to one) is the same file for both sides, or no
        # file at all in the base's worktree: such a kernel would always be "added" and could
        # never fail the gate.
        hint = "compare reads each side's files from its own checkout: keep kernel files inside the repository"
        if not Path(os.path.normpath(full)).is_relative_to(self.repository):
            raise self.fail(where, f'"{key}" {value!r} is outside the repository {self.repository}', hint=hint)
        target = full.resolve()
        if not target.is_relative_to(self.repository.resolve()):
            raise self.fail(
                where, f'"{key}" {value!r} is a link to {target}, outside the repository {self.repository}', hint=hint
            )
        if self.check_files:
            if not full.exists():
                raise self.fail(
                    where, f'"{key}" file {value!r} does not exist (looked in {self.root})'
                )
            if not full.is_file():
                raise self.fail(where, f'"{key}" {value!r} is not a file')
        return full

    def shapes(self, where: str, value: object) -> tuple[FrozenMapping[int], ...]:
        example = "such as [{N = 2048}, {N = 4096}]"
        if isinstance(value, Mapping):
            raise self.fail(
                where,
                '"shapes" must be an array of tables, got a single table',
                hint="wrap it in brackets: shapes = [{...}]",
            )
        if not isinstance(value, list):
            raise self.fail(
                where, f'"shapes" must be an array of tables {example}, got {_kind(value)}'
            )
        if not value:
            raise self.fail(
                where, f'"shapes" must not be empty; give at least one table {example}'
            )
        shapes: list[FrozenMapping[int]] = []
        seen: dict[frozenset[tuple[str, int]], int] = {}
        for i, shape in enumerate(value):
            at = f"shapes[{i}]"
            if not isinstance(shape, Mapping):
                raise self.fail(
                    where, f"{at} must be a table such as {{N = 2048}}, got {_kind(shape)}"
                )
            if not shape:
                raise self.fail(
                    where, f"{at} must name at least one dimension, such as {{N = 2048}}"
                )
            for dim, size in shape.items():
                if not _DIM_RE.fullmatch(dim):
                    raise self.fail(where, f'{at}: dimension name "{dim}" must be an identifier')
                try:
                    values.dimension(size)
                except values.InvalidValue as exc:
                    raise self.fail(where, f'{at}: "{dim}" {exc}') from None
            key = frozenset(shape.items())
            if key in seen:
                raise self.fail(where, f"{at} repeats shapes[{seen[key]}]")
            seen[key] = i
            shapes.append(FrozenMapping(shape))
        return tuple(shapes)
