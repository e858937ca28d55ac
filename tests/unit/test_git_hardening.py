"""kbench_ci.git under faults: a compare killed by SIGKILL leaves a worktree that the
next one removes; shallow clones are deepened to the merge base, or the hint says how."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci.git import GitRepo
from tests.unit.test_git import History, git


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "repo")


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _worktree_paths(root: Path) -> list[str]:
    listing = git(root, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]


def test_a_worktree_is_locked_with_its_owners_pid(history: History) -> None:
    with GitRepo(history.root).worktree("main"):
        listing = git(history.root, "worktree", "list", "--porcelain")
        assert f"locked kbench-ci pid {os.getpid()}" in listing


def test_a_worktree_left_by_a_killed_compare_is_removed_by_the_next(history: History, tmp_path: Path) -> None:
    stale_parent = tmp_path / "kbench-worktree-stale"
    stale_parent.mkdir()
    stale = stale_parent / "kbench-0123456789ab"
    git(history.root, "worktree", "add", "--detach", "-q", str(stale), history.c1)
    git(history.root, "worktree", "lock", "--reason", f"kbench-ci pid {_dead_pid()}", str(stale))
    # A worktree of the user's own, locked by them, and one of a live kbench-ci: both stay.
    own = tmp_path / "mine"
    git(history.root, "worktree", "add", "--detach", "-q", str(own), history.c1)
    git(history.root, "worktree", "lock", "--reason", "on a USB disk", str(own))
    alive = tmp_path / "kbench-worktree-alive" / "kbench-x"
    alive.parent.mkdir()
    git(history.root, "worktree", "add", "--detach", "-q", str(alive), history.c1)
    git(history.root, "worktree", "lock", "--reason", "kbench-ci pid 1", str(alive))

    with GitRepo(history.root).worktree("main") as path:
        assert str(stale) not in _worktree_paths(history.root)
        assert not stale_parent.exists()
        assert {str(own), str(alive), str(path)} <= set(_worktree_paths(history.root))
