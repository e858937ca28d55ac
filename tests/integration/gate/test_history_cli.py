"""`kbench-ci history record` / `history show` end to end in a real repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def kbench(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "kbench_ci", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def _main_commits(root: Path, count: int) -> list[str]:
    """A repository on main with ``count`` commits; their shas, oldest first (`history record`
    records only commits on the main branch)."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=root, check=True)
    shas = []
    for n in range(count):
        # A day apart: commits made within one second would tie in the history's date order.
        date = f"2024-01-{n + 1:02d}T00:00:00"
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", f"c{n}"],
                       cwd=root, check=True, env={**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                                   text=True).stdout.strip())
    return shas


def test_record_eight_commits_then_show_the_step(tmp_path: Path) -> None:
    report = tmp_path / "report"
    report.mkdir()
    shas = _main_commits(tmp_path, 8)
    for n, sha in enumerate(shas):
        median = 0.100 if n < 4 else 0.115  # 15% slower from the fifth commit on
        (report / "results.json").write_text(json.dumps({
            "schema": "kbench-ci/run", "schema_version": 1, "environment": {"gpu_name": "NVIDIA H200"},
            "cases": [{"case_id": "vadd[N=1024]", "median_ms": median, "n_samples": 100}],
        }))
        done = kbench(tmp_path, "history", "record", "--report", str(report), "--commit", sha)
        assert done.returncode == 0, done.stderr
    again = kbench(tmp_path, "history", "record", "--report", str(report), "--commit", shas[-1])
    assert again.returncode == 0, again.stderr
    shown = kbench(tmp_path, "history", "show", "--output-dir", str(tmp_path / "site"), "--kernel", "vadd")
    assert shown.returncode == 0, shown.stderr
    assert f"step: vadd[N=1024] on NVIDIA H200: +15.0% at {shas[3][:12]}..{shas[4][:12]}" in shown.stdout
    assert "| 8 |" in (tmp_path / "site" / "history.md").read_text()  # 8 commits, not 9 entries
    assert subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path, capture_output=True, text=True).stdout.split() == [
        "??", "report/", "??", "site/"]


def test_record_without_results_is_bad_usage(tmp_path: Path) -> None:
    done = kbench(tmp_path, "history", "record", "--report", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert "results.json not found" in done.stderr


def test_a_plain_run_records_its_commit_and_a_dirty_one_says_so(tmp_path: Path) -> None:
    """`history record --report` of a `run` needed --commit."""
    from tests.support.suite_repo import make_suite_repo

    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}]}])
    head = repo.git("rev-parse", "HEAD")
    out = tmp_path / "out"
    done = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "results.json").read_text())["commit"] == {"sha": head, "dirty": False}
    recorded = kbench(repo.root, "history", "record", "--report", str(out))
    assert recorded.returncode == 0, recorded.stderr
    assert head in repo.git("ls-tree", "-r", "--name-only", "kbench-history")

    (repo.root / "kernels" / "scale.py").write_text((repo.root / "kernels" / "scale.py").read_text() + "\n# edited\n")
    dirty = tmp_path / "dirty"
    assert kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(dirty)).returncode == 0
    assert json.loads((dirty / "results.json").read_text())["commit"] == {"sha": head, "dirty": True}
    for extra in ((), ("--commit", head)):
        refused = kbench(repo.root, "history", "record", "--report", str(dirty), *extra)
        assert refused.returncode == 2
        assert f"measured on a working tree that differed from {head[:12]}" in refused.stderr
    forced = kbench(repo.root, "history", "record", "--report", str(dirty), "--force")
    assert forced.returncode == 0, forced.stderr


