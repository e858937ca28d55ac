"""`--shard K/N` and `kbench-ci merge` end to end on the CPU: a suite split into three
shards, each a real `compare` (or `run`) with worker subprocesses, merged into one report that
must hold the same cases and the same gate as one unsharded run of the same suite.

CPU timings are noise: with 2 rounds nothing can come out `slower` (see test_compare_cpu), and
whether a timed case reads `unchanged` or `inconclusive` may differ between two runs. The
correctness verdicts (incorrect, failed, added, removed) and the gate do not.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.gate.test_compare_cpu import kbench, results
from tests.support.suite_repo import TempRepo, make_suite_repo, suite_files

BASE = [
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}, {"N": 512}, {"N": 1024}]},
    {"name": "twice", "kind": "pytorch", "shapes": [{"N": 128}, {"N": 2048}]},
    {"name": "gone", "kind": "pytorch", "shapes": [{"N": 64}]},
]
HEAD = [
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}, {"N": 512}, {"N": 1024}]},
    {"name": "twice", "kind": "pytorch", "shapes": [{"N": 128}, {"N": 2048}], "variant": "wrong"},
    {"name": "fresh", "kind": "pytorch", "shapes": [{"N": 96}]},
]
#: verdicts that do not depend on timing noise
FIXED_VERDICTS = {"incorrect", "failed", "added", "removed", "fixed"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> TempRepo:
    """main: scale, twice, gone. feature (checked out): twice wrong, gone removed, fresh added."""
    repo = make_suite_repo(tmp_path_factory.mktemp("shards") / "repo", BASE)
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({**suite_files(HEAD), "kernels/gone.py": None, "kernels/gone_ref.py": None}, "feature")
    return repo


@pytest.fixture(scope="module")
def compares(repo: TempRepo, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One unsharded compare ("all") and the three shards ("1", "2", "3")."""
    root = tmp_path_factory.mktemp("compare-out")
    outs = {}
    for name, extra in (("all", ()), ("1", ("--shard", "1/3")), ("2", ("--shard", "2/3")), ("3", ("--shard", "3/3"))):
        out = root / name
        done = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out), *extra)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        outs[name] = out
    return outs


def _ids(data: dict) -> list[str]:
    return sorted(case["case_id"] for case in data["cases"])


def test_three_compare_shards_merge_into_the_unsharded_result(compares: dict[str, Path], tmp_path: Path) -> None:
    whole = results(compares["all"])
    shards = [results(compares[k]) for k in "123"]
    # Every case is in exactly one shard, and every shard knows the whole plan (both sides' union).
    assert sorted(c for s in shards for c in _ids(s)) == _ids(whole)
    assert all(s["shard"]["all_case_ids"] == _ids(whole) for s in shards)
    assert [(s["shard"]["index"], s["shard"]["count"]) for s in shards] == [(1, 3), (2, 3), (3, 3)]
    assert all(sorted(s["shard"]["case_ids"]) == _ids(s) for s in shards)
    assert whole["shard"] is None
    sizes = sorted(len(s["cases"]) for s in shards)
    assert sizes[-1] - sizes[0] <= 1  # balanced by count

    out = tmp_path / "merged"
    done = kbench(tmp_path, "merge", *(str(compares[k]) for k in "312"), "--output-dir", str(out))
    merged = results(out)
    print(f"\nunsharded: {whole['gate']['summary']}\nmerged:    {merged['gate']['summary']}")
    assert done.returncode == (0 if whole["gate"]["passed"] else 1), done.stdout + done.stderr
    assert merged["schema"] == "kbench-ci/compare"
    assert _ids(merged) == _ids(whole)
    assert merged["gate"]["passed"] == whole["gate"]["passed"] is False  # twice is incorrect
    assert merged["gate"]["complete"] is True and merged["merge"]["problems"] == []
    for kind in FIXED_VERDICTS | {"slower"}:
        assert merged["gate"]["counts"][kind] == whole["gate"]["counts"][kind], kind
    assert sorted(merged["gate"]["failing_cases"]) == sorted(whole["gate"]["failing_cases"])
    by_id = {case["case_id"]: case for case in whole["cases"]}
    for case in merged["cases"]:
        expected = by_id[case["case_id"]]["verdict"]
        if expected in FIXED_VERDICTS:
            assert case["verdict"] == expected, case["case_id"]
        else:
            assert case["verdict"] in ("unchanged", "inconclusive", "faster"), case["case_id"]
    # Read back and written again, every case is what its shard wrote (plus the GPU it ran on).
    written = {case["case_id"]: case for s in shards for case in s["cases"]}
    for case in merged["cases"]:
        assert {k: v for k, v in case.items() if k != "gpu"} == written[case["case_id"]], case["case_id"]
        assert case["gpu"] == "cpu"
    report = (out / "benchmark.md").read_text()
    (header,) = [line for line in report.splitlines() if line.startswith("| case ")]  # one table
    assert "GPU" not in header  # one GPU model: no GPU column
    assert merged["gate"]["summary"] in report and "Merged from shard 1/3" in report


