"""Every fetch hint works when run as written in a depth-1 clone.

Each test makes a real depth-1 clone (``git clone --depth=1 file://...``) of a local origin,
asks kbench-ci to resolve a ref the clone lacks, runs the ``git fetch`` the hint names, and
then resolves the ref the hint says to use, as compare does (merge base with HEAD included).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from kbench_ci.errors import GitError
from kbench_ci.git import GitRepo

_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # The test's own git calls go straight to the CLI so they do not depend on the code under test.
    return subprocess.run(["git", *args], cwd=cwd, env=_ENV, check=check, capture_output=True, text=True)


def out(cwd: Path, *args: str) -> str:
    return git(cwd, *args).stdout.strip()


class Origin:
    """main:     c0 ── c1 ── c2 ── c3        (v1.0: an annotated tag on c2)
                        \\
    feature:              f1
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        out(root, "init", "-q", "-b", "main")
        out(root, "config", "user.name", "kbench test")
        out(root, "config", "user.email", "kbench@example.invalid")
        out(root, "config", "commit.gpgsign", "false")
        self.c: list[str] = []
        for index in range(4):
            (root / "kbench.toml").write_text(f"# c{index}\n")
            out(root, "add", "kbench.toml")
            out(root, "commit", "-q", "-m", f"c{index}")
            self.c.append(out(root, "rev-parse", "HEAD"))
            if index == 1:
                out(root, "branch", "feature")
        out(root, "tag", "-a", "v1.0", "-m", "release", self.c[2])
        out(root, "checkout", "-q", "feature")
        (root / "kernels.py").write_text("f1\n")
        out(root, "add", "kernels.py")
        out(root, "commit", "-q", "-m", "f1")
        self.f1 = out(root, "rev-parse", "HEAD")
        out(root, "checkout", "-q", "main")

    def clone(self, into: Path, branch: str = "main") -> Path:
        out(into.parent, "clone", "-q", "--depth=1", "--branch", branch, self.root.as_uri(), str(into))
        assert out(into, "rev-parse", "--is-shallow-repository") == "true"
        return into


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    return Origin(tmp_path / "origin")


def _hint(clone: Path, rev: str) -> str:
    with pytest.raises(GitError) as info:
        GitRepo(clone).resolve(rev)
    hint = info.value.hint or ""
    assert "\n" not in info.value.one_line()
    return hint


def _follow(clone: Path, hint: str, rev: str) -> str:
    """Run the hint's ``git fetch`` as written; return the ref it says to use then."""
    match = re.search(r"(git fetch [^;,]*)(?:, then use (\S+?))?(?:;|$)", hint)
    assert match is not None, hint
    done = git(clone, *shlex.split(match.group(1))[1:], check=False)
    assert done.returncode == 0, f"the hinted {match.group(1)!r} failed: {done.stderr}"
    return match.group(2) or rev


def _resolves(clone: Path, ref: str, sha: str) -> None:
    repo = GitRepo(clone)
    assert repo.resolve(ref) == sha
    # what compare does with it: its merge base with HEAD, deepening the clone as it needs
    resolved = repo.resolve_revisions(ref, None)
    assert resolved.merge_base_of == sha


def test_a_short_sha_hint_fetches_history_that_holds_it(origin: Origin, tmp_path: Path) -> None:
    """`git fetch origin 030ba3c` fails: a server resolves only full shas and ref names."""
    clone = origin.clone(tmp_path / "clone")
    short = origin.c[1][:7]
    hint = _hint(clone, short)
    ref = _follow(clone, hint, short)
    _resolves(clone, ref, origin.c[1])


def test_a_short_sha_of_a_branch_tip_hint_fetches_its_full_sha(origin: Origin, tmp_path: Path) -> None:
    clone = origin.clone(tmp_path / "clone")
    short = origin.f1[:8]
    hint = _hint(clone, short)
    assert origin.f1 in hint
    _resolves(clone, _follow(clone, hint, short), origin.f1)


