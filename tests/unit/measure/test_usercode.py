"""Loading user files: a file that is not Python source says so (issue 25, item 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.errors import UserFileError
from kbench_ci.measure.usercode import load_module


def test_a_binary_solution_file_is_named_as_not_python_source(tmp_path: Path) -> None:
    binary = tmp_path / "kernel.py"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(UserFileError) as info:
        load_module(binary, role="solution")
    assert info.value.message.startswith("solution kernel.py is not Python source (")
    assert "line None" not in info.value.message
    assert info.value.hint == "pass the .py file of the solution, not a compiled or binary file"


def test_a_syntax_error_still_names_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def run_kernel(:\n    pass\n")
    with pytest.raises(UserFileError, match=r"solution broken.py has a syntax error at line 1: "):
        load_module(broken, role="solution")