def test_a_missing_shard_fails_the_merged_gate_and_is_named(compares: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "merged"
    done = kbench(tmp_path, "merge", str(compares["1"]), str(compares["3"]), "--output-dir", str(out), "--no-fail")
    assert done.returncode == 4, done.stdout + done.stderr  # --no-fail does not cover a missing shard
    assert "shard 2/3 is missing" in done.stderr
    merged = results(out)
    assert merged["gate"]["passed"] is False and merged["gate"]["complete"] is False
    assert "shard 2/3 is missing" in merged["gate"]["summary"]
    (problem,) = merged["merge"]["problems"]
    assert problem["shard"] == "2/3"
    assert problem["cases"] == _ids(results(compares["2"]))  # exactly the cases shard 2 measures
    assert "shard 2/3 is missing" in (out / "benchmark.md").read_text()


def test_duplicate_or_foreign_shards_fail_with_the_shard_named(compares: dict[str, Path], tmp_path: Path) -> None:
    twice = tmp_path / "again"
    shutil.copytree(compares["2"], twice)
    done = kbench(tmp_path, "merge", *(str(compares[k]) for k in "123"), str(twice), "--output-dir", str(tmp_path / "m1"))
    assert done.returncode == 4 and "shard 2/3 is there twice" in done.stderr
    # A shard of another commit.
    other = tmp_path / "other"
    shutil.copytree(compares["3"], other)
    data = json.loads((other / "results.json").read_text())
    data["head"]["sha"] = "f" * 40
    (other / "results.json").write_text(json.dumps(data))
    done = kbench(tmp_path, "merge", str(compares["1"]), str(compares["2"]), str(other), "--output-dir", str(tmp_path / "m2"))
    assert done.returncode == 4 and "shard 3/3" in done.stderr and "different commits" in done.stderr
    # An unsharded result with a shard: shard 1/1 and shards of 3.
    done = kbench(tmp_path, "merge", str(compares["all"]), str(compares["1"]), "--output-dir", str(tmp_path / "m3"))
    assert done.returncode == 4 and "shard 1/1" in done.stderr and "split into 1, shard 1/3 from one into 3" in done.stderr


def test_a_gpu_column_when_shards_ran_on_different_models(compares: dict[str, Path], tmp_path: Path) -> None:
    # The same results as if shard 2 had run on another runner: only the recorded model differs.
    shard_2 = tmp_path / "shard-2"
    shutil.copytree(compares["2"], shard_2)
    data = json.loads((shard_2 / "results.json").read_text())
    data["environment"]["gpu_name"] = "NVIDIA A100-SXM4-80GB"
    (shard_2 / "results.json").write_text(json.dumps(data))
    out = tmp_path / "merged"
    kbench(tmp_path, "merge", str(compares["1"]), str(shard_2), str(compares["3"]), "--output-dir", str(out))
    merged = results(out)
    report = (out / "benchmark.md").read_text()
    (header,) = [line for line in report.splitlines() if line.startswith("| case ")]
    assert "| GPU " in header
    rows = [line for line in report.splitlines() if line.startswith("| `")]
    assert sum("NVIDIA A100-SXM4-80GB" in row for row in rows) == len(data["cases"])
    gpus = {case["case_id"]: case["gpu"] for case in merged["cases"]}
    assert {gpus[c] for c in _ids(data)} == {"NVIDIA A100-SXM4-80GB"}
    assert set(gpus.values()) == {"NVIDIA A100-SXM4-80GB", "cpu"}
    # The geometric mean per GPU model, over that model's timed cases only.
    per_gpu = merged["merge"]["geomean_by_gpu"]
    assert set(per_gpu) == {"NVIDIA A100-SXM4-80GB", "cpu"}
    assert sum(g["cases"] for g in per_gpu.values()) == len(merged["cases"])
    assert merged["gate"]["geomean_ratio"] is None
    assert "Geometric mean of head/base per GPU model" in report


def _on_model(folder: Path, into: Path, model: str) -> Path:
    """``folder``'s results as if its job had run on ``model``: only the recorded GPU differs."""
    shutil.copytree(folder, into)
    data = json.loads((into / "results.json").read_text())
    data["environment"]["gpu_name"] = model
    (into / "results.json").write_text(json.dumps(data))
    return into


def test_the_whole_suite_on_two_gpu_models_merges_into_one_report(compares: dict[str, Path], tmp_path: Path) -> None:
    """A matrix of GPU models x shards: each model's three shards add up on their own, each case
    is reported once per model, and the gate is over both."""
    a100 = "NVIDIA A100-SXM4-80GB"
    others = [_on_model(compares[k], tmp_path / f"a100-{k}", a100) for k in "123"]
    out = tmp_path / "merged"
    whole = results(compares["all"])
    done = kbench(tmp_path, "merge", *(str(compares[k]) for k in "123"), *map(str, others), "--output-dir", str(out))
    assert done.returncode == 1, done.stdout + done.stderr  # `twice` is incorrect on both models
    merged = results(out)
    assert merged["merge"]["per_gpu_model"] is True and merged["merge"]["problems"] == []
    assert sorted((c["gpu"], c["case_id"]) for c in merged["cases"]) == sorted(
        (gpu, case_id) for gpu in ("cpu", a100) for case_id in _ids(whole))
    for kind in FIXED_VERDICTS:
        assert merged["gate"]["counts"][kind] == 2 * whole["gate"]["counts"][kind], kind
    assert merged["gate"]["complete"] is True and merged["gate"]["passed"] is False
    failing = sorted(merged["gate"]["failing_cases"])  # each with the model it failed on
    assert failing == sorted(f"{case_id} on {gpu}" for gpu in ("cpu", a100) for case_id in whole["gate"]["failing_cases"])
    assert set(merged["merge"]["geomean_by_gpu"]) == {"cpu", a100}
    report = (out / "benchmark.md").read_text()
    assert report.startswith("# kbench-ci compare\n") and report.count("\n# ") == 0  # one document
    assert f"## {a100}" in report and "## cpu" in report
    assert len([line for line in report.splitlines() if line.startswith("| case ")]) == 2  # a table per model

    # One model's shard missing: named with its model, and the merged gate cannot pass.
    done = kbench(tmp_path, "merge", *(str(compares[k]) for k in "123"), str(others[0]), str(others[2]),
                  "--output-dir", str(tmp_path / "m2"), "--no-fail")
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"{a100}: shard 2/3 is missing" in done.stderr
    (problem,) = results(tmp_path / "m2")["merge"]["problems"]
    assert problem["shard"] == f"2/3 on {a100}" and problem["cases"] == _ids(results(compares["2"]))


def test_bad_input_is_one_line_and_exit_2(compares: dict[str, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = kbench(tmp_path, "merge", str(compares["1"]), str(empty), "--output-dir", str(tmp_path / "m"))
    assert done.returncode == 2
    assert f"{empty} has no results.json" in done.stderr and "--output-dir of" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "results.json").write_text(json.dumps({"schema": "kbench-ci/bench", "schema_version": 1}))
    done = kbench(tmp_path, "merge", str(bench), "--output-dir", str(tmp_path / "m"))
    assert done.returncode == 2 and "'kbench-ci/bench'" in done.stderr and "Traceback" not in done.stderr


def test_three_run_shards_merge_into_the_unsharded_run(repo: TempRepo, tmp_path: Path) -> None:
    outs = {}
    for name, extra in (("all", ()), ("1", ("--shard", "1/3")), ("2", ("--shard", "2/3")), ("3", ("--shard", "3/3"))):
        outs[name] = tmp_path / name
        done = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(outs[name]), *extra)
        assert done.returncode in (0, 1), done.stdout + done.stderr
    whole = results(outs["all"])
    shards = [results(outs[k]) for k in "123"]
    head_commit = repo.git("rev-parse", "HEAD")
    assert all(s["shard"]["commit"] == head_commit for s in shards)
    assert sorted(c for s in shards for c in _ids(s)) == _ids(whole)
    out = tmp_path / "merged"
    done = kbench(tmp_path, "merge", *(str(outs[k]) for k in "123"), "--output-dir", str(out))
    merged = results(out)
    print(f"\nunsharded run: {whole['gate']['summary']}\nmerged run:    {merged['gate']['summary']}")
    assert done.returncode == (0 if whole["gate"]["passed"] else 1)
    assert merged["schema"] == "kbench-ci/run"
    assert _ids(merged) == _ids(whole)
    status = {c["case_id"]: c["status"] for c in whole["cases"]}
    assert {c["case_id"]: c["status"] for c in merged["cases"]} == status
    assert merged["gate"]["passed"] == whole["gate"]["passed"]
    assert merged["gate"]["counts"] == whole["gate"]["counts"]
    assert merged["gate"]["summary"] == whole["gate"]["summary"]
    written = {case["case_id"]: case for s in shards for case in s["cases"]}
    for case in merged["cases"]:
        assert {k: v for k, v in case.items() if k != "gpu"} == written[case["case_id"]], case["case_id"]
    # Mixing a run's shards with a compare's is bad input.
    other = kbench(tmp_path, "merge", str(outs["1"]), str(repo.root.parent / "nowhere"), "--output-dir", str(tmp_path / "m"))
    assert other.returncode == 2 and "is not a folder" in other.stderr
