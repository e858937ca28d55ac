"""Synthetic compare outcomes of a 3-case and a 12-case suite, on an H200 and in CPU mode, with
every kind of row a reviewer meets: an incorrect kernel whose shapes share one note, slower
cases small and large (+4%, +48%, +169%), a faster one, an inconclusive one, unchanged ones, and
the suite's baselines. The comment tests and scripts/render_comment_screenshots.py render them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kbench_ci.results.model import (
    CaseResult,
    CompiledKernel,
    EscapeAudit,
    KernelLaunch,
    MeasureSettings,
    VariantResult,
)
from kbench_ci.results.outcome import (
    Assessment,
    CaseComparison,
    CompareOutcome,
    CompareRequest,
    Gate,
    Measurement,
    PhaseTimes,
    RevisionInfo,
)
from kbench_ci.stats import RatioEstimate, Verdict

INCORRECT_NOTE = "head is incorrect: modified its input(s) x (seed 42)"


def _variant(label: str, ms: float, *, gpu: bool, registers: int = 32, role: str = "solution",
             status: str = "ok", message: str | None = None) -> VariantResult:
    rounds = tuple(tuple(ms * (1 + 0.001 * ((r * 7 + i) % 5)) for i in range(10)) for r in range(20))
    if status != "ok":
        return VariantResult(label=label, kind="triton", role=role, status=status, message=message)  # type: ignore[arg-type]
    if not gpu:
        return VariantResult(label=label, kind="triton", role=role, status="ok", rounds_ms=rounds)  # type: ignore[arg-type]
    launch = KernelLaunch(name="void kernel<128, 256, 64>(float const*, float*, int)", per_call=1, share=1.0,
                          mean_us=ms * 1e3, grid=(512, 1, 1), block=(256, 1, 1), registers=registers,
                          shared_bytes=49152, blocks_per_sm=3.88, occupancy_pct=50)
    audit = EscapeAudit(status="passed", event_ms=(ms,) * 5, cupti_span_ms=(ms * 0.99,) * 5, escaped_ms=(0.0,) * 5,
                        streams=(7,), launches=(launch,))
    compiled = (CompiledKernel(name="kernel", source="triton", registers=registers, spill_stores=0,
                               shared_bytes=49152, num_warps=8, num_stages=3),)
    return VariantResult(label=label, kind="triton", role=role, status="ok", rounds_ms=rounds,  # type: ignore[arg-type]
                         escape_audit=audit, compiled=compiled)


def _case(kernel: str, dims: dict[str, int], verdict: Verdict, ratio: float | None, *, gpu: bool,
          message: str | None = None, baselines: tuple[tuple[str, float | None], ...] = ()) -> CaseComparison:
    case_id = f"{kernel}[{','.join(f'{k}={v}' for k, v in dims.items())}]"
    base_ms = 0.0021 * max(dims.values()) ** 0.5
    estimate = None if ratio is None else RatioEstimate(
        ratio=ratio, ci_low=ratio * 0.99, ci_high=ratio * 1.01, p_value=0.001 if verdict is not Verdict.INCONCLUSIVE else 0.2,
        n_rounds=20, confidence=0.95, round_ratios=(ratio,) * 20)
    base = _variant("base", base_ms, gpu=gpu)
    if verdict is Verdict.INCORRECT:
        head = _variant("head", base_ms, gpu=gpu, status="incorrect", message=message)
    else:
        head = _variant("head", base_ms * (ratio or 1.0), gpu=gpu, registers=40 if verdict is Verdict.SLOWER else 32)
    extra = tuple(
        _variant(name, base_ms * (ratio or 1.0) * (speedup or 1.0), gpu=gpu, role="baseline",
                 status="ok" if speedup is not None else "unavailable",
                 message=None if speedup is not None else "torch.compile needs a C compiler")
        for name, speedup in baselines
    )
    result = CaseResult(case_id=case_id, dims=dims, seed=42, variants=(base, head, *extra),
                        timing_method="cuda_event" if gpu else "host_time")
    measurement = Measurement(result=result, assessment=Assessment(verdict, estimate, message), rounds=20,
                              phases=PhaseTimes())
    return CaseComparison(case_id=case_id, kernel=kernel, dims=dims, verdict=verdict, threshold=0.02,
                          estimate=estimate, message=message, measurement=measurement)


def suite_cases(count: int, *, gpu: bool = True) -> list[CaseComparison]:
    """The suite's cases in its own order: 3 (incorrect, slower, unchanged) or 12."""
    eager = (("pytorch-eager", 0.35 if gpu else 1 / 2637), ("torch-compile", None))
    if count == 3:
        return [
            _case("vadd", {"N": 4096}, Verdict.INCORRECT, None, gpu=gpu, message=INCORRECT_NOTE),
            _case("tmm", {"M": 1024, "N": 4096, "K": 4096}, Verdict.SLOWER, 1.042, gpu=gpu),
            _case("layernorm", {"M": 4096, "N": 8192}, Verdict.UNCHANGED, 1.001, gpu=gpu, baselines=eager),
        ]
    assert count == 12
    return [
        *(_case("vadd", {"N": n}, Verdict.INCORRECT, None, gpu=gpu, message=INCORRECT_NOTE)
          for n in (4096, 65536, 1048576, 16777216)),
        _case("tmm", {"M": 1024, "N": 4096, "K": 4096}, Verdict.SLOWER, 1.042, gpu=gpu),
        _case("tmm", {"M": 2048, "N": 4096, "K": 4096}, Verdict.SLOWER, 1.48, gpu=gpu,
              message="remeasured with 40 rounds: first run slower (+47.1%)"),
        _case("tmm", {"M": 4096, "N": 4096, "K": 4096}, Verdict.UNCHANGED, 1.003, gpu=gpu),
        _case("softmax", {"M": 4096, "N": 1024}, Verdict.FASTER, 0.88, gpu=gpu, baselines=eager[:1]),
        _case("softmax", {"M": 4096, "N": 32768}, Verdict.INCONCLUSIVE, 1.015, gpu=gpu, baselines=eager[:1]),
        _case("layernorm", {"M": 4096, "N": 8192}, Verdict.SLOWER, 2.69, gpu=gpu, baselines=eager),
        _case("layernorm", {"M": 256, "N": 1024}, Verdict.UNCHANGED, 0.998, gpu=gpu, baselines=eager),
        _case("relu", {"N": 1048576}, Verdict.UNCHANGED, 1.0, gpu=gpu),
    ]


