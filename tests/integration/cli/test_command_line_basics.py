"""kbench-ci --version, -h on every command, shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci import __version__

ROOT = Path(__file__).resolve().parents[3]
#: the console script, as a user runs it (``python -m kbench_ci`` names itself differently)
CLI = str(Path(sys.executable).with_name("kbench-ci"))


def kbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    done = kbench(flag)
    assert done.returncode == 0 and done.stdout == f"kbench-ci {__version__}\n", done.stderr


@pytest.mark.parametrize("command", [(), ("bench",), ("build",), ("run",), ("compare",), ("comment",)])
def test_dash_h_is_help_everywhere(command: tuple[str, ...]) -> None:
    short, long = kbench(*command, "-h"), kbench(*command, "--help")
    assert short.returncode == 0, short.stderr
    assert short.stdout == long.stdout and "Usage: kbench-ci" in short.stdout


def test_show_completion_prints_a_script_for_the_shell() -> None:
    # Typer finds the shell from the process tree (shellingham): start it from bash. The
    # `; exit` keeps bash from exec-ing the command in its own place (then no bash is its parent).
    done = subprocess.run(
        ["bash", "-c", f'"{CLI}" --show-completion; exit $?'], capture_output=True, text=True,
        timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "_kbench_ci_completion()" in done.stdout and "complete " in done.stdout
    assert "--show-completion" in kbench("--help").stdout and "--install-completion" in kbench("--help").stdout
