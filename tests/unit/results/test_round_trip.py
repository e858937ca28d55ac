"""Each results.json schema, written by :mod:`kbench_ci.results.writers` and read back by
:mod:`kbench_ci.results.read`, gives the values it was written from (``merge`` judges and renders
shards' cases from what they read, so a field the writer adds and the reader forgets is a
report that changes on merging).

What results.json does not keep, the fixtures leave at what the reader puts back: the GPU of
a ``--gpus`` run (written as ``gpu_index``, merge takes it from the shard's ``gpus``), and of a
compare's deciding measurement its own message and phase times (the case's stand in), its
machine description (the file's ``environment``) and, without an estimate, its round count
(the head's timed rounds stand in).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kbench_ci.results.atomic import write_json_atomically
from kbench_ci.results.model import (
    CaseResult,
    CorrectnessResult,
    EscapeAudit,
    MeasureSettings,
    OutputCheck,
    TrialCheck,
    VariantResult,
)
from kbench_ci.results.outcome import (
    Assessment,
    BuildOutcome,
    CaseComparison,
    ChangedSelection,
    CommitRecord,
    CompareOutcome,
    CompareRequest,
    Gate,
    Measurement,
    PhaseTimes,
    ProfiledKernel,
    RevisionInfo,
    RunCase,
    RunOutcome,
    RunRequest,
    ShardRecord,
    SideProfile,
)
from kbench_ci.results.read import (
    compare_case_from_json,
    revision_from_json,
    run_case_from_json,
    selection_from_json,
    settings_from_json,
    shard_from_json,
)
from kbench_ci.results.schema import COMPARE_SCHEMA, COMPARE_SCHEMA_VERSION, RUN_SCHEMA, RUN_SCHEMA_VERSION
from kbench_ci.results.writers import compare_payload, run_payload
from kbench_ci.stats import RatioEstimate, Verdict

SETTINGS = MeasureSettings(
    device="cuda:0", seed=42, correctness_trials=3, timing_method="cuda_event", num_warmup=5, trials_per_round=10,
    discard_first=1, rounds=4, flush_l2=True, trials_per_round_rule="max(10, 40 // rounds)", time_budget_s=20.0,
)
SHARD = ShardRecord(
    index=1, count=2, all_case_ids=("add[N=16]", "add[N=32]", "gone[N=8]"), case_ids=("add[N=16]", "gone[N=8]"),
    balanced_by="timings", timings_file="timings.json", commit="a" * 40,
)
STATE = {"sm_clock_mhz": 1980.0, "temperature_c": 41.0, "throttle_reasons": ["sw_thermal_slowdown"]}


def _variant(label: str, *, role: str = "solution", status: str = "ok", scale: float = 1.0) -> VariantResult:
    """A variant with every field set, an infinite error included (JSON has no inf)."""
    timed = status == "ok"
    return VariantResult(
        label=label, kind="triton", role=role, status=status,  # type: ignore[arg-type]
        message=None if timed else f"{label} is {status}",
        correctness=CorrectnessResult(trials=(
            TrialCheck(seed=42, outputs=(
                OutputCheck(name="out", passed=timed, problem=None if timed else "mismatch",
                            max_abs_error=0.0 if timed else float("inf"), max_rel_error=0.0 if timed else 0.5,
                            mismatched=0 if timed else 7, numel=16, atol=1e-4, rtol=1e-4, tolerance_source="default",
                            first_mismatch=None if timed else (3, 1.5, 1.0)),
            ), modified_inputs=() if timed else ("x",), error=None),
        )),
        rounds_ms=((1.0 * scale, 1.1 * scale), (0.9 * scale, 1.2 * scale)) if timed else (),
        round_versions=((0, 2), (1, 0)) if timed else (),
        discarded_ms=(5.0,) if timed else (), first_call_ms=12.5, compile_ms=300.0, post_timing_check=timed,
        fresh_inputs="3 versions of the inputs", timing_shift_ms=0.001,
        escape_audit=EscapeAudit(status="passed", event_ms=(1.0,), cupti_span_ms=(0.99,), escaped_ms=(0.0,),
                                 streams=(7,), detail=None, cost_s=0.25) if timed else None,
        notes=("TF32 was on",) if role == "baseline" else (),
    )


def _result(case_id: str, dims: dict[str, int], *variants: VariantResult, error: str | None = None) -> CaseResult:
    return CaseResult(
        case_id=case_id, dims=dims, seed=SETTINGS.seed, variants=variants, timing_method=SETTINGS.timing_method,
        timing_description="CUDA events around each call", event_overhead_ms=0.004, cupti_residual_ms=0.0005,
        error=error, gpu_state_before=STATE, gpu_state_after=STATE,
    )


def _written(tmp_path: Path, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as it reaches the disk and comes back: through the one writer of results files."""
    path = tmp_path / "results.json"
    write_json_atomically(path, payload)
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _without_created(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "created"}


