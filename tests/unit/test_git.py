"""kbench_ci.git against real temporary repositories (built with the git CLI)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kbench_ci.errors import GitError, UsageError
from kbench_ci.git import GitRepo, ResolvedRevisions


def git(cwd: Path, *args: str) -> str:
    # The test's own git calls go straight to the CLI so they do not depend on the code under test.
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_DATE": "2024-01-01T00:00:00",
        "GIT_COMMITTER_DATE": "2024-01-01T00:00:00",
    }
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return result.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, content in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(content)
        git(repo, "add", rel)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


class History:
    """main:    c1 ── c2
                  \\
    feature:        f1        (checked out)
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.name", "kbench test")
        git(root, "config", "user.email", "kbench@example.invalid")
        git(root, "config", "commit.gpgsign", "false")
        (root / ".gitignore").write_text("*.so\n")
        git(root, "add", ".gitignore")
        self.c1 = commit(root, {"kernels/saxpy.py": "v1\n", "kbench.toml": "# c1\n"}, "c1")
        git(root, "checkout", "-q", "-b", "feature")
        self.f1 = commit(root, {"kernels/saxpy.py": "feature\n"}, "f1")
        git(root, "checkout", "-q", "main")
        self.c2 = commit(root, {"kernels/saxpy.py": "v2\n", "kernels/new.py": "new\n"}, "c2")
        git(root, "checkout", "-q", "feature")


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "repo")


def snapshot(root: Path) -> dict[str, str]:
    """Everything about the user's checkout that kbench-ci must leave alone."""
    return {
        "status": git(root, "status", "--porcelain", "--untracked-files=all"),
        "staged": git(root, "diff", "--cached"),
        "unstaged": git(root, "diff"),
        "head": git(root, "rev-parse", "HEAD"),
        "symbolic_head": git(root, "symbolic-ref", "HEAD"),
        "refs": git(root, "for-each-ref", "--format=%(refname) %(objectname)"),
        "worktrees": git(root, "worktree", "list", "--porcelain"),
        "dirty_file": (root / "kernels/saxpy.py").read_text(),
    }


# --------------------------------------------------------------------------------------------
# opening
# --------------------------------------------------------------------------------------------


def test_opens_from_a_subdirectory(history: History) -> None:
    repo = GitRepo(history.root / "kernels")
    assert repo.root == history.root


def test_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitError) as info:
        GitRepo(plain)
    assert info.value.message == f"{plain} is not inside a git repository"
    assert info.value.hint
    assert "\n" not in info.value.one_line()


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="is not inside a git repository"):
        GitRepo(tmp_path / "nope")


# --------------------------------------------------------------------------------------------
# resolving
# --------------------------------------------------------------------------------------------


def test_resolve(history: History) -> None:
    repo = GitRepo(history.root)
    assert repo.resolve("main") == history.c2
    assert repo.resolve("feature") == history.f1
    assert repo.resolve("HEAD") == history.f1
    assert repo.resolve("HEAD~1") == history.c1
    assert repo.resolve(history.c1[:8]) == history.c1
    git(history.root, "tag", "-a", "v1", "-m", "annotated", history.c1)
    assert repo.resolve("v1") == history.c1  # annotated tag peeled to its commit


