"""Issue 26, item 12: help at 80 columns keeps every option's name whole, shows no value
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
    for param in (p for p in _command(path).params if not getattr(p, "hidden", False)):
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("--"):
                assert name in text, f"{name} is cut or missing in `{' '.join(path)} -h`"


def test_long_option_lists_are_grouped_into_panels() -> None:
    for path in (("bench",), ("run",), ("compare",)):
        text = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"}).output
        panels = [line for line in text.splitlines() if line.startswith("╭─")]
        assert len(panels) >= 4, f"{path}: {panels}"
