"""The action's steps under faults and hostile input: cancellation, shallow
checkouts, pull_request_target, rate limits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kbench_ci.github import action as action_steps
from tests.integration.github.test_action_steps import GIT_ENV, Repos, event, fake_report, git, outputs
from tests.support.signals import heed_stop_signals

PACKAGE_ROOT = Path(action_steps.__file__).parents[2]


@pytest.fixture
def repos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repos:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    return Repos(tmp_path / "git")


@pytest.fixture
def runner(tmp_path: Path) -> dict[str, str]:
    """The files and variables a runner gives a step."""
    home = tmp_path / "runner"
    (home / "temp").mkdir(parents=True)
    (home / "output").touch()
    (home / "summary.md").touch()
    return {
        "GITHUB_OUTPUT": str(home / "output"), "GITHUB_STEP_SUMMARY": str(home / "summary.md"),
        "RUNNER_TEMP": str(home / "temp"), "GITHUB_REPOSITORY": "o/r",
    }

# A stand-in for `kbench-ci compare` that needs a moment to clean up after Ctrl-C, as the real
# one does (kill the worker, remove the worktrees).
SLOW_TO_CLEAN_UP = """\
import pathlib, signal, sys, time
here = pathlib.Path(sys.argv[0]).parent
def stop(signum, frame):
    time.sleep(1.5)
    (here / "cleaned-up").write_text(str(signum))
    sys.exit(128 + signum)