def test_resolve_unknown_ref(history: History, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", f"file://{history.root}", str(clone))
    with pytest.raises(GitError) as info:
        GitRepo(clone).resolve("origin/mian")
    message = info.value.one_line()
    assert 'cannot resolve "origin/mian"' in message
    # The remote is asked; a fetch of a branch it lacks would only fail.
    assert "check the spelling: the remote 'origin' has no branch named mian" in message
    assert "git ls-remote --heads --tags origin" in message
    assert "\n" not in message


def test_hints_never_name_a_remote_or_a_fetch_that_cannot_help(history: History, tmp_path: Path) -> None:
    """Every miss suggested `git fetch origin +refs/heads/HEAD~10...`."""
    repo = GitRepo(history.root)
    with pytest.raises(GitError) as info:
        repo.resolve("mian")
    # The closest branch name first
    assert info.value.hint == (
        'did you mean "main"? Otherwise: this repository has no remote to fetch it from, and git branch -a lists what is here'
    )
    with pytest.raises(GitError) as info:
        repo.resolve("HEAD~40")
    assert info.value.hint is not None and info.value.hint.startswith("HEAD~40 goes back further than the history here: ")
    assert "fetch" not in info.value.hint
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    with pytest.raises(GitError) as info:
        GitRepo(empty).resolve("main")
    assert info.value.hint == "this repository has no commits yet: commit the suite first with git add -A; git commit, then compare"


@pytest.mark.parametrize("rev", ["", "  ", "--all", "-h"])
def test_resolve_rejects_option_like_or_empty(history: History, rev: str) -> None:
    with pytest.raises(GitError, match="is not a git revision"):
        GitRepo(history.root).resolve(rev)


def test_resolve_in_shallow_clone_says_so(history: History, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "main",
        f"file://{history.root}", str(clone))  # fmt: skip
    with pytest.raises(GitError) as info:
        GitRepo(clone).resolve("origin/feature")
    assert "shallow clone" in info.value.hint
    # An explicit refspec: `git fetch origin feature` would not create origin/feature here.
    assert "git fetch origin +refs/heads/feature:refs/remotes/origin/feature" in info.value.hint


def test_merge_base_vs_tip(history: History) -> None:
    repo = GitRepo(history.root)

    merge = repo.resolve_revisions("main", None)
    assert merge == ResolvedRevisions(
        base_ref="main",
        base_sha=history.c1,
        head_ref=None,
        head_sha=None,
        base_mode="merge-base",
        merge_base_of=history.c2,
    )

    tip = repo.resolve_revisions("main", None, base_mode="tip")
    assert tip.base_sha == history.c2
    assert tip.base_mode == "tip"
    assert tip.merge_base_of is None

    explicit = repo.resolve_revisions("main", "feature")
    assert explicit.head_ref == "feature"
    assert explicit.head_sha == history.f1
    assert explicit.base_sha == history.c1

    # seen from main, the merge base with feature is still c1
    assert repo.resolve_revisions("feature", "main").base_sha == history.c1


def test_merge_base_missing(history: History) -> None:
    git(history.root, "checkout", "-q", "--orphan", "lonely")
    git(history.root, "rm", "-rq", "--cached", ".")
    commit(history.root, {"other.txt": "x\n"}, "unrelated root")
    repo = GitRepo(history.root)
    with pytest.raises(GitError) as info:
        repo.resolve_revisions("main", "lonely")
    assert info.value.message == '"main" and "lonely" have no common ancestor'
    # Not a shallow clone: fetching cannot help, comparing with the tip can.
    assert "--base-mode tip" in info.value.hint
    # tip mode does not need one
    assert repo.resolve_revisions("main", "lonely", base_mode="tip").base_sha == history.c2


def test_bad_base_mode(history: History) -> None:
    with pytest.raises(UsageError, match='unknown base mode "newest"'):
        GitRepo(history.root).resolve_revisions("main", None, base_mode="newest")


def test_resolve_revisions_bad_ref(history: History) -> None:
    with pytest.raises(GitError, match='cannot resolve "nope"'):
        GitRepo(history.root).resolve_revisions("main", "nope")


# --------------------------------------------------------------------------------------------
# worktrees
# --------------------------------------------------------------------------------------------


def tree_files(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): p.read_text()
        for p in path.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(path).parts[:1]
    }


def commit_files(root: Path, sha: str) -> dict[str, str]:
    names = git(root, "ls-tree", "-r", "--name-only", sha).splitlines()
    return {name: git(root, "show", f"{sha}:{name}") + "\n" for name in names}


def make_dirty(root: Path) -> None:
    (root / "kernels/saxpy.py").write_text("uncommitted edit\n")  # modified, unstaged
    (root / "staged.py").write_text("staged\n")
    git(root, "add", "staged.py")  # staged
    (root / "untracked.py").write_text("untracked\n")  # untracked
    (root / "lib.so").write_text("ignored\n")  # ignored