# --------------------------------------------------------------------------------------------
# kbench-ci/run
# --------------------------------------------------------------------------------------------


def _run_cases() -> tuple[RunCase, ...]:
    ok_result = _result("add[N=16]", {"N": 16}, _variant("solution"), _variant("torch", role="baseline", scale=2.0))
    wrong_result = _result("add[N=32]", {"N": 32}, _variant("solution", status="incorrect"))
    build = BuildOutcome(side="solution", kernel="add", ok=True, duration_s=1.5, command="nvcc -o add.so add.cu",
                         cached=False)
    failed_build = BuildOutcome(side="solution", kernel="mm", ok=False, duration_s=2.0, command="nvcc -o mm.so mm.cu",
                                message="nvcc failed (exit 2)", compiler_output="mm.cu(1): error")
    return (
        RunCase(case_id="add[N=16]", kernel="add", dims={"N": 16}, status="ok", message=None,
                variant=ok_result.variant("solution"), result=ok_result, build=build,
                throttle_reasons=("sw_thermal_slowdown",), phases=PhaseTimes(1.5, 2.0, 0.5, 3.0, 0.25),
                implementation="cuda-cpp"),
        RunCase(case_id="add[N=32]", kernel="add", dims={"N": 32}, status="incorrect", message="solution is incorrect",
                variant=wrong_result.variant("solution"), result=wrong_result, build=None, throttle_reasons=(),
                phases=PhaseTimes(0.0, 2.0, 0.5, 0.0, 0.0), implementation="triton"),
        RunCase(case_id="mm[N=8]", kernel="mm", dims={"N": 8}, status="failed", message="failed to build: nvcc failed",
                variant=None, result=None, build=failed_build, throttle_reasons=(), phases=PhaseTimes(build_s=2.0),
                implementation="cuda-cpp"),
    )


def _run_outcome(tmp_path: Path) -> tuple[RunOutcome, RunRequest]:
    request = RunRequest(start=tmp_path, device="cuda:0", output_dir=tmp_path, kernels=("add", "mm"),
                         command_line=("kbench-ci", "run"))
    outcome = RunOutcome(
        cases=_run_cases(), total_cases=4, config_path=tmp_path / "kbench.toml", settings=SETTINGS,
        environment={"gpu_name": "Fake GPU", "torch": "2.5"}, results_path=tmp_path / "results.json",
        report_path=tmp_path / "benchmark.md", wall_s=12.5, shard=SHARD, commit=CommitRecord("b" * 40, dirty=True),
    )
    return outcome, request


def test_a_run_results_json_reads_back_as_the_cases_settings_and_shard_it_was_written_from(tmp_path: Path) -> None:
    outcome, request = _run_outcome(tmp_path)
    data = _written(tmp_path, run_payload(outcome, request))
    assert (data["schema"], data["schema_version"]) == (RUN_SCHEMA, RUN_SCHEMA_VERSION)
    settings = settings_from_json(data["settings"])
    assert settings == SETTINGS
    assert shard_from_json(data["shard"]) == SHARD
    cases = tuple(run_case_from_json(c, seed=settings.seed, timing_method=settings.timing_method) for c in data["cases"])
    assert cases == outcome.cases


def test_a_run_results_json_written_again_from_what_was_read_is_the_same(tmp_path: Path) -> None:
    outcome, request = _run_outcome(tmp_path)
    first = _written(tmp_path, run_payload(outcome, request))
    settings = settings_from_json(first["settings"])
    cases = tuple(run_case_from_json(c, seed=settings.seed, timing_method=settings.timing_method) for c in first["cases"])
    again = RunOutcome(
        cases=cases, total_cases=outcome.total_cases, config_path=outcome.config_path, settings=settings,
        environment=first["environment"], results_path=outcome.results_path, report_path=outcome.report_path,
        wall_s=first["seconds"]["wall"], shard=shard_from_json(first["shard"]), commit=outcome.commit,
    )
    assert _without_created(_written(tmp_path, run_payload(again, request))) == _without_created(first)


# --------------------------------------------------------------------------------------------
# kbench-ci/compare
# --------------------------------------------------------------------------------------------


def _estimate(ratio: float, n_rounds: int) -> RatioEstimate:
    return RatioEstimate(ratio=ratio, ci_low=ratio - 0.01, ci_high=ratio + 0.02, p_value=0.003, n_rounds=n_rounds,
                         confidence=0.95, round_ratios=(ratio, ratio + 0.01))