def test_a_tag_hint_fetches_the_tag(origin: Origin, tmp_path: Path) -> None:
    """`+refs/heads/v1.0:...` names a branch that does not exist."""
    clone = origin.clone(tmp_path / "clone")
    hint = _hint(clone, "v1.0")
    assert "refs/tags/v1.0" in hint
    _resolves(clone, _follow(clone, hint, "v1.0"), origin.c[2])


def test_a_full_ref_name_hint_fetches_that_branch(origin: Origin, tmp_path: Path) -> None:
    """`refs/heads/main` gave `+refs/heads/refs/heads/main` (a pull request's checkout has no
    local main)."""
    clone = origin.clone(tmp_path / "clone", branch="feature")
    hint = _hint(clone, "refs/heads/main")
    assert "refs/heads/refs/heads" not in hint
    _resolves(clone, _follow(clone, hint, "refs/heads/main"), origin.c[3])


def test_a_relative_rev_of_a_missing_branch_hint_fetches_enough_depth(origin: Origin, tmp_path: Path) -> None:
    """`main~2` without main: `git fetch --unshallow` brings no main, and main at depth 1 has no
    main~2."""
    clone = origin.clone(tmp_path / "clone", branch="feature")
    hint = _hint(clone, "main~2")
    assert "--depth=3" in hint
    ref = _follow(clone, hint, "main~2")
    assert ref.endswith("main~2")
    _resolves(clone, ref, origin.c[1])


def test_with_two_remotes_the_hint_names_origin(origin: Origin, tmp_path: Path) -> None:
    """Not the alphabetically first remote (here one that lacks the branch)."""
    other = tmp_path / "other"
    out(tmp_path, "init", "-q", "-b", "main", str(other))
    clone = origin.clone(tmp_path / "clone")
    out(clone, "remote", "add", "aaa", other.as_uri())
    hint = _hint(clone, "feature")
    assert "git fetch origin " in hint and "aaa" not in hint
    _resolves(clone, _follow(clone, hint, "feature"), origin.f1)


def test_without_origin_the_hint_names_the_upstream_remote(origin: Origin, tmp_path: Path) -> None:
    other = tmp_path / "other"
    out(tmp_path, "init", "-q", "-b", "main", str(other))
    clone = origin.clone(tmp_path / "clone")
    out(clone, "remote", "rename", "origin", "upstream")
    out(clone, "remote", "add", "aaa", other.as_uri())
    assert out(clone, "config", "branch.main.remote") == "upstream"
    hint = _hint(clone, "feature")
    assert "git fetch upstream " in hint and "aaa" not in hint
    _resolves(clone, _follow(clone, hint, "feature"), origin.f1)


def test_an_unreachable_remote_is_named_with_its_url(origin: Origin, tmp_path: Path) -> None:
    """Not a fragment of git's stderr ("and the repository exists.")."""
    clone = origin.clone(tmp_path / "clone")
    gone = (tmp_path / "gone.git").as_uri()
    out(clone, "remote", "set-url", "origin", gone)
    hint = _hint(clone, "feature")
    assert f"the remote 'origin' at {gone} could not be reached" in hint
    # compare's own deepening says the same, instead of quoting git's last line
    out(clone, "fetch", "-q", "--depth=1", origin.root.as_uri(), "+refs/heads/feature:refs/heads/f")
    with pytest.raises(GitError) as info:
        GitRepo(clone).resolve_revisions("main", "f")
    message = info.value.one_line()
    assert f"the remote 'origin' at {gone} could not be reached" in message, message
    assert "repository exists" not in message
    # the hint's fetch works once the remote is back
    out(clone, "remote", "set-url", "origin", origin.root.as_uri())
    _resolves(clone, _follow(clone, hint, "feature"), origin.f1)


def test_a_url_with_credentials_is_never_printed(origin: Origin, tmp_path: Path) -> None:
    clone = origin.clone(tmp_path / "clone")
    out(clone, "remote", "set-url", "origin", "https://x-access-token:SECRET@127.0.0.1:9/o/r.git")
    hint = _hint(clone, "feature")
    assert "SECRET" not in hint and "could not be reached" in hint
