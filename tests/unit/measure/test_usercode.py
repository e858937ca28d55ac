"""Loading user files: a file that is not Python source says so."""

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


def test_a_kernel_is_compiled_from_its_source_never_from_bytecode_that_passes_for_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python takes a .pyc as current when the source's mtime (whole seconds) and size match: a
    kernel rewritten to the same size within a second would run its old code."""
    import importlib.util
    import os
    import py_compile
    import sys

    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    kernel = tmp_path / "kernel.py"
    kernel.write_text("VALUE = 1\n")
    stamp = kernel.stat().st_mtime
    cached = Path(importlib.util.cache_from_source(str(kernel)))
    py_compile.compile(str(kernel), cfile=str(cached), doraise=True)  # what an earlier import left
    kernel.write_text("VALUE = 2\n")  # the agent's next version: same size, same second
    os.utime(kernel, (stamp, stamp))
    spec = importlib.util.spec_from_file_location("stale_probe_kernel", kernel)  # what Python itself does
    assert spec is not None and spec.loader is not None
    plain = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plain)
    assert plain.VALUE == 1  # the stale bytecode passes for current
    assert load_module(kernel, role="solution").VALUE == 2
    other = tmp_path / "other.py"
    other.write_text("VALUE = 3\n")
    assert load_module(other, role="solution").VALUE == 3
    assert not Path(importlib.util.cache_from_source(str(other))).exists()  # and none is written