def _compare_cases() -> tuple[CaseComparison, ...]:
    base, head = _variant("base"), _variant("head", scale=1.05)
    baseline = _variant("torch", role="baseline", scale=2.0)
    deciding_estimate = _estimate(1.05, 2)
    slower = CaseComparison(
        case_id="add[N=16]", kernel="add", dims={"N": 16}, verdict=Verdict.SLOWER, threshold=0.02,
        estimate=deciding_estimate, message="remeasured with 8 rounds: first run inconclusive (+3.00%)",
        measurement=Measurement(
            result=_result("add[N=16]", {"N": 16}, base, head, baseline),
            assessment=Assessment(Verdict.SLOWER, deciding_estimate,
                                  "remeasured with 8 rounds: first run inconclusive (+3.00%)"),
            rounds=2, phases=PhaseTimes(),
        ),
        first=Measurement(
            result=_result("add[N=16]", {"N": 16}, base, head),
            assessment=Assessment(Verdict.INCONCLUSIVE, _estimate(1.03, 2), None),
            rounds=4, phases=PhaseTimes(0.0, 1.0, 0.5, 2.0, 0.1),
        ),
        base_build=BuildOutcome(side="base", kernel="add", ok=True, duration_s=1.0, command="nvcc base", cached=True),
        head_build=BuildOutcome(side="head", kernel="add", ok=True, duration_s=1.2, command="nvcc head"),
        base_kind="cuda-cpp", head_kind="cuda-cpp", phases=PhaseTimes(2.2, 2.0, 1.0, 6.0, 0.2), accepted=True,
        goalposts=("atol 0.0001 → 0.001",),
        profile=(SideProfile("base", kernels=(ProfiledKernel("add_kernel", duration_ns=61344.0, dram_read_bytes=1.3e8,
                                                             occupancy_pct=84.2),)),
                 SideProfile("head", problem="ncu is not on PATH: install Nsight Compute to profile")),
    )
    incorrect = CaseComparison(
        case_id="add[N=32]", kernel="add", dims={"N": 32}, verdict=Verdict.INCORRECT, threshold=0.05,
        estimate=None, message="head is incorrect: mismatch",
        measurement=Measurement(
            result=_result("add[N=32]", {"N": 32}, _variant("base"), _variant("head", status="incorrect")),
            assessment=Assessment(Verdict.INCORRECT, None, "head is incorrect: mismatch"), rounds=0,
            phases=PhaseTimes(),
        ),
        base_kind="triton", head_kind="triton", phases=PhaseTimes(0.0, 1.0, 0.5, 0.0, 0.0),
    )
    crashed = CaseComparison(
        case_id="mm[N=8]", kernel="mm", dims={"N": 8}, verdict=Verdict.FAILED, threshold=0.02, estimate=None,
        message="the worker crashed",
        measurement=Measurement(
            result=_result("mm[N=8]", {"N": 8}, error="the worker crashed (signal 11)"),
            assessment=Assessment(Verdict.FAILED, None, "the worker crashed"), rounds=0, phases=PhaseTimes(),
        ),
        base_kind="triton", head_kind="triton",
    )
    removed = CaseComparison(
        case_id="gone[N=8]", kernel="gone", dims={"N": 8}, verdict=Verdict.REMOVED, threshold=0.02, estimate=None,
        message="in the base suite only",
    )
    return slower, incorrect, crashed, removed


SELECTION = ChangedSelection(not_affected=("mm2",), reasons={"add": ("kernels/add.cu changed (the solution)",)},
                             notes=("mm (base): no header scan was run",))


def _compare_outcome(tmp_path: Path) -> CompareOutcome:
    request = CompareRequest(start=tmp_path, base="main", device="cuda:0", output_dir=tmp_path, accept=("add",),
                             command_line=("kbench-ci", "compare"))
    return CompareOutcome(
        cases=_compare_cases(), total_cases=5,
        gate=Gate(passed=False, complete=False, counts={"slower": 1}, summary="1 slower", geomean_ratio=1.05,
                  max_geomean_slowdown=None, geomean_failed=False, failing=("add[N=32]",), accepted=("add[N=16]",)),
        base=RevisionInfo(label="base", ref="main", sha="c" * 40, description="merge base of main and HEAD",
                          tree="worktree", mode="merge-base", merge_base_of="main", config="kbench.toml",
                          note="the base has no kbench.toml"),
        head=RevisionInfo(label="head", ref=None, sha="d" * 40, description="working tree (dirty) at dddddd",
                          tree="working tree", config="kbench.toml"),
        settings=SETTINGS, request=request, environment={"gpu_name": "Fake GPU"}, results_path=tmp_path / "results.json",
        report_path=tmp_path / "benchmark.md", wall_s=30.0, setup_s=1.5, max_geomean_slowdown=None, shard=SHARD,
        selection=SELECTION,
    )


