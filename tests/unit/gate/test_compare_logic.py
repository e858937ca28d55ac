"""Verdict assembly, the remeasure rule, the gate and the compare orchestration — with fake
CaseResults and a fake worker (no subprocess, no torch), on real temporary git repositories."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kbench_ci.errors import ConfigError, GitError
from kbench_ci.gate.builds import SideBuilder, SideBuildFailed
from kbench_ci.gate.compare import run_compare
from kbench_ci.gate.verdicts import assess, measure_case
from kbench_ci.gate.worker_call import WorkerRun
from kbench_ci.measure.parent import WorkerOutcome
from kbench_ci.results.decide import evaluate_gate
from kbench_ci.results.model import CaseResult, CorrectnessResult, OutsideClock, VariantResult
from kbench_ci.results.outcome import Assessment, BuildOutcome, CaseComparison, CompareRequest, PhaseTimes
from kbench_ci.stats import RatioEstimate, Verdict
from kbench_ci.suite.settings import SuiteSettings, job_settings, trials_per_round
from kbench_ci.wire.protocol import Begin, CaseJob, Progress
from tests.support.suite_repo import TempRepo

# --------------------------------------------------------------------------------------------
# Fake results
# --------------------------------------------------------------------------------------------


def rounds_of(median: float, n_rounds: int = 10, per_round: int = 20, jitter: float = 0.002, seed: int = 1) -> tuple[tuple[float, ...], ...]:
    rng = random.Random(seed)
    return tuple(
        tuple(median * (1.0 + rng.uniform(-jitter, jitter)) for _ in range(per_round)) for _ in range(n_rounds)
    )


def variant(label: str, status: str = "ok", median: float | None = 1.0, *, n_rounds: int = 10, seed: int = 1,
            message: str | None = None) -> VariantResult:
    timed = status == "ok" and median is not None
    return VariantResult(
        label=label, kind="triton", role="solution", status=status,  # type: ignore[arg-type]
        message=message if message is not None else (None if status == "ok" else f"{label} {status}"),
        correctness=CorrectnessResult(trials=()),
        rounds_ms=rounds_of(median, n_rounds, seed=seed) if timed else (),
    )


def case_result(*variants: VariantResult, error: str | None = None, throttle: tuple[str, ...] = ()) -> CaseResult:
    state = {"sm_clock_mhz": 1980.0, "memory_clock_mhz": 3201.0, "temperature_c": 40.0, "power_w": 300.0,
             "throttle_reasons": list(throttle)}
    return CaseResult(case_id="k[N=1]", dims={"N": 1}, seed=42, variants=tuple(variants), timing_method="cuda_event",
                      error=error, gpu_state_before=state, gpu_state_after=state)


def build(side: str, ok: bool, message: str | None = None) -> BuildOutcome:
    return BuildOutcome(side=side, kernel="k", ok=ok, duration_s=1.0, command="nvcc ...", message=message,
                        compiler_output=None if ok else "k.cu(3): error: expected a ';'")


# --------------------------------------------------------------------------------------------
# assess: correctness and presence before speed
# --------------------------------------------------------------------------------------------


def test_wrong_at_head_is_incorrect_whatever_its_speed() -> None:
    # The head is wrong (and would be much faster): never a speed verdict.
    result = case_result(variant("base", median=2.0), variant("head", "incorrect", None))
    assessment = assess(result, threshold=0.02)
    assert assessment.verdict is Verdict.INCORRECT and assessment.estimate is None
    assert "head is incorrect" in (assessment.message or "")
    # Wrong on both sides is still incorrect at head, not fixed.
    both = case_result(variant("base", "incorrect", None), variant("head", "incorrect", None))
    assert assess(both, threshold=0.02).verdict is Verdict.INCORRECT


def test_wrong_at_base_right_at_head_is_fixed() -> None:
    result = case_result(variant("base", "incorrect", None), variant("head"))
    assert assess(result, threshold=0.02).verdict is Verdict.FIXED
    crashed = case_result(variant("base", "error", None, message="base crashed the worker (SIGSEGV)"), variant("head"))
    assessment = assess(crashed, threshold=0.02)
    assert assessment.verdict is Verdict.FIXED and "SIGSEGV" in (assessment.message or "")


def test_head_that_raises_crashes_or_hangs_is_failed() -> None:
    raised = case_result(variant("base"), variant("head", "error", None, message="first call failed: RuntimeError: boom"))
    assessment = assess(raised, threshold=0.02)
    assert assessment.verdict is Verdict.FAILED and "boom" in (assessment.message or "")
    hung = case_result(variant("base"), variant("head", "error", None, message="head timed out after 5 s (case timeout)"))
    assert assess(hung, threshold=0.02).verdict is Verdict.FAILED
    no_samples = case_result(variant("base"), variant("head", "ok", None))
    assert assess(no_samples, threshold=0.02).verdict is Verdict.FAILED
    assert assess(None, threshold=0.02).verdict is Verdict.FAILED


def test_build_failure_at_head_fails_with_the_compilers_message() -> None:
    assessment = assess(None, threshold=0.02, head_build=build("head", False, "nvcc failed for k.cu (exit 1)"))
    assert assessment.verdict is Verdict.FAILED
    assert "head failed to build" in (assessment.message or "") and "nvcc failed" in (assessment.message or "")


def test_build_failure_at_base_means_no_baseline_not_a_regression() -> None:
    result = case_result(variant("head"))  # only the head ran
    assessment = assess(result, threshold=0.02, base_build=build("base", False, "nvcc failed for k.cu (exit 1)"))
    assert assessment.verdict is Verdict.ADDED
    assert not assessment.verdict.fails_gate
    assert "no baseline" in (assessment.message or "") and "base failed to build" in (assessment.message or "")
    # ...but a head that is wrong is still incorrect, baseline or not.
    wrong = case_result(variant("head", "incorrect", None))
    assert assess(wrong, threshold=0.02, base_build=build("base", False, "x")).verdict is Verdict.INCORRECT


def test_added_and_removed() -> None:
    assert assess(case_result(variant("head")), threshold=0.02, base_present=False).verdict is Verdict.ADDED
    assert assess(None, threshold=0.02, head_present=False).verdict is Verdict.REMOVED
    # An added kernel that is wrong fails the gate: it is wrong at head.
    assert assess(case_result(variant("head", "incorrect", None)), threshold=0.02, base_present=False).verdict is Verdict.INCORRECT


def test_timed_both_sides_goes_to_stats() -> None:
    same = case_result(variant("base", median=1.0, seed=1), variant("head", median=1.0, seed=2))
    assessment = assess(same, threshold=0.02)
    assert assessment.verdict is Verdict.UNCHANGED
    assert assessment.estimate is not None and abs(assessment.estimate.ratio - 1.0) < 0.005
    slower = case_result(variant("base", median=1.0, seed=1), variant("head", median=1.05, seed=2))
    assessment = assess(slower, threshold=0.02)
    assert assessment.verdict is Verdict.SLOWER and assessment.estimate.ratio == pytest.approx(1.05, rel=0.01)  # type: ignore[union-attr]
    faster = case_result(variant("base", median=1.0, seed=1), variant("head", median=0.9, seed=2))
    assert assess(faster, threshold=0.02).verdict is Verdict.FASTER


# --------------------------------------------------------------------------------------------
# The remeasure rule
# --------------------------------------------------------------------------------------------


def _fake_runs(*medians: float) -> tuple[list[int], Any]:
    calls: list[int] = []

    def run(n_rounds: int) -> WorkerRun:
        head_median = medians[len(calls)]
        calls.append(n_rounds)
        result = case_result(variant("base", median=1.0, n_rounds=n_rounds, seed=len(calls)),
                             variant("head", median=head_median, n_rounds=n_rounds, seed=100 + len(calls)))
        return WorkerRun(result=result, environment=None, load_errors=(), phases=PhaseTimes(timing_s=1.0), rounds=n_rounds)

    return calls, run


def _judge(result: CaseResult) -> Assessment:
    return assess(result, threshold=0.02)


def test_a_suspected_regression_is_measured_again_with_double_rounds_and_that_decides() -> None:
    calls, run = _fake_runs(1.05, 1.0)  # slow the first time only: noise
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10, 20]
    assert first is not None and first.verdict is Verdict.SLOWER
    assert deciding.verdict is Verdict.UNCHANGED and deciding.rounds == 20


def test_a_confirmed_regression_stays_slower() -> None:
    calls, run = _fake_runs(1.05, 1.05)
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10, 20] and deciding.verdict is Verdict.SLOWER and first is not None


def test_a_speedup_must_show_twice() -> None:
    calls, run = _fake_runs(0.9, 1.0)  # fast the first time only: noise
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10, 20] and first is not None and first.verdict is Verdict.FASTER
    assert deciding.verdict is Verdict.UNCHANGED
    calls, run = _fake_runs(0.9, 0.9)
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10, 20] and deciding.verdict is Verdict.FASTER


def test_measurements_that_contradict_each_other_are_settled_by_a_third() -> None:
    """-1.21% then +1.51% (an A/A of a 5 us kernel on an H200, the second on other buffers):
    neither interval holds the error the layout adds; a third measurement, on a third layout,
    decides by two of three, and a third that sides with neither leaves the case inconclusive."""
    calls, run = _fake_runs(0.95, 1.05, 1.0)
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10, 20, 20] and first is not None and first.verdict is Verdict.FASTER
    assert deciding.verdict is Verdict.INCONCLUSIVE and deciding.estimate is not None
    message = deciding.assessment.message or ""
    assert "measured three times on different buffer layouts (-5." in message and "then +5." in message
    assert "the layout moves it by more than the threshold" in message
    # a real regression whose first run happened to read fast is still caught
    calls, run = _fake_runs(0.95, 1.05, 1.05)
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10, 20, 20] and deciding.verdict is Verdict.SLOWER
    assert "two of three say slower" in (deciding.assessment.message or "")
    calls, run = _fake_runs(1.05, 0.95, 1.05)
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert deciding.verdict is Verdict.SLOWER
    calls, run = _fake_runs(1.05, 1.0)  # no contradiction: two measurements, as before
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10, 20] and deciding.verdict is Verdict.UNCHANGED


def test_no_remeasure_for_unchanged_or_incorrect() -> None:
    calls, run = _fake_runs(1.0)
    deciding, first = measure_case(run, _judge, threshold=0.02, rounds=10)
    assert calls == [10] and first is None

    calls: list[int] = []

    def wrong(n_rounds: int) -> WorkerRun:
        calls.append(n_rounds)
        return WorkerRun(case_result(variant("base"), variant("head", "incorrect", None)), None, (), PhaseTimes(), n_rounds)

    deciding, first = measure_case(wrong, _judge, threshold=0.02, rounds=10)
    assert calls == [10] and first is None and deciding.verdict is Verdict.INCORRECT


def test_inconclusive_above_the_threshold_is_remeasured() -> None:
    estimate = RatioEstimate(ratio=1.03, ci_low=0.99, ci_high=1.08, p_value=0.2, n_rounds=10, confidence=0.95,
                             round_ratios=(1.03,) * 10)
    results = iter([Assessment(Verdict.INCONCLUSIVE, estimate, None), Assessment(Verdict.UNCHANGED, estimate, None)])
    calls: list[int] = []

    def run(n_rounds: int) -> WorkerRun:
        calls.append(n_rounds)
        return WorkerRun(case_result(variant("base"), variant("head")), None, (), PhaseTimes(), n_rounds)

    deciding, first = measure_case(run, lambda r: next(results), threshold=0.02, rounds=6, remeasure_factor=3)
    assert calls == [6, 18] and first is not None and deciding.verdict is Verdict.UNCHANGED


# --------------------------------------------------------------------------------------------
# The gate
# --------------------------------------------------------------------------------------------


def comparison(case_id: str, verdict: Verdict, ratio: float | None = None) -> CaseComparison:
    estimate = (
        RatioEstimate(ratio=ratio, ci_low=ratio * 0.99, ci_high=ratio * 1.01, p_value=0.01, n_rounds=10,
                      confidence=0.95, round_ratios=(ratio,) * 10)
        if ratio is not None else None
    )
    return CaseComparison(case_id=case_id, kernel=case_id.split("[")[0], dims={"N": 1}, verdict=verdict,
                          threshold=0.02, estimate=estimate, message=None)


def test_gate_summary_counts_every_verdict_and_reads_worst_first() -> None:
    cases = (
        [comparison(f"u{i}[N=1]", Verdict.UNCHANGED, 1.0) for i in range(14)]
        + [comparison("s1[N=1]", Verdict.SLOWER, 1.05), comparison("s2[N=1]", Verdict.SLOWER, 1.04),
           comparison("f[N=1]", Verdict.FASTER, 0.9)]
    )
    gate = evaluate_gate(cases)
    assert gate.summary == "2 slower, 1 faster, 14 unchanged — gate FAILED"
    assert not gate.passed and gate.complete
    assert set(gate.counts) == {v.value for v in Verdict}
    assert gate.counts["slower"] == 2 and gate.counts["removed"] == 0
    assert gate.failing == ("s1[N=1]", "s2[N=1]")


def test_gate_passes_without_failing_verdicts_and_fails_when_incomplete() -> None:
    cases = [comparison("a[N=1]", Verdict.UNCHANGED, 1.0), comparison("b[N=1]", Verdict.ADDED),
             comparison("c[N=1]", Verdict.REMOVED), comparison("d[N=1]", Verdict.FIXED),
             comparison("e[N=1]", Verdict.INCONCLUSIVE, 1.01)]
    gate = evaluate_gate(cases)
    assert gate.passed and gate.summary.endswith("— gate passed")
    partial = evaluate_gate(cases[:2], total=5)
    assert not partial.passed and not partial.complete and "incomplete (2 of 5 cases)" in partial.summary
    for verdict in (Verdict.INCORRECT, Verdict.FAILED, Verdict.SLOWER):
        assert not evaluate_gate([*cases, comparison("x[N=1]", verdict, 1.1 if verdict is Verdict.SLOWER else None)]).passed


def test_gate_geometric_mean_limit() -> None:
    # Each 1.5% slower, below the 2% threshold: unchanged one by one, but the geomean crosses 1%.
    cases = [comparison(f"k{i}[N=1]", Verdict.INCONCLUSIVE, 1.015) for i in range(4)]
    assert evaluate_gate(cases).passed
    gate = evaluate_gate(cases, max_geomean_slowdown=0.01)
    assert not gate.passed and gate.geomean_failed
    assert gate.geomean_ratio == pytest.approx(1.015)
    assert "geometric mean" in gate.summary and "FAILED" in gate.summary
    assert evaluate_gate(cases, max_geomean_slowdown=0.02).passed
    # Cases without a ratio (added, incorrect, ...) are not part of the mean.
    assert evaluate_gate([comparison("a[N=1]", Verdict.ADDED)], max_geomean_slowdown=0.01).geomean_ratio is None


# --------------------------------------------------------------------------------------------
# Settings → job, and building sides
# --------------------------------------------------------------------------------------------


def test_trials_per_round_rule() -> None:
    assert trials_per_round(100, 10) == 10
    assert trials_per_round(100, 2) == 50
    assert trials_per_round(100, 20) == 10  # never below 10
    assert trials_per_round(10, 2) == 10


def test_job_settings_cpu_uses_host_time_and_rounds_override() -> None:
    settings = job_settings(SuiteSettings(num_trials=200), device="cpu", rounds=4)
    assert settings.timing_method == "host_time" and settings.timing_method_changed
    assert settings.rounds == 4 and settings.trials_per_round == 50
    gpu = job_settings(SuiteSettings(), device="cuda:0")
    assert gpu.timing_method == "cuda_event" and not gpu.timing_method_changed and gpu.rounds == 10


def test_side_builder_stages_the_library_and_builds_once_per_side(tmp_path: Path) -> None:
    from kbench_ci.suite.model import KernelSpec

    source = tmp_path / "tree" / "k.cu"
    source.parent.mkdir()
    source.write_text('extern "C" void solve(const float* x, float* y, int N) {}\n')
    kernel = KernelSpec(name="k", solution=source, ref=tmp_path / "tree" / "ref.py", implementation="cuda-cpp",
                        shapes=({"N": 1},))
    calls: list[tuple[Path, Path]] = []

    def fake_build(kernel: Any, kind: str, src: Path, out: Path, cwd: Path) -> str:
        calls.append((src, out))
        if "base" in str(out):
            raise SideBuildFailed("nvcc failed for k.cu (exit 1)", command="nvcc k.cu", compiler_output="error: x")
        out.write_bytes(b"\x7fELF")
        return "nvcc k.cu"

    builder = SideBuilder(tmp_path / "staging", fake_build)
    spec, outcome = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tmp_path)
    assert spec is not None and outcome is not None and outcome.ok
    staged = Path(spec.solution)
    assert staged.parent == tmp_path / "staging" / "head" / "k" and staged.with_suffix(".so").is_file()
    assert calls[0][0] == source  # compiled from the tree, so includes resolve there
    assert not source.with_suffix(".so").exists()  # nothing written into the tree
    again, second = builder.side(kernel, label="head", kind="cuda-cpp", cwd=tmp_path)
    assert again == spec and second is not None and second.duration_s == 0.0 and len(calls) == 1
    failed_spec, failed = builder.side(kernel, label="base", kind="cuda-cpp", cwd=tmp_path)
    assert failed_spec is None and failed is not None and not failed.ok
    assert failed.compiler_output == "error: x"
    python_spec, none = builder.side(kernel.__class__(name="p", solution=tmp_path / "p.py", ref=tmp_path / "r.py",
                                                      implementation="triton", shapes=({"N": 1},)),
                                     label="head", kind="triton", cwd=tmp_path)
    assert none is None and python_spec is not None and python_spec.solution.endswith("p.py")


# --------------------------------------------------------------------------------------------
# Orchestration with a fake worker
# --------------------------------------------------------------------------------------------

CU = 'extern "C" void solve(const float* x, float* y, int N) {{ /* {tag} */ }}\n'
PY = "# {tag}\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n"


def _toml(kernels: list[tuple[str, str]], extra: str = "") -> str:
    """kernels: (name, file) pairs; .cu files are cuda-cpp, .py triton."""
    lines = ["[defaults]", "rounds = 4", "num_trials = 40", extra]
    for name, file in kernels:
        lines += ["[[kernels]]", f'name = "{name}"', f'solution = "k/{file}"', 'ref = "k/ref.py"',
                  "shapes = [{N = 16}]"]
    return "\n".join(lines) + "\n"


class FakeWorker:
    """Reads each side's solution file: WRONG → incorrect, RAISE → error, SLOW → 5% slower."""

    def __init__(self, *, interrupt_at: int | None = None) -> None:
        self.jobs: list[CaseJob] = []
        self.interrupt_at = interrupt_at

    def __call__(self, job: CaseJob, *, timeout_s: float, on_event: Any = None) -> tuple[CaseResult, WorkerOutcome]:
        self.jobs.append(job)
        if self.interrupt_at is not None and len(self.jobs) == self.interrupt_at:
            raise KeyboardInterrupt
        variants = []
        for index, side in enumerate(job.sides):
            text = Path(side.solution).read_text()
            if on_event is not None:
                on_event(Begin(side.label, "correctness"))
                on_event(Progress(side.label, "timing", 0, job.settings.rounds))
            if "WRONG" in text:
                variants.append(variant(side.label, "incorrect", None))
            elif "RAISE" in text:
                variants.append(variant(side.label, "error", None, message="first call failed: RuntimeError: boom"))
            else:
                median = 1.05 if "SLOW" in text else 1.0
                variants.append(variant(side.label, median=median, n_rounds=job.settings.rounds, seed=len(self.jobs) * 10 + index))
        result = case_result(*variants, throttle=("sw_thermal_slowdown",) if "HOT" in text else ())
        return result, WorkerOutcome(environment={"device": "cuda:0", "gpu_name": "Fake GPU"})


