"""A pull request's words in the job's log: a GitHub Actions runner reads every line a step
writes (stdout and stderr) and acts on those that start with ``::`` (or ``##[``), after any
spaces. A head whose error message holds a line break and ``::add-mask::FAILED`` would hide that
word for the rest of the job, its outputs included; ``::stop-commands::`` would silence the
step's own commands. Every line kbench-ci prints goes through ``console.log_safe``."""

from __future__ import annotations

import re

import pytest

from kbench_ci.cli.console import ProgressLine, err, log_safe, out, suite_progress
from kbench_ci.gate.progress import SuiteProgress
from kbench_ci.measure.reference import describe_error

#: what a cheating head puts in its exception: each line break kind the runner ends a line at
PAYLOAD = ("boom\n::add-mask::FAILED\r::stop-commands::x0\r\n  ::notice title=kbench-ci::3 unchanged — gate passed"
           "\n##[add-mask]failed")


def _commands(text: str) -> list[str]:
    """The lines a runner would act on: it ends lines at \\n, \\r and \\r\\n and trims them."""
    return [line for line in re.split(r"\r\n|\r|\n", text) if line.strip().startswith(("::", "##["))]


def test_no_line_of_a_message_is_a_workflow_command() -> None:
    assert len(_commands(PAYLOAD)) == 4
    safe = log_safe(PAYLOAD)
    assert _commands(safe) == []
    assert "::add-mask::FAILED" in safe and "boom" in safe  # the words stay, behind ": "
    assert log_safe("kbench-ci: [1/2] vadd: unchanged") == "kbench-ci: [1/2] vadd: unchanged"


def test_stderr_and_stdout_lines_and_a_cases_progress_line_are_log_safe(capsys: pytest.CaptureFixture[str]) -> None:
    err(f"kbench-ci: error: {PAYLOAD}")
    out(f"# report\n{PAYLOAD}")
    progress = ProgressLine(tty=False, heartbeat_s=3600)
    on_progress = suite_progress(progress)
    on_progress(SuiteProgress(0, 1, "", "start"))
    on_progress(SuiteProgress(1, 1, "vadd[N=1024]", "done", outcome="failed", detail=PAYLOAD, seconds=1.0))
    progress.close()
    captured = capsys.readouterr()
    assert "FAILED" in captured.err and "FAILED" in captured.out
    assert _commands(captured.err) == [] and _commands(captured.out) == []


def test_an_errors_description_is_one_line_whatever_its_class_and_file_are_named() -> None:
    hostile = type("RuntimeError\n::add-mask::FAILED", (RuntimeError,), {})
    try:
        exec(compile("raise error('first\\nsecond')", "x.py\n::stop-commands::x0", "exec"), {"error": hostile})  # noqa: S102
    except RuntimeError as exc:
        text = describe_error(exc)
    assert "\n" not in text and "\r" not in text
    assert text.startswith("RuntimeError ::add-mask::FAILED: first") and "second" not in text


def test_a_bidi_override_and_an_escape_sequence_are_shown_as_escapes(capsys: pytest.CaptureFixture[str]) -> None:
    """The log's viewer plays ESC sequences (``ESC[2J`` clears it) and a bidi
    override turns the rest of a line around; every C0/C1 and bidi control but the line feed and
    the tab is written as its escape, so the reviewer sees that the head tried."""
    from kbench_ci.github.workflow_commands import workflow_command

    hostile = "boom \u202etxt.exe\u2066 \x1b[2J\x1b]8;;https://e.invalid\x07link\x9b1m\x00\x7f\u061c\u200f\tend"
    shown = "boom \\u202etxt.exe\\u2066 \\x1b[2J\\x1b]8;;https://e.invalid\\x07link\\x9b1m\\x00\\x7f\\u061c\\u200f\tend"
    assert log_safe(hostile) == shown
    assert log_safe("a\r::add-mask::FAILED") == "a\\x0d::add-mask::FAILED"  # no line of its own either
    err(f"kbench-ci: error: {hostile}")
    out(hostile)
    captured = capsys.readouterr()
    assert shown in captured.err and shown in captured.out
    assert workflow_command("error", f"x\n{hostile}") == f"::error::x%0A{shown}"
