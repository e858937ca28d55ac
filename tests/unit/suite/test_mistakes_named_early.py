"""Mistakes named in one line with the fix in the command's own words: a
TOML file that ends inside an array names the line; ``--base mian`` suggests ``main``; ``build``
without a GPU names its ``--arch`` flag."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench_ci.cli.app import app
from kbench_ci.cuda import build as build_mod
from kbench_ci.errors import ConfigError, GitError
from kbench_ci.git import GitRepo
from kbench_ci.suite.loader import load_suite

UNCLOSED = """\
[defaults]
rounds = 2

[[kernels]]
name = "saxpy"
solution = "kernels/saxpy.py"
ref = "kernels/saxpy_ref.py"
shapes = [{N = 2048},
  {N = 4096}
"""


def test_toml_ending_inside_an_array_names_the_line_it_opens(tmp_path: Path) -> None:
    (tmp_path / "kbench.toml").write_text(UNCLOSED)
    with pytest.raises(ConfigError) as info:
        load_suite(tmp_path / "kbench.toml")
    message = info.value.one_line()
    assert "end of document" not in message, message
    assert "(at line 8: the file ends inside what begins there)" in message, message
    assert "close the array, inline table or string" in message


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                   env={"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root), "PATH": "/usr/bin:/bin"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@e.invalid", "commit", "-q", "--allow-empty", "-m", "one")
    _git(root, "branch", "feature-x")
    return root


@pytest.mark.parametrize(("typed", "meant"), [("mian", "main"), ("mian~1", "main~1"), ("featrue-x", "feature-x")])
def test_a_mistyped_base_suggests_the_closest_branch(repo: Path, typed: str, meant: str) -> None:
    with pytest.raises(GitError) as info:
        GitRepo(repo).resolve(typed)
    assert (info.value.hint or "").startswith(f'did you mean "{meant}"? Otherwise: '), info.value.one_line()


def test_a_name_close_to_nothing_keeps_the_fetch_hint(repo: Path) -> None:
    with pytest.raises(GitError) as info:
        GitRepo(repo).resolve("zzzzzz")
    assert "did you mean" not in (info.value.hint or "")


def test_build_without_a_gpu_names_its_arch_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBENCH_CUDA_ARCH", raising=False)
    monkeypatch.setattr(build_mod, "cuda_devices", lambda: ())
    source = tmp_path / "k.cu"
    source.write_text('extern "C" void solve(float* x, int N) {}\n')
    result = CliRunner().invoke(app, ["build", str(source)])
    assert result.exit_code == 3, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("kbench-ci: error:")]
    assert "pass --arch sm_90" in line, line
    assert line.index("--arch") < line.index("KBENCH_CUDA_ARCH"), line