def suite_outcome(cases: list[CaseComparison], folder: Path, *, gpu: bool = True) -> CompareOutcome:
    counts: dict[str, int] = {}
    for case in cases:
        counts[case.verdict.value] = counts.get(case.verdict.value, 0) + 1
    failing = tuple(c.case_id for c in cases if c.fails_gate)
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts.items()) + f" of {len(cases)}"
    gate = Gate(passed=not failing, complete=True, counts=counts, summary=summary, geomean_ratio=1.09,
                max_geomean_slowdown=None, geomean_failed=False, failing=failing)
    settings = MeasureSettings(device="cuda" if gpu else "cpu", seed=42, correctness_trials=3,
                               timing_method="cuda_event" if gpu else "host_time", num_warmup=10,
                               trials_per_round=10, discard_first=1, rounds=20, flush_l2=True)
    side = RevisionInfo(label="base", ref="main", sha="a" * 40, description="main (aaaaaaa)", tree="worktree")
    environment = (
        {"gpu_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132, "l2_cache_bytes": 60 * 2**20, "device": "cuda:0"}
        if gpu else {"gpu_name": None, "torch_version": "2.13.0", "triton_version": "3.6.0"}
    )
    return CompareOutcome(
        cases=tuple(cases), total_cases=len(cases), gate=gate, base=side,
        head=replace(side, label="head", ref="HEAD", sha="b" * 40, description="HEAD (bbbbbbb)"),
        settings=settings, request=CompareRequest(start=folder, base="main", device=settings.device),
        environment=environment, results_path=folder / "results.json", report_path=folder / "benchmark.md",
        wall_s=600.0, setup_s=5.0, max_geomean_slowdown=None,
    )


def write_report(count: int, folder: Path, *, gpu: bool = True) -> Path:
    """benchmark.md and results.json of the suite in ``folder``, as ``compare --output-dir`` writes
    them for ``kbench-ci comment``; returns ``folder``."""
    import json

    from kbench_ci.report.compare import render_compare

    folder.mkdir(parents=True, exist_ok=True)
    outcome = suite_outcome(suite_cases(count, gpu=gpu), folder, gpu=gpu)
    (folder / "benchmark.md").write_text(render_compare(outcome))
    gate = {"passed": outcome.gate.passed, "summary": outcome.gate.summary, "counts": dict(outcome.gate.counts)}
    (folder / "results.json").write_text(json.dumps({"schema": "kbench-ci/compare", "schema_version": 1, "gate": gate, "cases": []}))
    return folder
