"""A compare's cache folder, from the base's kbench.toml: a relative one
follows the head's tree, not the base's temporary worktree (or a local compare loses its cache
every run); under the judge none lies in the head's tree, whose files are the pull request's (a
compiled kernel it committed under the base's cache folder would be the base's to load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kbench_ci.gate.compare import _cache_outside_the_pull_request
from kbench_ci.suite.settings import Execution, default_cache_dir


class _Sides:
    def __init__(self, head: Path, base: Path) -> None:
        self.head_tree, self.base_tree = head, base


def _run(tmp_path: Path, folder: Path, isolation: str) -> Path | None:
    sides: Any = _Sides(tmp_path / "head", tmp_path / "base")
    return _cache_outside_the_pull_request(Execution(cache_dir=folder, isolation=isolation), sides).cache_dir


def test_the_bases_relative_cache_folder_follows_the_head_tree(tmp_path: Path) -> None:
    assert _run(tmp_path, tmp_path / "base" / ".kbench-cache", "process") == tmp_path / "head" / ".kbench-cache"


def test_under_the_judge_no_cache_folder_lies_in_the_pull_requests_tree(tmp_path: Path) -> None:
    assert _run(tmp_path, tmp_path / "base" / ".kbench-cache", "judge") == default_cache_dir()
    assert _run(tmp_path, tmp_path / "head" / "cache", "judge") == default_cache_dir()
    assert _run(tmp_path, tmp_path / "elsewhere", "judge") == tmp_path / "elsewhere"
    assert _cache_outside_the_pull_request(Execution(cache_dir=None, isolation="judge"),
                                           _Sides(tmp_path, tmp_path)).cache_dir is None  # type: ignore[arg-type]
