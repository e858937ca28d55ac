"""Kernel paths must stay inside the repository: a file outside it, or a link
to one, is the same file for base and head (or none in the base's worktree), so the kernel would
always be "added" and could never fail the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.errors import ConfigError, ExitCode
from kbench_ci.suite.loader import load_suite

SUITE = """\
[[kernels]]
name = "k"
solution = "{solution}"
ref = "kernels/k_ref.py"
shapes = [{{N = 8}}]
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)  # what find_config and the loader look for
    (root / "bench" / "kernels").mkdir(parents=True)
    (root / "bench" / "kernels" / "k_ref.py").write_text("# ref\n")
    (root / "bench" / "kernels" / "k.py").write_text("# kernel\n")
    (root / "shared").mkdir()
    (root / "shared" / "common.py").write_text("# shared kernel\n")
    (tmp_path / "outside.py").write_text("# not in the repository\n")
    return root


def _load(repo: Path, solution: str, *, check_files: bool = True):
    config = repo / "bench" / "kbench.toml"
    config.write_text(SUITE.format(solution=solution))
    return load_suite(config, check_files=check_files)


@pytest.mark.parametrize("check_files", [True, False])  # False: how compare reads the base's suite
@pytest.mark.parametrize(("solution", "expected"), [
    ("../../outside.py", "is outside the repository"),
    ("kernels/../../../outside.py", "is outside the repository"),
    ("/etc/hostname", "must be relative to the config file's directory"),
    ("kernels/link.py", "is a link to"),
])
def test_a_path_leaving_the_repository_is_a_config_error(repo: Path, solution: str, expected: str,
                                                         check_files: bool) -> None:
    (repo / "bench" / "kernels" / "link.py").symlink_to(repo.parent / "outside.py")
    with pytest.raises(ConfigError) as info:
        _load(repo, solution, check_files=check_files)
    assert info.value.exit_code == ExitCode.USAGE
    message = info.value.one_line()
    assert 'kernels[0] ("k"): "solution"' in message and expected in message and "\n" not in message
    if "/etc" not in solution:
        assert f"the repository {repo}" in message and "keep kernel files inside the repository" in message


def test_paths_inside_the_repository_are_fine_even_above_the_config(repo: Path) -> None:
    (repo / "bench" / "kernels" / "alias.py").symlink_to(repo / "shared" / "common.py")
    assert _load(repo, "../shared/common.py").kernels[0].solution.resolve() == repo / "shared" / "common.py"
    assert _load(repo, "kernels/alias.py").kernels[0].solution.name == "alias.py"


def test_without_a_repository_the_config_folder_is_the_boundary(tmp_path: Path) -> None:
    (tmp_path / "suite" / "kernels").mkdir(parents=True)
    (tmp_path / "suite" / "kernels" / "k_ref.py").write_text("")
    (tmp_path / "k.py").write_text("")
    config = tmp_path / "suite" / "kbench.toml"
    config.write_text(SUITE.format(solution="../k.py"))
    with pytest.raises(ConfigError, match="is outside the repository"):
        load_suite(config)
