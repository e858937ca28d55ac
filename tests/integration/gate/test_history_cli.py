"""`kbench-ci history record` / `history show` end to end in a real repository (issue 14)."""

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


def test_record_eight_commits_then_show_the_step(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "s"],
                   cwd=tmp_path, check=True)
    report = tmp_path / "report"
    report.mkdir()
    shas = [f"{n:012x}".ljust(40, "b") for n in range(8)]
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
    """Issue 25, item 10: `history record --report` of a `run` needed --commit."""
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
    """Issue 26, item 16: results measured on a branch were recorded under main's sha."""
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
    """Issue 39.1: a 5% suite's history said "a step is a lasting change larger than 2%"."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "s"],
                   cwd=tmp_path, check=True)
    report = tmp_path / "report"
    report.mkdir()
    for n in range(8):
        sha = f"{n:012x}".ljust(40, "c")
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
