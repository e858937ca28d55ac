"""Removing a folder a side could have written: a tree deeper than Python's recursion limit (and
longer than PATH_MAX as a path) broke ``shutil.rmtree`` even with ``ignore_errors``:
the judge crashed as it retired a worker, and a stale folder in the temp folder crashed
every later run's ``remove_stale``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kbench_ci.scratch import OWNER_FILE, remove_stale, remove_tree

DEPTH = 3000


def _deep_tree(top: Path, depth: int = DEPTH) -> None:
    """``top/d/d/.../d/file`` ``depth`` folders deep, made through descriptors (the path is longer
    than PATH_MAX), a file at every 100th level."""
    top.mkdir(parents=True, exist_ok=True)
    folder = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir("d", dir_fd=folder)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = below
            if level % 100 == 0:
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=folder))
    finally:
        os.close(folder)


def test_a_tree_deeper_than_the_recursion_limit_is_removed(tmp_path: Path) -> None:
    assert DEPTH > sys.getrecursionlimit()
    _deep_tree(tmp_path / "side-head" / "triton")
    assert remove_tree(tmp_path / "side-head") is True
    assert not (tmp_path / "side-head").exists()
    assert os.listdir(tmp_path) == []


def test_a_stale_scratch_folder_holding_a_deep_tree_is_removed(tmp_path: Path) -> None:
    stale = tmp_path / "kbench-judge-stale"
    _deep_tree(stale / "side-head")
    # an owner that no longer runs: no process has pid 2**22 + 1 (above pid_max's ceiling)
    (stale / OWNER_FILE).write_text(f"{2**22 + 1} 12345")
    assert remove_stale(tmp_path) == [stale]
    assert not stale.exists()


def test_a_worker_with_a_deep_tree_in_its_folder_is_retired(tmp_path: Path) -> None:
    from kbench_ci.judge.sides import SideWorker

    cache = tmp_path / "triton"
    worker = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "TRITON_CACHE_DIR": str(cache),
                                                               "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    worker.stop()
    _deep_tree(worker.folder / "deep")
    _deep_tree(cache / "side-head" / "deep", 1200)
    worker.remove_files()
    assert not worker.folder.exists() and not (cache / "side-head").exists()


def test_a_link_to_a_folder_outside_is_unlinked_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "keep.txt").write_text("the base's")
    (outside / "inner" / "keep.txt").write_text("the base's")
    tree = tmp_path / "side-head"
    _deep_tree(tree, 5)
    (tree / "to-outside").symlink_to(outside, target_is_directory=True)
    (tree / "d" / "d" / "to-inner").symlink_to(outside / "inner", target_is_directory=True)
    (tree / "d" / "to-file").symlink_to(outside / "keep.txt")
    assert remove_tree(tree) is True
    assert not tree.exists()
    assert (outside / "keep.txt").read_text() == "the base's"
    assert (outside / "inner" / "keep.txt").read_text() == "the base's"


def test_a_link_given_as_the_folder_is_unlinked_only(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    (tmp_path / "link").symlink_to(outside, target_is_directory=True)
    assert remove_tree(tmp_path / "link") is True
    assert not os.path.lexists(tmp_path / "link") and (outside / "keep.txt").is_file()


def test_a_folder_that_cannot_be_emptied_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _deep_tree(tmp_path / "t", 3)

    def refuse(*_: object, **__: object) -> None:
        raise PermissionError(13, "refused")

    monkeypatch.setattr(os, "unlink", refuse)
    monkeypatch.setattr(os, "rmdir", refuse)
    assert remove_tree(tmp_path / "t") is False