def fake_nvcc(kernel: Any, kind: str, src: Path, out: Path, cwd: Path) -> str:
    if "SYNTAX" in src.read_text():
        raise SideBuildFailed("nvcc failed for k.cu (exit 2)", command="nvcc k.cu",
                              compiler_output="k.cu(1): error: expected a ';'\n1 error detected")
    out.write_bytes(b"")
    return f"nvcc -o {out} {src}"


@pytest.fixture
def repo(tmp_path: Path) -> TempRepo:
    repo = TempRepo(tmp_path / "repo")
    repo.commit({
        "kbench.toml": _toml([("same", "same.py"), ("slow", "slow.py"), ("wrong", "wrong.py"), ("raise", "raise.py"),
                              ("cu_base_broken", "a.cu"), ("cu_head_broken", "b.cu"), ("gone", "gone.py"),
                              ("hot", "hot.py")]),
        "k/ref.py": "def reference(**_): pass\n",
        "k/same.py": PY.format(tag="v1"), "k/slow.py": PY.format(tag="v1"), "k/wrong.py": PY.format(tag="v1"),
        "k/raise.py": PY.format(tag="v1"), "k/a.cu": CU.format(tag="SYNTAX"), "k/b.cu": CU.format(tag="v1"),
        "k/gone.py": PY.format(tag="v1"), "k/hot.py": PY.format(tag="HOT"),
    }, "base")
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({
        "kbench.toml": _toml([("same", "same.py"), ("slow", "slow.py"), ("wrong", "wrong.py"), ("raise", "raise.py"),
                              ("cu_base_broken", "a.cu"), ("cu_head_broken", "b.cu"), ("new", "new.py"),
                              ("hot", "hot.py")]),
        "k/slow.py": PY.format(tag="SLOW"), "k/wrong.py": PY.format(tag="WRONG"), "k/raise.py": PY.format(tag="RAISE"),
        "k/a.cu": CU.format(tag="fixed"), "k/b.cu": CU.format(tag="SYNTAX"), "k/new.py": PY.format(tag="v1"),
        "k/gone.py": None,
    }, "head")
    return repo


