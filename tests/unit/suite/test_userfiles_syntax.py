"""The user's files read from their syntax: the parent never imports pull-request
code, yet a missing ``reference()`` / ``setup()`` / ``run_kernel()`` or a dimension ``setup()`` needs
is named before anything is measured; a name the syntax cannot see is left to the worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.errors import UserFileError
from kbench_ci.suite.userfiles import kernel_file_problems, raise_all


def _problems(tmp_path: Path, ref: str, solution: str, shapes: list[dict[str, int]] | None = None) -> list[str]:
    (tmp_path / "ref.py").write_text(ref)
    (tmp_path / "sol.py").write_text(solution)
    found = kernel_file_problems(solution=tmp_path / "sol.py", ref=tmp_path / "ref.py", python_solution=True,
                                 shapes=shapes or [{"N": 8}], fix="toml")
    return [problem.message for problem in found]


GOOD_SOLUTION = "def setup(N, seed, scale=2, **_):\n    return {}\n\n\ndef run_kernel(**_):\n    pass\n"


@pytest.mark.parametrize("ref", [
    "def reference(**_):\n    return 1\n",
    "def _r(**_):\n    return 1\n\nreference = _r\n",
    "from helpers import reference\n",
    "try:\n    from fast import reference\nexcept ImportError:\n    def reference(**_):\n        return 1\n",
    "from helpers import *\n",  # names the syntax cannot see: left to the worker
    "globals()['reference'] = lambda **_: 1\n",
])
def test_a_reference_bound_in_any_way_is_no_problem(tmp_path: Path, ref: str) -> None:
    assert _problems(tmp_path, ref, GOOD_SOLUTION) == []


def test_a_file_that_does_not_parse_is_named_with_its_line_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ref = f"open({str(marker)!r}, 'w').close()\ndef reference(**_):\n    return 1\n"
    assert _problems(tmp_path, ref, "def setup(N:\n") == []  # run, compare: the kernel's failure (exit 1), later
    found = kernel_file_problems(solution=tmp_path / "sol.py", ref=tmp_path / "ref.py", python_solution=True,
                                 shapes=[{"N": 8}], fix="flags", solution_syntax=True)
    assert [problem.message for problem in found] == ["solution sol.py has a syntax error at line 1: '(' was never closed"]
    (tmp_path / "ref.py").write_text("def reference(**_):\n    return (\n")
    assert _problems(tmp_path, "def reference(**_):\n    return (\n", GOOD_SOLUTION) == [
        "ref ref.py has a syntax error at line 2: '(' was never closed"
    ]
    assert not marker.exists()  # read, never imported


def test_each_shape_lacking_a_dimension_is_one_problem(tmp_path: Path) -> None:
    solution = GOOD_SOLUTION.replace("def setup(N,", "def setup(N, M,")
    found = _problems(tmp_path, "def reference(**_):\n    return 1\n", solution, [{"N": 8, "M": 2}, {"N": 8}, {"N": 4}])
    assert found == ["sol.py:1 setup() needs 'M', a dimension shapes [1], [2] in kbench.toml do not give"]


def test_raise_all_joins_several_problems_one_line_each() -> None:
    with pytest.raises(UserFileError) as info:
        raise_all([UserFileError("a"), UserFileError("b", hint="fix b")])
    assert str(info.value).splitlines()[1:] == ["  - a", "  - b (fix b)"]