def test_a_compare_results_json_reads_back_as_the_cases_revisions_settings_and_shard(tmp_path: Path) -> None:
    outcome = _compare_outcome(tmp_path)
    data = _written(tmp_path, compare_payload(outcome))
    assert (data["schema"], data["schema_version"]) == (COMPARE_SCHEMA, COMPARE_SCHEMA_VERSION)
    settings = settings_from_json(data["settings"])
    assert settings == SETTINGS
    assert shard_from_json(data["shard"]) == SHARD
    assert selection_from_json(data["changed_only"]) == SELECTION
    assert revision_from_json("base", data["base"]) == outcome.base
    assert revision_from_json("head", data["head"]) == outcome.head
    cases = tuple(compare_case_from_json(c, seed=settings.seed) for c in data["cases"])
    assert cases == outcome.cases


def test_a_compare_results_json_written_again_from_what_was_read_is_the_same(tmp_path: Path) -> None:
    outcome = _compare_outcome(tmp_path)
    first = _written(tmp_path, compare_payload(outcome))
    cases = tuple(compare_case_from_json(c, seed=SETTINGS.seed) for c in first["cases"])
    again = CompareOutcome(
        cases=cases, total_cases=outcome.total_cases, gate=outcome.gate,
        base=revision_from_json("base", first["base"]), head=revision_from_json("head", first["head"]),
        settings=settings_from_json(first["settings"]), request=outcome.request, environment=first["environment"],
        results_path=outcome.results_path, report_path=outcome.report_path, wall_s=first["seconds"]["wall"],
        setup_s=first["seconds"]["setup"], max_geomean_slowdown=outcome.max_geomean_slowdown,
        shard=shard_from_json(first["shard"]), selection=selection_from_json(first["changed_only"]),
    )
    assert _without_created(_written(tmp_path, compare_payload(again))) == _without_created(first)


# --------------------------------------------------------------------------------------------
# kbench-ci/bench
# --------------------------------------------------------------------------------------------


def test_a_bench_results_json_reads_back_as_the_case_it_was_written_from(tmp_path: Path) -> None:
    from kbench_ci.results.read import bench_case_from_json
    from kbench_ci.results.schema import BENCH_SCHEMA, BENCH_SCHEMA_VERSION
    from kbench_ci.results.writers import BenchRecord, bench_results_payload

    case = _result("bench[M=64,N=32]", {"M": 64, "N": 32}, _variant("solution"), _variant("pytorch-eager", role="baseline"))
    record = BenchRecord(
        command_line=("kbench-ci", "bench", "k.cu", "--M=64"), solution="k.cu", ref="ref.py", implementation="cuda-cpp",
        settings=SETTINGS, baselines=("pytorch-eager",), atol=1e-3, rtol=None, precision="fp16",
        ptr_sizes={"out": "M*N"}, ptr_size=None,
    )
    first = _written(tmp_path, bench_results_payload(record, case, {"gpu_name": "Fake GPU"}))
    assert (first["schema"], first["schema_version"]) == (BENCH_SCHEMA, BENCH_SCHEMA_VERSION)
    assert first["settings"]["num_trials"] == SETTINGS.trials_per_round and first["settings"]["ptr_sizes"] == {"out": "M*N"}
    read = bench_case_from_json(first)
    assert read == case
    again = _written(tmp_path, bench_results_payload(record, read, first["environment"]))
    assert _without_created(again) == _without_created(first)


def test_a_runs_isolation_is_recorded_and_said_under_its_verdict(tmp_path: Path) -> None:
    """`run` said nowhere how its cases ran; results.json records it, benchmark.md says it
    under the verdict (what the command prints)."""
    from dataclasses import replace

    from kbench_ci.report.run import render_run

    outcome, request = _run_outcome(tmp_path)
    assert run_payload(outcome, request)["settings"]["isolation"] == "process"
    judged = replace(outcome, isolation="judge")
    assert run_payload(judged, request)["settings"]["isolation"] == "judge"
    lines = render_run(judged).splitlines()
    assert lines[2].startswith("**") and lines[4].startswith("_Judged apart (`--isolation judge`)")
    assert render_run(outcome).splitlines()[4].startswith("_Measured in one process (`--isolation process`)")