signal.signal(signal.SIGINT, stop)
(here / "started").write_text("")
time.sleep(60)
"""


def test_compare_step_gives_compare_time_to_clean_up_after_a_cancel(tmp_path: Path, runner: dict) -> None:
    """subprocess.run would SIGKILL the child 0.25 s after Ctrl-C, leaving its worktrees."""
    fake = tmp_path / "bin" / "kbench-ci"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\n{SLOW_TO_CLEAN_UP}")
    fake.chmod(0o755)
    env = {**os.environ, **runner, "KBENCH_CLI": str(fake), "KBENCH_BASE": "abc",
           "KBENCH_REPORT_DIR": str(tmp_path / "report")}
    step = subprocess.Popen([sys.executable, "-m", "kbench_ci.github.action", "compare"], env=env, cwd=PACKAGE_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=heed_stop_signals)
    try:
        deadline = time.monotonic() + 30
        while not (fake.parent / "started").exists():
            assert time.monotonic() < deadline and step.poll() is None, step.communicate()
            time.sleep(0.05)
        step.send_signal(signal.SIGINT)  # the runner's cancel: to the step's process
        stdout, stderr = step.communicate(timeout=30)
    finally:
        step.kill()
    assert (fake.parent / "cleaned-up").read_text() == str(int(signal.SIGINT)), "compare was killed mid-clean-up"
    assert step.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    assert "::warning::kbench-ci compare was stopped by SIGINT; it cleaned up and exited 130" in stdout
    assert outputs(runner)["exit-code"] == "130"


def test_compare_step_kills_a_compare_that_ignores_the_cancel(tmp_path: Path) -> None:
    """After the grace period the child is killed, so a cancelled job still ends."""
    argv = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"]
    # The cancel arrives while the step waits for compare: a timer sends it to this process.
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(action_steps._Stopped) as stopped:
            action_steps._run_inheriting(argv, tmp_path, grace_s=1.0)
    finally:
        timer.cancel()
    assert stopped.value.signum == signal.SIGINT and stopped.value.child_code == -signal.SIGKILL
    assert stopped.value.describe() == "SIGINT; it did not end within 1 s and was killed"
    assert time.monotonic() - started < 10


# -- item 2: a default (depth 1) checkout -------------------------------------------------------


class BranchedOrigin:
    """main: c0 ── m1 ── … ── m60        feature: c0 ── f1 ── f2   (a bare origin)"""

    def __init__(self, root: Path) -> None:
        upstream = root / "upstream"
        upstream.mkdir(parents=True)
        git(upstream, "init", "-q", "-b", "main")
        (upstream / "k.py").write_text("c0\n")
        git(upstream, "add", ".")
        git(upstream, "commit", "-q", "-m", "c0")
        self.c0 = git(upstream, "rev-parse", "HEAD")
        git(upstream, "checkout", "-q", "-b", "feature")
        for i in (1, 2):
            (upstream / "k.py").write_text(f"f{i}\n")
            git(upstream, "commit", "-q", "-am", f"f{i}")
        self.feature = git(upstream, "rev-parse", "HEAD")
        git(upstream, "checkout", "-q", "main")
        for i in range(1, 61):  # more than the first deepening step (50)
            (upstream / "m.txt").write_text(f"m{i}\n")
            git(upstream, "add", ".")
            git(upstream, "commit", "-q", "-m", f"m{i}")
        self.main = git(upstream, "rev-parse", "HEAD")
        self.origin = root / "origin.git"
        git(root, "clone", "-q", "--bare", str(upstream), str(self.origin))
        git(self.origin, "config", "uploadpack.allowReachableSHA1InWant", "true")
        self.root = root

    def checkout(self) -> Path:
        """What actions/checkout makes for a pull request: depth 1, one branch."""
        work = self.root / "checkout"
        git(self.root, "clone", "-q", "--depth=1", "--branch", "feature", self.origin.as_uri(), str(work))
        return work


@pytest.fixture
def branched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BranchedOrigin:
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    return BranchedOrigin(tmp_path / "git")


def test_resolve_deepens_a_depth_1_checkout_to_the_merge_base(tmp_path: Path, branched: BranchedOrigin,
                                                               runner: dict) -> None:
    work = branched.checkout()
    env = {**runner, **event(tmp_path, "pull_request", {
        "pull_request": {"number": 3, "base": {"sha": branched.main}, "head": {"sha": branched.feature}},
    })}
    result = action_steps.run_step("resolve", env, work)
    assert result.exit_code == 0, result.lines
    assert f"kbench-ci: merge base {branched.c0[:12]} is in the checkout" in result.lines
    assert git(work, "merge-base", branched.main, branched.feature) == branched.c0


def test_compare_deepens_a_shallow_clone_itself(branched: BranchedOrigin) -> None:
    from kbench_ci.git import GitRepo

    work = branched.checkout()
    git(work, "fetch", "-q", "--depth=1", "origin", branched.main)
    resolved = GitRepo(work).resolve_revisions(branched.main, None)
    assert resolved.base_sha == branched.c0 and resolved.merge_base_of == branched.main


def test_compare_says_how_to_deepen_when_it_cannot_fetch(branched: BranchedOrigin) -> None:
    from kbench_ci.errors import GitError
    from kbench_ci.git import GitRepo

    work = branched.checkout()
    git(work, "fetch", "-q", "--depth=1", "origin", branched.main)
    git(work, "remote", "set-url", "origin", (branched.root / "gone.git").as_uri())
    with pytest.raises(GitError) as info:
        GitRepo(work).resolve_revisions(branched.main, None)
    assert "no common ancestor in this shallow clone, and fetching more history failed" in info.value.message
    assert "git fetch --unshallow origin" in (info.value.hint or "")
    assert "--base-mode tip" in (info.value.hint or "")


def test_the_shallow_hint_names_a_refspec_that_a_single_branch_clone_can_fetch(branched: BranchedOrigin) -> None:
    """`git fetch origin main` in a single-branch clone never creates origin/main."""
    from kbench_ci.errors import GitError
    from kbench_ci.git import GitRepo

    work = branched.checkout()
    with pytest.raises(GitError) as info:
        GitRepo(work).resolve("origin/main")
    hint = info.value.hint or ""
    fetch = hint[hint.index("git fetch"):hint.index(";", hint.index("git fetch"))]
    assert fetch == "git fetch origin +refs/heads/main:refs/remotes/origin/main"
    git(work, *fetch.split()[1:])  # the hint works as written
    assert GitRepo(work).resolve("origin/main") == branched.main


# -- item 3: the comment step under a rate limit ---------------------------------------------------


def test_comment_step_under_a_lasting_rate_limit_is_a_warning(tmp_path: Path, runner: dict,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.integration.github.github_fake import FakeGitHub

    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    github = FakeGitHub(rate_limited_times=100, rate_limit_status=429,
                        rate_limit_headers={"Retry-After": "3600"}).start()
    try:
        report = fake_report(tmp_path / "report", slower=1)
        env = {**runner, "KBENCH_REPORT_DIR": str(report), "KBENCH_PR_NUMBER": "7",
               "KBENCH_COMMENT_MODE": "always", "GITHUB_TOKEN": "t0ken", "GITHUB_API_URL": github.api_url}
        result = action_steps.run_step("comment", env, tmp_path)
    finally:
        github.stop()
    assert result.exit_code == 0
    assert result.lines[0].startswith("::warning::kbench-ci: no comment on o/r#7:") and "rate limited" in result.lines[0]
    assert outputs(runner) == {"comment-url": "", "comment-action": "rate-limited"}


# -- item 5: pull_request_target ---------------------------------------------------------------------


def test_resolve_refuses_pull_request_target_unless_allowed(tmp_path: Path, repos: Repos, runner: dict) -> None:
    work = repos.full()
    env = {**runner, **event(tmp_path, "pull_request_target", {
        "pull_request": {"number": 7, "base": {"sha": repos.c1}, "head": {"sha": repos.c2}},
    })}
    refused = action_steps.run_step("resolve", env, work)
    assert refused.exit_code == 2
    (line,) = refused.lines
    assert line.startswith("::error::kbench-ci resolve: refusing to benchmark on pull_request_target")
    assert "allow-pull-request-target: true" in line
    assert outputs(runner) == {}  # nothing for later steps: compare never runs

    allowed = action_steps.run_step("resolve", {**env, "KBENCH_ALLOW_PULL_REQUEST_TARGET": "true"}, work)
    assert allowed.exit_code == 0, allowed.lines
    assert outputs(runner)["head-sha"] == repos.c2