def test_worktree_has_the_commits_content_and_is_removed(history: History) -> None:
    repo = GitRepo(history.root)
    with repo.worktree("main") as path:
        assert path.is_dir()
        assert tree_files(path) == commit_files(history.root, history.c2)
        assert git(path, "rev-parse", "HEAD") == history.c2
        assert len(git(history.root, "worktree", "list", "--porcelain").split("\n\n")) == 2
    assert not path.exists()
    assert not path.parent.exists()
    assert len(git(history.root, "worktree", "list", "--porcelain").split("\n\n")) == 1


def test_worktree_leaves_the_users_checkout_alone(history: History) -> None:
    make_dirty(history.root)
    before = snapshot(history.root)
    repo = GitRepo(history.root)

    revs = repo.resolve_revisions("main", None)
    with repo.worktree(revs.base_sha) as base, repo.worktree("main") as tip:
        # a build writes into the worktree, and may even commit or switch there
        (base / "kernels/saxpy.so").write_text("built\n")
        (base / "kernels/saxpy.py").write_text("edited in worktree\n")
        (tip / "scratch.txt").write_text("x\n")
        assert tree_files(base)["kernels/saxpy.py"] == "edited in worktree\n"
        assert (history.root / "kernels/saxpy.py").read_text() == "uncommitted edit\n"
    repo.is_dirty()
    repo.head_description()

    assert snapshot(history.root) == before
    assert not base.exists() and not tip.exists()


def test_worktree_removed_on_exception(history: History) -> None:
    repo = GitRepo(history.root)
    with pytest.raises(RuntimeError, match="kernel crashed"):
        with repo.worktree("main") as path:
            (path / "partial.o").write_text("x")
            raise RuntimeError("kernel crashed")
    assert not path.exists()
    assert len(git(history.root, "worktree", "list", "--porcelain").split("\n\n")) == 1


def test_worktree_removed_on_keyboard_interrupt(history: History) -> None:
    repo = GitRepo(history.root)
    with pytest.raises(KeyboardInterrupt):
        with repo.worktree("feature") as path:
            raise KeyboardInterrupt
    assert not path.exists()
    assert len(git(history.root, "worktree", "list", "--porcelain").split("\n\n")) == 1


def test_worktree_removed_even_if_its_directory_was_deleted(history: History) -> None:
    repo = GitRepo(history.root)
    with repo.worktree("main") as path:
        shutil.rmtree(path)
    assert len(git(history.root, "worktree", "list", "--porcelain").split("\n\n")) == 1


def test_worktree_of_bad_ref(history: History) -> None:
    repo = GitRepo(history.root)
    with pytest.raises(GitError, match='cannot resolve "nope"'):
        with repo.worktree("nope"):
            pytest.fail("must not get here")  # pragma: no cover


def test_worktree_does_not_run_hooks(history: History) -> None:
    marker = history.root / "hook-ran"
    hook = history.root / ".git" / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    hook.chmod(0o755)
    with GitRepo(history.root).worktree("main"):
        pass
    assert not marker.exists()


# --------------------------------------------------------------------------------------------
# working tree state
# --------------------------------------------------------------------------------------------


def test_is_dirty(history: History) -> None:
    repo = GitRepo(history.root)
    assert repo.is_dirty() is False

    (history.root / "lib.so").write_text("ignored\n")
    assert repo.is_dirty() is False  # ignored files do not count

    (history.root / "untracked.py").write_text("x\n")
    assert repo.is_dirty() is True
    (history.root / "untracked.py").unlink()

    (history.root / "kernels/saxpy.py").write_text("edited\n")
    assert repo.is_dirty() is True


def test_head_description(history: History) -> None:
    repo = GitRepo(history.root)
    short = git(history.root, "rev-parse", "--short", "HEAD")
    assert repo.head_description() == short
    (history.root / "new.py").write_text("x\n")
    assert repo.head_description() == f"working tree (dirty) at {short}"