def test_results_of_another_commit_than_commit_are_refused_unless_forced(tmp_path: Path) -> None:
    """Results measured on a branch were recorded under main's sha."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    report = tmp_path / "report"
    report.mkdir()
    measured, main = "a" * 40, "b" * 40
    (report / "results.json").write_text(json.dumps({
        "schema": "kbench-ci/compare", "schema_version": 1, "environment": {"gpu_name": "NVIDIA H200"},
        "head": {"sha": measured, "description": f"feature @ {measured[:12]}"}, "cases": [],
    }))
    refused = kbench(tmp_path, "history", "record", "--report", str(report), "--commit", main)
    assert refused.returncode == 2
    assert f"measured at {measured[:12]}, not at --commit {main[:12]}" in refused.stderr
    (report / "results.json").write_text(json.dumps({
        "schema": "kbench-ci/compare", "schema_version": 1, "environment": {"gpu_name": "NVIDIA H200"},
        "head": {"sha": measured, "description": f"working tree (dirty) at {measured[:12]}"}, "cases": [],
    }))
    dirty = kbench(tmp_path, "history", "record", "--report", str(report))
    assert dirty.returncode == 2 and "differed from aaaaaaaaaaaa" in dirty.stderr


def test_show_states_the_threshold_of_a_five_percent_suite(tmp_path: Path) -> None:
    """A 5% suite's history said "a step is a lasting change larger than 2%"."""
    report = tmp_path / "report"
    report.mkdir()
    for n, sha in enumerate(_main_commits(tmp_path, 8)):
        rounds = [[0.100 if n < 4 else 0.103] * 10]  # 3% slower from the fifth commit on: under 5%
        (report / "results.json").write_text(json.dumps({
            "schema": "kbench-ci/compare", "schema_version": 1, "environment": {"gpu_name": "NVIDIA H200"},
            "head": {"sha": sha, "description": f"main @ {sha[:12]}"},
            "cases": [{"case_id": "vadd[N=1024]", "threshold": 0.05, "head": {"status": "ok", "rounds_ms": rounds}}],
        }))
        done = kbench(tmp_path, "history", "record", "--report", str(report))
        assert done.returncode == 0, done.stderr
    shown = kbench(tmp_path, "history", "show", "--output-dir", str(tmp_path / "site"))
    assert shown.returncode == 0, shown.stderr
    assert "0 steps" in shown.stdout and "step:" not in shown.stdout
    text = (tmp_path / "site" / "history.md").read_text()
    assert "a step is a lasting change larger than 5%" in text and "larger than 2%" not in text


def _compare_results(report: Path, sha: str, *, passed: bool) -> None:
    report.mkdir(exist_ok=True)
    ok = {"status": "ok", "rounds_ms": [[0.1, 0.1, 0.1]]}
    (report / "results.json").write_text(json.dumps({
        "schema": "kbench-ci/compare", "schema_version": 1, "environment": {"gpu_name": "NVIDIA H200"},
        "head": {"sha": sha, "description": f"HEAD @ {sha[:12]}"},
        "gate": {"passed": passed, "complete": True, "summary": "1 slower — gate FAILED" if not passed else "gate passed",
                 "counts": {}},
        "cases": [{"case_id": "vadd[N=1024]", "threshold": 0.02, "head": ok}],
    }))


def test_a_feature_branchs_results_are_refused_in_one_line(tmp_path: Path) -> None:
    """`history record` took a failing feature branch's results without a word."""
    (main,) = _main_commits(tmp_path, 1)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "checkout", "-q", "-b", "feature"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "feature"], cwd=tmp_path, check=True)
    feature = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    report = tmp_path / "report"
    _compare_results(report, feature, passed=False)
    refused = kbench(tmp_path, "history", "record", "--report", str(report))
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert f"{feature[:12]} is not on main" in refused.stderr and "--force" in refused.stderr
    assert subprocess.run(["git", "branch", "--list", "kbench-history"], cwd=tmp_path, capture_output=True,
                          text=True).stdout == ""  # nothing recorded
    # The history of another branch, named; or anyway, forced.
    assert kbench(tmp_path, "history", "record", "--report", str(report), "--main-branch", "feature").returncode == 0
    assert kbench(tmp_path, "history", "record", "--report", str(report), "--force", "--branch", "h2").returncode == 0
    # A commit this clone does not hold cannot be shown to be on main.
    _compare_results(report, "f" * 40, passed=True)
    unknown = kbench(tmp_path, "history", "record", "--report", str(report))
    assert unknown.returncode == 2 and "cannot tell whether ffffffffffff is on main" in unknown.stderr
    del main


def test_a_failed_gate_on_main_is_recorded_and_said(tmp_path: Path) -> None:
    """The history keeps what reached main, a regression too (the action records after exit 1),
    but the line says the gate failed."""
    (main,) = _main_commits(tmp_path, 1)
    report = tmp_path / "report"
    _compare_results(report, main, passed=False)
    done = kbench(tmp_path, "history", "record", "--report", str(report))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    assert "their gate failed (1 slower — gate FAILED): recorded all the same" in done.stdout
    _compare_results(report, main, passed=True)
    again = kbench(tmp_path, "history", "record", "--report", str(report))
    assert again.returncode == 0 and "gate failed" not in again.stdout
