"""The comment path under GitHub's rate limits, transient errors and hostile input,
against the loopback fake of GitHub's API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbench_ci.github.client import GitHubClient
from kbench_ci.github.comment import marker, run_comment
from tests.integration.github.github_fake import FakeGitHub
from tests.integration.github.test_github_comment import PR, REPO, TOKEN, _env, _report

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub().start()
    yield fake
    fake.stop()


class Clock:
    """A fake clock that sleeping moves forward, so waits cost no test time."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def time(self) -> float:
        return self.now


def _post(report: Path, github: FakeGitHub, clock: Clock, **env: str):
    client = GitHubClient(TOKEN, api_url=github.api_url, sleep=clock.sleep, clock=clock.time)
    return run_comment(report, from_artifact=None, repository=REPO, pr_number=PR, token=None, api_url=None,
                       env=_env(github, **env), client=client)


def kbench_comment(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "kbench_ci", "comment", *args], capture_output=True, text=True,
                          env=environment, timeout=60)


# -- item 3: rate limits and transient errors ------------------------------------------------------


def test_secondary_rate_limit_with_retry_after_is_waited_out(tmp_path: Path, github: FakeGitHub) -> None:
    github.rate_limited_times, github.rate_limit_headers = 1, {"Retry-After": "7"}
    clock = Clock()
    outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created"
    assert clock.slept == [7.0]
    assert len(github.comments_on(PR)) == 1


def test_primary_rate_limit_waits_until_the_reset(tmp_path: Path, github: FakeGitHub) -> None:
    clock = Clock()
    github.rate_limited_times, github.rate_limit_message = 1, "API rate limit exceeded for installation"
    github.rate_limit_headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(clock.now) + 20)}
    outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created"
    assert clock.slept == [21.0]  # until the reset, and a second more


def test_rate_limits_are_waited_for_at_most_15_minutes_in_all(tmp_path: Path, github: FakeGitHub) -> None:
    github.rate_limited_times, github.rate_limit_headers = 5, {"Retry-After": "400"}
    clock = Clock()
    outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "rate-limited"
    assert clock.slept == [400.0]  # the doubled wait, 800 s, would pass 900 s
    assert "waiting 800 s would pass the 900 s kbench-ci waits" in outcome.reason
    assert "kbench-ci waited 400 s for rate limits in this run" in outcome.reason
    assert "rate limited" in outcome.reason and "the gate's verdict stands" in outcome.reason
    assert "fork" not in outcome.reason
    assert github.comments_on(PR) == []


def test_a_429_that_names_no_time_is_waited_a_minute_and_the_log_says_so(
    tmp_path: Path, github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    """Such a 429 was never retried, though the docs say a minute; and the
    log said "the comment is skipped" before a wait after which it was posted."""
    github.rate_limited_times, github.rate_limit_status, github.rate_limit_headers = 1, 429, {}
    github.rate_limit_message = "Too Many Requests"
    clock = Clock()
    with caplog.at_level("WARNING"):
        outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created"
    assert clock.slept == [60.0]
    (record,) = [r for r in caplog.records if "rate limited" in r.getMessage()]
    assert record.getMessage().endswith("waiting 60 s, then sending it again")
    assert "skipped" not in record.getMessage()


@pytest.mark.parametrize(("status", "headers"), [(429, {"Retry-After": "3600"}), (403, {"Retry-After": "3600"})])
def test_a_lasting_rate_limit_skips_the_comment_and_exits_0(tmp_path: Path, github: FakeGitHub, status: int,
                                                            headers: dict[str, str]) -> None:
    github.rate_limited_times, github.rate_limit_status, github.rate_limit_headers = 100, status, headers
    github.rate_limit_message = "Too Many Requests"
    report = _report(tmp_path / "r")
    done = kbench_comment("--report", str(report), "--pr", str(PR), env=_env(github))
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("kbench-ci:")]
    assert line.startswith(f"kbench-ci: warning: no comment on {REPO}#{PR}: GitHub API GET")
    assert f"HTTP {status}: rate limited" in line and "fork" not in line
    assert TOKEN not in done.stderr + done.stdout
    assert len(github.calls()) == 1  # nothing waited for: the limit outlasts the minute


def test_a_post_answered_502_after_creating_the_comment_is_not_repeated(tmp_path: Path, github: FakeGitHub) -> None:
    github.create_then_fail_times = 1
    clock = Clock()
    outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created"
    assert len(github.comments_on(PR)) == 1
    assert len(github.calls("POST")) == 1  # the list showed it was created: no second POST
    assert outcome.url and outcome.url.endswith(f"#issuecomment-{github.comments_on(PR)[0]['id']}")


def test_a_post_answered_502_without_creating_is_retried(tmp_path: Path, github: FakeGitHub) -> None:
    github.post_fail_status, github.post_fail_times = 502, 1
    clock = Clock()
    outcome = _post(_report(tmp_path / "r"), github, clock)
    assert outcome.action == "created"
    assert len(github.calls("POST")) == 2 and len(github.comments_on(PR)) == 1
    assert clock.slept == [1.0]


def _pull_request_event(tmp_path: Path, *, head: str, base: str = REPO) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"pull_request": {
        "number": PR, "head": {"repo": {"full_name": head}}, "base": {"repo": {"full_name": base}},
    }}))
    return str(path)


def test_a_real_403_names_the_fork_only_for_a_fork(tmp_path: Path, github: FakeGitHub) -> None:
    github.forbid_writes = True
    report = _report(tmp_path / "r")
    own = _post(report, github, Clock(), GITHUB_EVENT_PATH=_pull_request_event(tmp_path, head=REPO))
    assert own.action == "forbidden"
    assert "permissions: pull-requests: write" in own.reason and "fork" not in own.reason
    fork = _post(report, github, Clock(), GITHUB_EVENT_PATH=_pull_request_event(tmp_path, head="someone/r"))
    assert fork.action == "forbidden"
    assert "comes from a fork" in fork.reason and "fork-pr-comment.yml" in fork.reason


def test_a_secondary_limit_without_a_time_waits_the_minute_github_advises(tmp_path: Path, github: FakeGitHub) -> None:
    github.rate_limited_times = 1  # 403 "You have exceeded a secondary rate limit.", no headers
    clock = Clock()
    assert _post(_report(tmp_path / "r"), github, clock).action == "created"
    assert clock.slept == [60.0]


# -- item 10: a token echoed back is never printed ----------------------------------------------------


def test_a_token_echoed_in_the_returned_url_is_masked(tmp_path: Path, github: FakeGitHub) -> None:
    github.echo_token_in_url = True
    report = _report(tmp_path / "r")
    done = kbench_comment("--report", str(report), "--pr", str(PR), env=_env(github))
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout + done.stderr
    assert done.stdout.startswith("comment created: https://github.example/") and "?token=***" in done.stdout
    # The update path: the stored comment's URL holds the token, in the list and the PATCH answer.
    (stored,) = github.comments_on(PR)
    assert TOKEN in stored["html_url"] and stored["body"].startswith(marker("default"))
    updated = _post(report, github, Clock())
    assert updated.action == "updated" and TOKEN not in (updated.url or "") + updated.reason
