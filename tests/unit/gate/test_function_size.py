"""The shape of gate/: one suite driver that run_compare and run_suite both use, each a
short composition (<= 60 lines), and no function in gate/ over 80 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import kbench_ci.gate

GATE = Path(kbench_ci.gate.__file__).parent


def _function_lengths() -> dict[str, int]:
    lengths = {}
    for path in sorted(GATE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                lengths[f"{path.name}::{node.name}"] = node.end_lineno - node.lineno + 1
    return lengths


def test_the_two_suite_commands_are_short_compositions() -> None:
    lengths = _function_lengths()
    assert lengths["compare.py::run_compare"] <= 60
    assert lengths["run.py::run_suite"] <= 60


def test_no_function_in_gate_is_over_80_lines() -> None:
    too_long = {name: length for name, length in _function_lengths().items() if length > 80}
    assert not too_long, f"split these along their seams: {too_long}"


def test_both_commands_drive_their_cases_through_the_one_suite_driver() -> None:
    for module in ("compare.py", "run.py"):
        assert "SuiteDriver(" in (GATE / module).read_text(encoding="utf-8"), module
