"""The cache folder's rule (docs/config.md): a folder of the user's own, or one
kbench-ci can make; never the root or a folder directly under it. Each refusal names where the
folder came from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
from kbench_ci.suite.settings import ExecutionOptions, SuiteSettings, cache_folder, execution


def test_a_folder_of_ones_own_or_one_to_make_is_taken(tmp_path: Path) -> None:
    assert cache_folder(tmp_path, where="--cache-dir") == tmp_path
    assert cache_folder(tmp_path / "new" / "deeper", where="--cache-dir") == tmp_path / "new" / "deeper"


@pytest.mark.parametrize("folder", ["/", "/etc", "/tmp", "/usr/../etc"])
def test_the_root_and_folders_directly_under_it_are_refused(folder: str) -> None:
    with pytest.raises(UsageError, match="is a system folder"):
        cache_folder(Path(folder), where="--cache-dir")


def test_another_users_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(tmp_path).st_uid + 1)
    with pytest.raises(UsageError, match=r"belongs to another user \(uid \d+\)"):
        cache_folder(tmp_path, where="--cache-dir")


def test_a_folder_that_cannot_be_written_or_made_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(UsageError, match="is not writable by you"):
        cache_folder(tmp_path, where="--cache-dir")
    with pytest.raises(UsageError, match=f"cannot be made: {tmp_path} is not writable by you"):
        cache_folder(tmp_path / "new", where="--cache-dir")


def test_each_refusal_names_where_the_folder_came_from(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="^cache_dir in kbench.toml /etc "):
        execution(SuiteSettings(cache_dir=Path("/etc")), environ={})
    with pytest.raises(UsageError, match="^KBENCH_CI_CACHE_DIR /usr "):
        execution(SuiteSettings(), environ={"KBENCH_CI_CACHE_DIR": "/usr"})
    with pytest.raises(UsageError, match="^--no-cache and --cache-dir contradict each other"):
        execution(SuiteSettings(), ExecutionOptions(no_cache=True, cache_dir=tmp_path), environ={})
