"""Progress a CI log can use: a line per finished case with its verdict, change and
seconds; a heartbeat with the elapsed time and an estimate of the time left; a bar on a terminal."""

from __future__ import annotations

import time

import pytest

from kbench_ci.cli.console import ProgressLine, suite_progress
from kbench_ci.gate.progress import SuiteProgress


def test_each_case_ends_with_a_line_of_verdict_change_and_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    progress = ProgressLine(tty=False, heartbeat_s=3600)
    on_progress = suite_progress(progress)
    on_progress(SuiteProgress(0, 2, "", "start"))
    on_progress(SuiteProgress(1, 2, "vadd[N=1024]", "build"))
    on_progress(SuiteProgress(
        1, 2, "vadd[N=1024]", "done", outcome="unchanged", detail="+0.12% [-0.30%, +0.51%], p = 0.4", seconds=7.26,
    ))
    progress.close()
    lines = capsys.readouterr().err.splitlines()
    assert "kbench-ci: [1/2] vadd[N=1024]: unchanged — +0.12% [-0.30%, +0.51%], p = 0.4 (7.3 s)" in lines


def test_a_log_gets_a_heartbeat_with_elapsed_time_and_time_left(capsys: pytest.CaptureFixture[str]) -> None:
    now = [1000.0]
    progress = ProgressLine(tty=False, heartbeat_s=0.05)
    on_progress = suite_progress(progress, clock=lambda: now[0])
    on_progress(SuiteProgress(0, 4, "", "start"))
    deadline = time.monotonic() + 5
    while "time left known after the first case" not in capsys.readouterr().err and time.monotonic() < deadline:
        time.sleep(0.02)
    now[0] += 60.0  # one case took a minute: three more take about three
    on_progress(SuiteProgress(1, 4, "a[N=1]", "done", outcome="unchanged", seconds=60.0))
    on_progress(SuiteProgress(2, 4, "b[N=1]", "build"))
    seen = ""
    while "about 3m00s left" not in seen and time.monotonic() < deadline:
        time.sleep(0.02)
        seen += capsys.readouterr().err
    progress.close()
    assert "kbench-ci: … 1m00s elapsed, 1/4 cases done, now b[N=1]; about 3m00s left" in seen
    # Closed: no more beats.
    capsys.readouterr()
    time.sleep(0.2)
    assert capsys.readouterr().err == ""


def test_the_first_beat_comes_without_any_case_event(capsys: pytest.CaptureFixture[str]) -> None:
    """A first case that builds and starts the worker for minutes is not silent either."""
    progress = ProgressLine(tty=False, heartbeat_s=0.05)
    suite_progress(progress)(SuiteProgress(0, 3, "", "start"))
    time.sleep(0.3)
    progress.close()
    assert "0/3 cases done; time left known after the first case" in capsys.readouterr().err


def test_a_terminal_gets_a_bar_and_the_case_lines_above_it(capsys: pytest.CaptureFixture[str]) -> None:
    progress = ProgressLine(tty=True, heartbeat_s=0.05)
    on_progress = suite_progress(progress)
    on_progress(SuiteProgress(0, 2, "", "start"))
    assert progress._bar is not None  # noqa: SLF001  (rich's bar, not the heartbeat thread)
    assert progress._heartbeat is None  # noqa: SLF001
    on_progress(SuiteProgress(1, 2, "a[N=1]", "done", outcome="slower", detail="+5.00%", seconds=2.0))
    progress.close()
    assert progress._bar is None  # noqa: SLF001
    assert "[1/2] a[N=1]: slower — +5.00% (2.0 s)" in capsys.readouterr().err
