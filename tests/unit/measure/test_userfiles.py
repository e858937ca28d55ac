"""Loading users' files: unique module names, and sibling helpers kept apart between trees."""

from pathlib import Path

import pytest

from kbench_ci.errors import UserFileError
from kbench_ci.measure.usercode import accepted_kwargs, call_by_name, load_module


def write_tree(root: Path, value: int) -> Path:
    root.mkdir()
    (root / "common.py").write_text(f"VALUE = {value}\n")
    (root / "kernel.py").write_text("import common\n\ndef value():\n    return common.VALUE\n")
    return root / "kernel.py"


def test_base_and_head_copies_each_see_their_own_sibling_helper(tmp_path: Path) -> None:
    base = load_module(write_tree(tmp_path / "base", 1), role="solution")
    head = load_module(write_tree(tmp_path / "head", 2), role="solution")
    assert base.value() == 1
    assert head.value() == 2


def test_missing_file_and_syntax_error_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserFileError, match="not found"):
        load_module(tmp_path / "nope.py", role="ref")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    with pytest.raises(UserFileError, match="syntax error at line 1"):
        load_module(broken, role="ref")


def test_call_by_name_passes_only_accepted_names_and_names_the_missing_one() -> None:
    def reference(x, y, N):
        return x + y + N

    assert accepted_kwargs(reference, {"x": 1, "y": 2, "N": 3, "M": 4}) == {"x": 1, "y": 2, "N": 3}
    assert call_by_name(reference, {"x": 1, "y": 2, "N": 3, "extra": 9}, what="reference()") == 6
    with pytest.raises(UserFileError, match="reference\\(\\) needs 'N'"):
        call_by_name(reference, {"x": 1, "y": 2}, what="reference()")
