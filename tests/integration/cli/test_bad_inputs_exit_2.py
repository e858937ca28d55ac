"""Values that were accepted, each now one line naming the option and the
fix, exit 2, no traceback: a --rounds past the bound, a --cache-dir that is a file, --no-cache
with --cache-dir, a cache_dir that is a system folder, `history show` with no history branch,
`comment --pr` of 0 or less."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kbench_ci.suite.settings import MAX_ADAPTIVE_ROUNDS
from tests.support.suite_repo import TempRepo, make_suite_repo

ROOT = Path(__file__).resolve().parents[3]
HUGE = "99999999999999999999"


def kbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    environment.pop("KBENCH_CI_CACHE_DIR", None)
    environment.pop("KBENCH_CI_NO_CACHE", None)
    return subprocess.run([sys.executable, "-m", "kbench_ci", *args], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=120)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("kbench-ci: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def repo(tmp_path: Path) -> TempRepo:
    return make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}]}])


@pytest.mark.parametrize("command", [("run",), ("compare", "--base", "main")])
@pytest.mark.parametrize("rounds", [HUGE, str(MAX_ADAPTIVE_ROUNDS + 1), "0"])
def test_rounds_past_the_bound(repo: TempRepo, tmp_path: Path, command: tuple[str, ...], rounds: str) -> None:
    done = kbench(*command, "--rounds", rounds, "--device", "cpu", "--output-dir", str(tmp_path / "out"), cwd=repo.root)
    line = one_error_line(done)
    bound = f"must be at most {MAX_ADAPTIVE_ROUNDS}, got {rounds}" if rounds != "0" else "must be >= 1, got 0"
    assert line == (f"kbench-ci: error: --rounds {bound} (give 1 to {MAX_ADAPTIVE_ROUNDS}; compare adds rounds by "
                    "itself until the verdict is decided (--time-budget))"), line


def test_rounds_past_the_bound_in_kbench_toml(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}]}],
                           defaults={"rounds": MAX_ADAPTIVE_ROUNDS + 1})
    line = one_error_line(kbench("run", "--device", "cpu", "--output-dir", str(tmp_path / "out"), cwd=repo.root))
    assert f'"rounds" must be at most {MAX_ADAPTIVE_ROUNDS}, got {MAX_ADAPTIVE_ROUNDS + 1}' in line, line


def test_a_cache_dir_that_is_a_file(repo: TempRepo, tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a folder\n")
    done = kbench("run", "--device", "cpu", "--cache-dir", str(file), "--output-dir", str(tmp_path / "out"), cwd=repo.root)
    line = one_error_line(done)
    assert f"--cache-dir {file} is a file, not a folder (give a folder of your own" in line, line
    assert file.read_text() == "not a folder\n"


def test_no_cache_with_a_cache_dir(repo: TempRepo, tmp_path: Path) -> None:
    done = kbench("run", "--device", "cpu", "--no-cache", "--cache-dir", str(tmp_path / "cache"),
                  "--output-dir", str(tmp_path / "out"), cwd=repo.root)
    line = one_error_line(done)
    assert "--no-cache and --cache-dir contradict each other" in line, line
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("folder", ["/etc", "/usr", "/"])
def test_a_system_folder_as_cache_dir_in_kbench_toml(tmp_path: Path, folder: str) -> None:
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}]}],
                           defaults={"cache_dir": folder})
    done = kbench("run", "--device", "cpu", "--isolation", "judge", "--output-dir", str(tmp_path / "out"), cwd=repo.root)
    line = one_error_line(done)
    assert f"cache_dir in kbench.toml {folder} is a system folder" in line, line
    assert not Path(folder, "triton").exists() and not Path(folder, "inductor").exists()


def test_history_show_without_a_history_branch(repo: TempRepo, tmp_path: Path) -> None:
    done = kbench("history", "show", "--output-dir", str(tmp_path / "site"), cwd=repo.root)
    line = one_error_line(done)
    assert "no history branch 'kbench-history' in this repository" in line, line
    assert "kbench-ci history record --report DIR" in line, line
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("number", ["-1", "0"])
def test_comment_pr_must_be_a_pull_request_number(tmp_path: Path, number: str) -> None:
    (tmp_path / "benchmark.md").write_text("# report\n")
    done = kbench("comment", "--report", str(tmp_path), "--pr", number, "--dry-run", cwd=tmp_path)
    line = one_error_line(done)
    assert line.startswith(f"kbench-ci: error: --pr must be >= 1, got {number}"), line


@pytest.mark.parametrize("command", [("run",), ("compare", "--base", "main")])
@pytest.mark.parametrize(("seeds", "said"), [
    ("", "--seeds must be whole numbers separated by commas, got ''"),
    ("12,abc", "--seeds must be whole numbers separated by commas, got '12,abc'"),
    ("-3", "--seeds must be >= 0, got -3"),
])
def test_seeds_that_are_not_a_list_of_seeds(repo: TempRepo, tmp_path: Path, command: tuple[str, ...], seeds: str,
                                            said: str) -> None:
    done = kbench(*command, "--seeds", seeds, "--device", "cpu", "--output-dir", str(tmp_path / "out"), cwd=repo.root)
    line = one_error_line(done)
    assert line.startswith(f"kbench-ci: error: {said}"), line
    assert "(e.g. --seeds 1234,5678" in line or "must be >= 0" in line, line  # the fix, where it is not the bound
    assert not (tmp_path / "out" / "results.json").exists()  # refused before anything ran