def _request(repo: TempRepo, tmp_path: Path, **kwargs: Any) -> CompareRequest:
    return CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=tmp_path / "out", **kwargs)


def test_orchestration_verdicts_remeasure_and_results(repo: TempRepo, tmp_path: Path) -> None:
    worker = FakeWorker()
    progress: list[Any] = []
    outcome = run_compare(_request(repo, tmp_path), worker=worker, build_fn=fake_nvcc, on_progress=progress.append)
    verdicts = {c.kernel: c.verdict for c in outcome.cases}
    assert verdicts == {
        "same": Verdict.UNCHANGED, "slow": Verdict.SLOWER, "wrong": Verdict.INCORRECT, "raise": Verdict.FAILED,
        "cu_base_broken": Verdict.ADDED, "cu_head_broken": Verdict.FAILED, "new": Verdict.ADDED,
        "gone": Verdict.REMOVED, "hot": Verdict.UNCHANGED,
    }
    by_kernel = {c.kernel: c for c in outcome.cases}
    # The suspected regression ran twice, the second time with double the rounds.
    slow_jobs = [job for job in worker.jobs if job.case_id == "slow[N=16]"]
    assert [job.settings.rounds for job in slow_jobs] == [4, 8]
    # ... on buffers laid out elsewhere: a layout that favours one side cannot confirm itself.
    assert slow_jobs[0].placement_pad_bytes == 0 and slow_jobs[1].placement_pad_bytes > 0
    assert CaseJob.from_json(slow_jobs[1].to_json()) == slow_jobs[1]
    assert by_kernel["slow"].remeasured and "remeasured with 8 rounds" in (by_kernel["slow"].message or "")
    assert not by_kernel["same"].remeasured
    # Same seed, same dims, base then head in one job; trials per round from max(10, 40 // 4).
    same_job = next(job for job in worker.jobs if job.case_id == "same[N=16]")
    assert [s.label for s in same_job.sides] == ["base", "head"] and same_job.settings.trials_per_round == 10 and same_job.settings.seed == 42
    # A head that does not build is not run; a base that does not build has no baseline.
    assert all(job.case_id != "cu_head_broken[N=16]" for job in worker.jobs)
    assert "expected a ';'" in (by_kernel["cu_head_broken"].head_build.compiler_output or "")  # type: ignore[union-attr]
    assert "no baseline" in (by_kernel["cu_base_broken"].message or "")
    broken_base_job = next(job for job in worker.jobs if job.case_id == "cu_base_broken[N=16]")
    assert [s.label for s in broken_base_job.sides] == ["head"]
    assert by_kernel["hot"].throttled
    assert not outcome.gate.passed
    assert outcome.gate.counts["failed"] == 2 and outcome.gate.counts["removed"] == 1

    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["schema"] == "kbench-ci/compare" and data["schema_version"] == 1
    assert data["gate"]["passed"] is False and data["gate"]["summary"] == outcome.gate.summary
    assert set(data["gate"]["counts"]) == {v.value for v in Verdict}
    assert data["base"]["ref"] == "main" and len(data["base"]["sha"]) == 40
    cases = {c["kernel"]: c for c in data["cases"]}
    for key in ("case_id", "kernel", "dims", "verdict", "threshold", "ratio", "ci_low", "ci_high", "p_value",
                "remeasured", "throttled", "base", "head", "message"):
        assert key in cases["same"], key
    assert cases["slow"]["remeasured"] is True and cases["slow"]["first_measurement"]["rounds"] == 4
    assert len(cases["slow"]["head"]["rounds_ms"]) == 8 and len(cases["slow"]["base"]["rounds_ms"]) == 8
    assert cases["gone"]["base"] is None and cases["gone"]["head"] is None
    assert cases["hot"]["throttled"] is True

    # The PR comment and the action's gate step read these files.
    from kbench_ci.github.comment import fit_body, load_gate

    gate = load_gate(tmp_path / "out" / "results.json")
    assert gate.passed is False and gate.regressions == 4 and gate.summary == outcome.gate.summary

    report = (tmp_path / "out" / "benchmark.md").read_text()
    folded, truncated = fit_body(report, limit=len(report) // 2)
    assert truncated and outcome.gate.summary in folded
    first_lines = report.splitlines()[:4]
    assert f"**{outcome.gate.summary}**" in first_lines
    assert "xychart-beta" in report and "<details>" in report and "(remeasured)" in report
    assert "throttled" in report and "expected a ';'" in report
    # Worst first: incorrect, failed, slower ... unchanged.
    table_rows = [line for line in report.splitlines() if line.startswith("| `")]
    assert "incorrect" in table_rows[0] and "unchanged" in table_rows[-1]
    # Progress: every case announced, and a remeasure stage for the slow one.
    assert {p.stage for p in progress} >= {"build", "measure", "remeasure", "done"}
    assert repo.worktrees() == [str(repo.root)]


def test_results_are_written_after_every_case_and_worktrees_go_on_ctrl_c(repo: TempRepo, tmp_path: Path) -> None:
    worker = FakeWorker(interrupt_at=4)
    with pytest.raises(KeyboardInterrupt):
        run_compare(_request(repo, tmp_path, kernels=("same", "slow", "wrong", "raise")), worker=worker,
                    build_fn=fake_nvcc)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    # same (1 job) and slow (2 jobs: remeasured) were done before the fourth job was interrupted.
    assert [c["kernel"] for c in data["cases"]] == ["same", "slow"]
    assert data["gate"]["passed"] is False and data["gate"]["complete"] is False
    assert "incomplete (2 of 4 cases)" in data["gate"]["summary"]
    assert repo.worktrees() == [str(repo.root)]


def test_threshold_override_kernel_filter_and_no_change(repo: TempRepo, tmp_path: Path) -> None:
    outcome = run_compare(_request(repo, tmp_path, kernels=("slow",), threshold=0.10), worker=FakeWorker(),
                          build_fn=fake_nvcc)
    (case,) = outcome.cases
    assert case.threshold == 0.10 and case.verdict is Verdict.UNCHANGED and outcome.gate.passed
    # Base and head are the same commit: nothing can be slower.
    aa = run_compare(_request(repo, tmp_path, head="main", kernels=("same", "slow", "hot")), worker=FakeWorker(),
                     build_fn=fake_nvcc)
    assert {c.verdict for c in aa.cases} == {Verdict.UNCHANGED} and aa.gate.passed
    assert aa.head.tree == "worktree" and aa.head.sha == aa.base.sha


def test_usage_errors(repo: TempRepo, tmp_path: Path) -> None:
    with pytest.raises(GitError, match="cannot resolve"):
        run_compare(CompareRequest(start=repo.root, base="no-such-branch", device="cuda:0"), worker=FakeWorker())
    with pytest.raises(Exception, match="--kernel nope"):
        run_compare(_request(repo, tmp_path, kernels=("nope",)), worker=FakeWorker(), build_fn=fake_nvcc)
    repo.write({"kbench.toml": "[[kernels]]\nname = 1\n"})
    with pytest.raises(ConfigError):
        run_compare(_request(repo, tmp_path), worker=FakeWorker(), build_fn=fake_nvcc)
    assert repo.worktrees() == [str(repo.root)]


def test_base_without_a_suite_has_no_baselines(tmp_path: Path) -> None:
    repo = TempRepo(tmp_path / "repo")
    repo.commit({"README": "no suite yet\n"}, "base")
    repo.commit({"kbench.toml": _toml([("same", "same.py")]), "k/ref.py": "def reference(**_): pass\n", "k/same.py": PY.format(tag="v1")}, "add")
    outcome = run_compare(CompareRequest(start=repo.root, base="HEAD~1", device="cuda:0", output_dir=tmp_path / "o"),
                          worker=FakeWorker())
    assert [c.verdict for c in outcome.cases] == [Verdict.ADDED]
    assert outcome.base.note and "no" in outcome.base.note
    assert outcome.gate.passed


def test_cuda_kernels_need_a_gpu(repo: TempRepo, tmp_path: Path) -> None:
    from kbench_ci.errors import EnvironmentProblem

    request = CompareRequest(start=repo.root, base="main", device="cpu", output_dir=tmp_path / "o")
    with pytest.raises(EnvironmentProblem, match="need a CUDA GPU"):
        run_compare(request, worker=FakeWorker(), build_fn=fake_nvcc)
    # Selecting only Python kernels works on the CPU.
    outcome = run_compare(
        CompareRequest(start=repo.root, base="main", device="cpu", output_dir=tmp_path / "o", kernels=("same",)),
        worker=FakeWorker(),
    )
    assert [c.verdict for c in outcome.cases] == [Verdict.UNCHANGED]


class TimeoutRecorder(FakeWorker):
    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[tuple[int, int, float]] = []

    def __call__(self, job: CaseJob, *, timeout_s: float, on_event: Any = None) -> tuple[CaseResult, WorkerOutcome]:
        self.timeouts.append((len(job.sides), len(job.baselines), timeout_s))
        return super().__call__(job, timeout_s=timeout_s, on_event=on_event)


def test_the_case_timeout_grows_with_the_suite_baselines_of_the_case(tmp_path: Path) -> None:
    repo = TempRepo(tmp_path / "repo")
    toml = _toml([("plain", "plain.py")], extra="timeout = 100") + "\n".join([
        "[[kernels]]", 'name = "with_baselines"', 'solution = "k/plain.py"', 'ref = "k/ref.py"',
        "shapes = [{N = 16}]", 'baselines = ["pytorch-eager", "torch-compile"]']) + "\n"
    repo.commit({"kbench.toml": toml, "k/ref.py": "def reference(**_): pass\n", "k/plain.py": PY.format(tag="v1")}, "base")
    worker = TimeoutRecorder()
    run_compare(_request(repo, tmp_path, time_budget_s=0.0), worker=worker, build_fn=fake_nvcc)
    assert sorted(worker.timeouts) == [(2, 0, 100.0), (2, 2, 200.0)]


def _held_to_the_clock(result: VariantResult, resolution_us: float, gap_us: float = 300.0,
                       lead_us: float | None = None) -> VariantResult:
    clock = OutsideClock(source="gpu-globaltimer", calls=10, gap_us=gap_us, pre_us=40.0, post_us=5.0, reference="base",
                         reference_gap_us=300.0, resolution_us=resolution_us, lead_us=lead_us, reference_lead_us=lead_us)
    return replace(result, outside_clock=clock)


def test_a_judged_head_is_faster_only_beyond_the_lie_its_clock_resolves() -> None:
    # base 10 us; head 8 us: 20% faster, but only 2 us a call, and a 3 us lie would go unseen
    within = case_result(variant("base", median=0.010), _held_to_the_clock(variant("head", median=0.008, seed=2), 3.0))
    assessment = assess(within, threshold=0.01)
    assert assessment.verdict is Verdict.UNCHANGED
    assert assessment.message is not None and "within the 3.00 us the judge's clock resolves" in assessment.message
    beyond = case_result(variant("base", median=0.010), _held_to_the_clock(variant("head", median=0.005, seed=2), 3.0))
    assert assess(beyond, threshold=0.01).verdict is Verdict.FASTER
    # a slower head is slower whatever the resolution: a lie about time only ever reads faster
    slower = case_result(variant("base", median=0.010), _held_to_the_clock(variant("head", median=0.0102, seed=2), 3.0))
    assert assess(slower, threshold=0.01).verdict is Verdict.SLOWER


def test_a_lie_under_the_resolution_does_not_buy_a_judged_head_its_gain() -> None:
    # The H200's escape_end head on a 4.4 us vector add: its own times read 0.7 us, its work ran
    # on another stream after its end event, and the judge's clock saw 2.5 us a call more than the
    # base's handoff: under the 3 us resolution, so not `incorrect`, and its 3.7 us "gain" is not
    # a gain the clock can vouch for.
    liar = case_result(variant("base", median=0.0044), _held_to_the_clock(variant("head", median=0.0007, seed=2), 3.0, 302.5))
    assessment = assess(liar, threshold=0.01)
    assert assessment.verdict is Verdict.UNCHANGED
    assert assessment.message is not None and "2.50 us of which its own times left out" in assessment.message
    # and its -84% is nobody's figure: not in the report, not in the geometric mean
    assert assessment.estimate is None
    # The same gain where the clock saw nothing left out is faster.
    honest = case_result(variant("base", median=0.0044), _held_to_the_clock(variant("head", median=0.0007, seed=2), 3.0, 300.0))
    assert assess(honest, threshold=0.01).verdict is Verdict.FASTER
    # A head whose gap reads below the base's is not credited for it.
    below = case_result(variant("base", median=0.0044), _held_to_the_clock(variant("head", median=0.0007, seed=2), 3.0, 298.0))
    assert assess(below, threshold=0.01).verdict is Verdict.FASTER


def test_the_lead_in_before_the_start_event_does_not_buy_a_judged_head_a_gain() -> None:
    # A side's stream reads its pages and spins between the judge's go and its start event (the
    # trusted base's took 7 us a call): a head that did 4 us of its work there instead, and so
    # reads 4 us faster, leaves the judge's clock with the same gap as the base's.
    hidden = case_result(variant("base", median=0.0050), _held_to_the_clock(variant("head", median=0.0010, seed=2), 3.0, 300.0, 7.0))
    assessment = assess(hidden, threshold=0.01)
    assert assessment.verdict is Verdict.UNCHANGED
    assert assessment.message is not None and "the 7.00 us lead-in before its start event" in assessment.message
    # A gain beyond the resolution and the lead-in together is faster.
    beyond = case_result(variant("base", median=0.0200), _held_to_the_clock(variant("head", median=0.0080, seed=2), 3.0, 300.0, 7.0))
    assert assess(beyond, threshold=0.01).verdict is Verdict.FASTER
    # Without a lead-in (the judge asked for none) the same 4 us gain is faster, as before.
    bare = case_result(variant("base", median=0.0050), _held_to_the_clock(variant("head", median=0.0010, seed=2), 3.0, 300.0))
    assert assess(bare, threshold=0.01).verdict is Verdict.FASTER


def test_a_gain_the_clock_cannot_vouch_for_stays_out_of_the_geometric_mean() -> None:
    """Red team: a head that reports next to nothing for a kernel under the clock's
    resolution read `unchanged` but kept its -100% in the geometric mean, which then hid a +30%
    case elsewhere from a 10% limit."""
    liar = case_result(variant("base", median=0.0025), _held_to_the_clock(variant("head", median=0.00001, seed=2), 3.0))
    assessment = assess(liar, threshold=0.5)
    assert assessment.verdict is Verdict.UNCHANGED and assessment.estimate is None
    gate = evaluate_gate([comparison("slow", Verdict.UNCHANGED, 1.30), comparison("liar", Verdict.UNCHANGED, None)],
                         max_geomean_slowdown=0.10)
    assert gate.geomean_failed and not gate.passed


# --------------------------------------------------------------------------------------------
# Under the judge: a change within the processes' own spread
# --------------------------------------------------------------------------------------------


def _judged(label: str, median_ms: float, *, seed: int, source: str = "gpu-globaltimer") -> VariantResult:
    clock = OutsideClock(source=source, calls=200, gap_us=61.5, pre_us=45.0, post_us=5.0)
    return replace(variant(label, median=median_ms, seed=seed, n_rounds=20), outside_clock=clock)


@pytest.mark.parametrize(("base_ms", "verdict"), [(0.0067, Verdict.INCONCLUSIVE), (0.023, Verdict.SLOWER)])
def test_a_judged_change_counts_only_beyond_the_spread_two_processes_put_between_one_kernel(
        base_ms: float, verdict: Verdict) -> None:
    """+1.7%, decided in its own interval: at a 6.7 us add that is within the 90 ns a call two
    processes put between one kernel (inconclusive, the widened interval reported); at 23 us it
    stands beyond it (slower)."""
    result = case_result(_judged("base", base_ms, seed=1), _judged("head", base_ms * 1.017, seed=2))
    assessment = assess(result, threshold=0.01)
    assert assessment.verdict is verdict, assessment
    assert assessment.estimate is not None and assessment.estimate.ratio == pytest.approx(1.017, rel=0.002)
    if verdict is Verdict.INCONCLUSIVE:
        assert assessment.estimate.ci_low < 1.0 < assessment.estimate.ci_high
        assert "90 ns a call" in (assessment.message or "") and "6.70 us" in (assessment.message or "")
    # faster the same way
    faster = assess(case_result(_judged("base", base_ms, seed=1), _judged("head", base_ms / 1.017, seed=2)), threshold=0.01)
    assert faster.verdict is (Verdict.INCONCLUSIVE if verdict is Verdict.INCONCLUSIVE else Verdict.FASTER)


def test_the_process_spread_is_not_counted_in_one_process_nor_on_a_cpu() -> None:
    """In one process (no outside clock) both sides share the process and its effect cancels; a
    CPU side's calls (the judge's host clock) take ms and no spread of theirs is measured."""
    in_process = case_result(variant("base", median=0.0067, seed=1, n_rounds=20), variant("head", median=0.0067 * 1.017, seed=2, n_rounds=20))
    assert assess(in_process, threshold=0.01).verdict is Verdict.SLOWER
    on_cpu = case_result(_judged("base", 0.0067, seed=1, source="host-monotonic"),
                         _judged("head", 0.0067 * 1.017, seed=2, source="host-monotonic"))
    assert assess(on_cpu, threshold=0.01).verdict is Verdict.SLOWER
