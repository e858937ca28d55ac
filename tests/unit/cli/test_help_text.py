"""Help at 80 columns keeps every option's name whole, shows no value
placeholder after a flag (no `<bool>` after -h/--help), and no `<list[str]>` after an option."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kbench_ci.cli.app import app

COMMANDS = [(), ("bench",), ("build",), ("comment",), ("run",), ("compare",), ("merge",), ("history",),
            ("history", "record"), ("history", "show")]


def _command(path: tuple[str, ...]) -> Any:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # typer's own (vendored) Click group
    return command


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "kbench-ci")
def test_help_at_80_columns_keeps_names_whole_and_flags_bare(path: tuple[str, ...]) -> None:
    done = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert done.exit_code == 0, done.output
    text = done.output
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "<bool>" not in text and "<list[str]>" not in text and "…" not in text
    command = _command(path)
    left_out = getattr(command, "advanced", frozenset())  # shown by --help-all instead
    for param in (p for p in command.params if not getattr(p, "hidden", False) and p.name not in left_out):
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("--"):
                assert name in text, f"{name} is cut or missing in `{' '.join(path)} -h`"


def test_long_option_lists_are_grouped_into_panels() -> None:
    for path in (("bench",), ("run",), ("compare",)):
        text = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"}).output
        panels = [line for line in text.splitlines() if line.startswith("╭─")]
        assert len(panels) >= 4, f"{path}: {panels}"


@pytest.mark.parametrize(("path", "most"), [(("compare",), 55), (("run",), 40)])
def test_help_shows_the_common_options_and_help_all_every_one(path: tuple[str, ...], most: int) -> None:
    """`compare --help` was 122 lines at 80 columns (21 options in 7 panels); -h now
    fits a screen with what a first compare uses, and --help-all shows every option."""
    short = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80", "TERM": "dumb"})
    every = CliRunner().invoke(app, [*path, "--help-all"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert short.exit_code == 0 and every.exit_code == 0, short.output + every.output
    assert len(short.output.splitlines()) <= most, short.output
    assert "--help-all" in short.output and "--isolation" in short.output and "--rounds" not in short.output
    assert len(every.output.splitlines()) > len(short.output.splitlines())
    internal = {"--accept-reason", "--job-note"}  # the action's own
    for param in _command(path).params:
        for name in param.opts:
            if name.startswith("--") and name not in internal:
                assert name in every.output, f"{name} missing from `{' '.join(path)} --help-all`"