def test_head_description_without_commits(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    with pytest.raises(GitError, match="has no commits yet"):
        GitRepo(tmp_path).head_description()


def test_kbench_outputs_never_make_the_tree_dirty(history: History) -> None:
    """A first compare's report folder, without a .gitignore entry, does not
    make the next compare's head "working tree (dirty)"."""
    repo = GitRepo(history.root)
    out = history.root / "bench_out"
    out.mkdir()
    (out / "results.json").write_text('{\n "schema": "kbench-ci/compare",\n "schema_version": 1\n}\n')
    (out / "benchmark.md").write_text("# kbench-ci compare\n")
    assert repo.is_dirty() is False  # a folder holding only a kbench-ci report
    assert repo.is_dirty(own_outputs=(out,)) is False
    # This run's own output folder, whatever it holds (a half-written run, a lock probe).
    mine = history.root / "reports" / "pr"
    mine.mkdir(parents=True)
    (mine / ".results.json.abc.tmp").write_text("partial")
    assert repo.is_dirty(own_outputs=(mine,)) is False
    assert repo.is_dirty() is True  # not a finished kbench-ci report: a change like any other
    (mine / ".results.json.abc.tmp").unlink()
    # A user's file beside a report, or a folder whose results.json is someone else's, counts.
    (out / "notes.txt").write_text("mine\n")
    assert repo.is_dirty() is True
    (out / "notes.txt").unlink()
    other = history.root / "data"
    other.mkdir()
    (other / "results.json").write_text('{"schema": "my-own"}\n')
    assert repo.is_dirty() is True
    (other / "results.json").unlink()
    other.rmdir()
    # A --json-summary file written into the repository , but not a file
    # that only mentions the schema, has it as another key than the first, or links to one.
    (history.root / "summary.json").write_text('{\n "schema": "kbench-ci/summary",\n "command": "compare"\n}\n')
    assert repo.is_dirty() is False
    for name, text in (("gate.json", '{"command": "compare", "note": "schema: kbench-ci/summary"}\n'),
                       ("late.json", '{"command": "compare", "schema": "kbench-ci/summary"}\n'),
                       ("kernel.py", '# {"schema": "kbench-ci/summary"}\n')):
        (history.root / name).write_text(text)
        assert repo.is_dirty() is True, name
        (history.root / name).unlink()
    (history.root / "linked.json").symlink_to(history.root / "summary.json")
    assert repo.is_dirty() is True
    (history.root / "linked.json").unlink()
    # A real change still counts with the outputs excluded.
    (history.root / "kernels/saxpy.py").write_text("edited\n")
    assert repo.is_dirty(own_outputs=(out, mine)) is True


# -- changed_paths ------------------------------------------------------------------------------


def test_changed_paths_between_two_commits_lists_edits_additions_deletions_and_both_rename_ends(history: History) -> None:
    root = history.root
    base = git(root, "rev-parse", "HEAD")
    git(root, "mv", "kbench.toml", "suite.toml")
    (root / "kernels" / "saxpy.py").write_text("edited\n")
    (root / "kernels" / "helper with space.py").write_text("new\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "edit, add, rename")
    head = git(root, "rev-parse", "HEAD")

    changed = GitRepo(root).changed_paths(base, head)

    assert changed == {"kernels/saxpy.py", "kernels/helper with space.py", "kbench.toml", "suite.toml"}
    assert GitRepo(root).changed_paths(head, head) == frozenset()


def test_changed_paths_against_the_working_tree_include_untracked_but_not_ignored_files(history: History) -> None:
    root = history.root
    (root / "kernels" / "saxpy.py").write_text("unstaged\n")
    (root / "kernels" / "new.cuh").write_text("// untracked\n")
    (root / "kernels" / "saxpy.so").write_text("ignored build output\n")

    changed = GitRepo(root / "kernels").changed_paths("HEAD", None)

    # Paths stay relative to the repository root, also when opened from a subdirectory.
    assert changed == {"kernels/saxpy.py", "kernels/new.cuh"}
