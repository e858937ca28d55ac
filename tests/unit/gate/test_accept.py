"""Accepting a known regression with ``compare --accept``, what the report
says about the job (item 3) and the local command per failing case (item 14)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kbench_ci.errors import ExitCode, UsageError
from kbench_ci.gate.compare import run_compare
from kbench_ci.results.decide import evaluate_gate
from kbench_ci.results.outcome import CompareRequest
from kbench_ci.stats import RatioEstimate, Verdict
from tests.support.suite_repo import TempRepo
from tests.unit.gate.test_compare_logic import FakeWorker, comparison, fake_nvcc
from tests.unit.gate.test_compare_logic import repo as repo  # noqa: F401  (the fixture)


def _request(repo: TempRepo, tmp_path: Path, **kwargs: object) -> CompareRequest:
    return CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=tmp_path / "out", **kwargs)  # type: ignore[arg-type]


def test_an_accepted_slower_case_neither_fails_the_gate_nor_enters_the_geomean() -> None:
    slow = replace(comparison("k[N=1]", Verdict.SLOWER, 1.5), accepted=True)
    same = comparison("j[N=1]", Verdict.UNCHANGED, 1.0)
    gate = evaluate_gate([slow, same], max_geomean_slowdown=0.01)
    assert gate.passed and gate.failing == () and gate.accepted == ("k[N=1]",)
    assert gate.geomean_ratio == pytest.approx(1.0)
    assert gate.counts["slower"] == 0
    assert gate.summary == "1 slower (accepted), 1 unchanged — gate passed"
    # Without the acceptance the same cases fail.
    assert not evaluate_gate([replace(slow, accepted=False), same]).passed


def test_compare_accept_by_kernel_and_by_case_id_but_never_incorrect(repo: TempRepo, tmp_path: Path) -> None:  # noqa: F811
    for accept in (("slow",), ("slow[N=16]",)):
        outcome = run_compare(_request(repo, tmp_path, kernels=("slow", "same"), accept=accept), worker=FakeWorker(),
                              build_fn=fake_nvcc)
        by_kernel = {c.kernel: c for c in outcome.cases}
        assert by_kernel["slow"].verdict is Verdict.SLOWER and by_kernel["slow"].accepted
        assert by_kernel["slow"].verdict_text == "slower (accepted)"
        assert outcome.gate.passed, outcome.gate.summary
    report = (tmp_path / "out" / "benchmark.md").read_text()
    assert "**slower (accepted)**" in report and "`--accept slow[N=16]`" in report
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    cases = {c["kernel"]: c for c in data["cases"]}
    assert data["gate"]["accepted_cases"] == ["slow[N=16]"] and cases["slow"]["accepted"] is True
    assert cases["same"]["accepted"] is False
    # An incorrect case is not a regression that can be accepted: '*' covers it and still fails.
    outcome = run_compare(_request(repo, tmp_path, kernels=("wrong", "slow"), accept=("*",)), worker=FakeWorker(),
                          build_fn=fake_nvcc)
    assert {c.kernel: c.accepted for c in outcome.cases} == {"wrong": False, "slow": True}
    assert not outcome.gate.passed and outcome.gate.failing == ("wrong[N=16]",)


def test_an_accept_that_names_nothing_is_a_usage_error(repo: TempRepo, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(UsageError) as caught:
        run_compare(_request(repo, tmp_path, accept=("slwo",)), worker=FakeWorker(), build_fn=fake_nvcc)
    assert caught.value.one_line().startswith("--accept slwo: no kernel or case of that name in this comparison")
    assert "did you mean slow?" in caught.value.one_line()
    assert caught.value.exit_code == ExitCode.USAGE


def test_a_failed_report_says_what_happens_to_the_job_and_how_to_reproduce(repo: TempRepo, tmp_path: Path) -> None:  # noqa: F811
    outcome = run_compare(_request(repo, tmp_path, kernels=("slow", "wrong", "same")), worker=FakeWorker(),
                          build_fn=fake_nvcc)
    report = (tmp_path / "out" / "benchmark.md").read_text()
    assert "_kbench-ci compare exits 1: the job running it fails_" in report
    base = outcome.base.sha
    # each command once, with what failed
    assert f"\nkbench-ci compare --base {base} --kernel wrong  # 1 incorrect\n" in report
    assert f"\nkbench-ci compare --base {base} --kernel slow  # 1 slower\n" in report
    assert "--kernel same" not in report
    # --no-fail, and a caller (the action) that says what it does with the job.
    run_compare(_request(repo, tmp_path, kernels=("slow",), no_fail=True), worker=FakeWorker(), build_fn=fake_nvcc)
    assert "`--no-fail`: kbench-ci compare exits 0 although the gate failed" in (tmp_path / "out" / "benchmark.md").read_text()
    run_compare(_request(repo, tmp_path, kernels=("slow",), no_fail=True, job_note="The job fails at the Gate step."),
                worker=FakeWorker(), build_fn=fake_nvcc)
    report = (tmp_path / "out" / "benchmark.md").read_text()
    assert "_The job fails at the Gate step._" in report and "--no-fail" not in report


def test_estimate_helper_is_what_the_gate_reads() -> None:
    # comparison() builds the estimate the gate's geometric mean reads: keep that true.
    case = comparison("k[N=1]", Verdict.SLOWER, 1.5)
    assert isinstance(case.estimate, RatioEstimate) and case.estimate.ratio == 1.5
