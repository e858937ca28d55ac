"""A kbench.toml nested deeper than any suite: one line naming the file and
the fix, exit 2, no RecursionError traceback, however deep."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench_ci.cli.app import app
from kbench_ci.errors import ConfigError
from kbench_ci.suite.loader import load_suite
from kbench_ci.suite.settings import MAX_CONFIG_DEPTH

SUITE = """\
[[kernels]]
name = "saxpy"
solution = "saxpy.py"
ref = "ref.py"
shapes = [{N = 1024}]
"""


def _nested(depth: int) -> str:
    """A suite with one ``[defaults]`` value nested ``depth`` deep (``[defaults]`` itself: 1)."""
    return f"[defaults]\nseed = {'[' * (depth - 1)}{']' * (depth - 1)}\n" + SUITE


@pytest.mark.parametrize("depth", [MAX_CONFIG_DEPTH + 1, 100_000])
def test_a_config_nested_too_deep_is_one_line_naming_the_file(tmp_path: Path, depth: int) -> None:
    config = tmp_path / "kbench.toml"
    config.write_text(_nested(depth))
    with pytest.raises(ConfigError) as info:
        load_suite(config, check_files=False)
    message = info.value.one_line()
    assert message.startswith(f"{config}: arrays and tables nest more than 32 deep"), message
    assert "remove the extra brackets" in message, message


def test_nesting_up_to_the_bound_is_left_to_the_value_s_own_rule(tmp_path: Path) -> None:
    config = tmp_path / "kbench.toml"
    config.write_text(_nested(MAX_CONFIG_DEPTH))
    with pytest.raises(ConfigError, match='"seed" must be an integer, got an array'):
        load_suite(config, check_files=False)


def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "kbench.toml"
    config.write_text(_nested(100_000))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "--config", str(config), "--device", "cpu",
                                      "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, RecursionError)
    (line,) = [line for line in result.output.splitlines() if line.startswith("kbench-ci: error:")]
    assert "nest more than 32 deep" in line, result.output
