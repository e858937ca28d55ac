"""The PR comment of a 200-case compare stays under
GitHub's 65,536 characters and keeps, for every slower case, its table row and its one line of
why; the unchanged cases leave the main table for a folded one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kbench_ci.github.comment import REPORT_ONLY_NOTE, build_body, comment_summary
from kbench_ci.report.compare import render_compare
from kbench_ci.results.model import CaseResult, CompiledKernel, EscapeAudit, KernelLaunch, MeasureSettings, VariantResult
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

GITHUB_LIMIT = 65_536


def variant(label: str, registers: int, ms: float) -> VariantResult:
    launch = KernelLaunch(name="void matmul_kernel<128, 256, 64>(float const*, float const*, float*, int, int, int)",
                          per_call=1, share=1.0, mean_us=ms * 1e3, grid=(512, 1, 1), block=(256, 1, 1),
                          registers=registers, shared_bytes=147456, blocks_per_sm=3.88, occupancy_pct=13)
    audit = EscapeAudit(status="passed", event_ms=(ms,) * 5, cupti_span_ms=(ms * 0.99,) * 5, escaped_ms=(0.0,) * 5,
                        streams=(7,), launches=(launch,))
    compiled = (CompiledKernel(name="matmul_kernel", source="triton", registers=registers, spill_stores=0,
                               shared_bytes=147456, num_warps=8, num_stages=3, autotune_pick="BLOCK_M: 128"),)
    rounds = tuple(tuple(ms * (1 + 0.001 * ((r * 7 + i) % 5)) for i in range(10)) for r in range(20))
    return VariantResult(label=label, kind="triton", role="solution", status="ok", rounds_ms=rounds, escape_audit=audit,
                         compiled=compiled, fresh_inputs="8 versions of the inputs; outputs of all 200 timed calls checked")


def case(index: int, slower: bool) -> CaseComparison:
    ratio = 1.042 if slower else 1.001
    estimate = RatioEstimate(ratio=ratio, ci_low=ratio - 0.004, ci_high=ratio + 0.004, p_value=0.001 if slower else 0.6,
                             n_rounds=20, confidence=0.95, round_ratios=(ratio,) * 20)
    dims = {"M": 1024 + index, "N": 4096, "K": 4096}
    case_id = f"tmm[M={dims['M']},N=4096,K=4096]"
    base = variant("base", 168, 0.180)
    head = variant("head", 207 if slower else 168, 0.180 * ratio)
    result = CaseResult(case_id=case_id, dims=dims, seed=42, variants=(base, head), timing_method="cuda_event")
    verdict = Verdict.SLOWER if slower else Verdict.UNCHANGED
    measurement = Measurement(result=result, assessment=Assessment(verdict, estimate, None), rounds=20, phases=PhaseTimes())
    return CaseComparison(case_id=case_id, kernel="tmm", dims=dims, verdict=verdict, threshold=0.02, estimate=estimate,
                          message=None, measurement=measurement)


def outcome(cases: list[CaseComparison], tmp_path: Path) -> CompareOutcome:
    slower = sum(c.verdict is Verdict.SLOWER for c in cases)
    gate = Gate(passed=slower == 0, complete=True, counts={"slower": slower, "unchanged": len(cases) - slower},
                summary=f"{slower} slower of {len(cases)}", geomean_ratio=1.002, max_geomean_slowdown=None,
                geomean_failed=False, failing=tuple(c.case_id for c in cases if c.verdict is Verdict.SLOWER))
    settings = MeasureSettings(device="cuda", seed=42, correctness_trials=3, timing_method="cuda_event", num_warmup=10,
                               trials_per_round=10, discard_first=1, rounds=20, flush_l2=True)
    side = RevisionInfo(label="base", ref="main", sha="a" * 40, description="main (aaaaaaa)", tree="worktree")
    return CompareOutcome(
        cases=tuple(cases), total_cases=len(cases), gate=gate, base=side, head=replace(side, label="head", ref="HEAD"),
        settings=settings, request=CompareRequest(start=tmp_path, base="main", device="cuda"), environment=None,
        results_path=tmp_path / "results.json", report_path=tmp_path / "benchmark.md", wall_s=600.0, setup_s=5.0,
        max_geomean_slowdown=None,
    )


def test_a_200_case_comment_fits_and_keeps_every_slower_row_and_why_line(tmp_path: Path) -> None:
    cases = [case(index, slower=index % 20 == 0) for index in range(200)]
    markdown = render_compare(outcome(cases, tmp_path))
    assert len(markdown) > GITHUB_LIMIT  # the full report does not fit: the comment is its summary
    body, shortened = build_body(comment_summary(markdown))
    print(f"report {len(markdown):,} characters, comment {len(body):,}")
    assert len(body) < GITHUB_LIMIT and REPORT_ONLY_NOTE in body
    slower = [c for c in cases if c.verdict is Verdict.SLOWER]
    assert len(slower) == 10
    for item in slower:
        row = next(line for line in body.splitlines() if line.startswith("| `tmm`") and f"M={item.dims['M']}" in line)
        assert "slower" in row
        assert f"- `{item.case_id}` slower +4.20%: compiled `matmul_kernel`: registers 168 → 207" in body
        (line,) = [entry for entry in body.splitlines() if entry.startswith(f"- `{item.case_id}` slower")]
        assert line.count("registers 168 → 207") == 1  # the launch does not repeat the compiler's figure
    assert "190 unchanged cases" in body and "## Environment" not in body and "## Cases" not in body


def test_folding_takes_unchanged_cases_details_before_any_slower_ones(tmp_path: Path) -> None:
    """The full report (a job summary, a comment of another tool) folded to the comment's size."""
    cases = [case(index, slower=index % 20 == 0) for index in range(200)]
    body, shortened = build_body(render_compare(outcome(cases, tmp_path)))
    assert shortened and len(body) < GITHUB_LIMIT
    kept = [line for line in body.splitlines() if line.startswith("<summary>")]
    assert kept and all("slower" in line for line in kept), kept
    main_table = body.split("## Why it changed")[0]
    assert main_table.count("| `tmm`") == 10  # unchanged rows are out of the main table


def test_a_small_suite_shows_the_cases_that_matter_and_folds_the_unchanged_ones(tmp_path: Path) -> None:
    """The table is of the cases that matter; unchanged ones fold into one
    table as soon as one case changed. A small suite where nothing changed keeps one table."""
    cases = [case(index, slower=index == 0) for index in range(6)]
    markdown = render_compare(outcome(cases, tmp_path))
    main, folded = markdown.split("<summary>5 unchanged cases</summary>")
    assert main.count("| `tmm`") == 1 and folded.split("</details>")[0].count("| `tmm`") == 5
    quiet = render_compare(outcome([case(index, slower=False) for index in range(6)], tmp_path))
    assert quiet.count("| `tmm`") == 6 and "unchanged cases</summary>" not in quiet


def test_the_comment_is_a_summary_also_with_trend_links(tmp_path: Path) -> None:
    """Found in review: the trend line went on top first, and the report's title was then not
    where the summary looked for it."""
    import json

    from kbench_ci.github.comment import compose_body

    cases = [case(index, slower=index == 0) for index in range(3)]
    (tmp_path / "benchmark.md").write_text(render_compare(outcome(cases, tmp_path)))
    (tmp_path / "results.json").write_text(json.dumps({
        "schema": "kbench-ci/compare", "schema_version": 1, "gate": {"passed": False, "summary": "1 slower of 3", "counts": {"slower": 1}},
        "environment": {"gpu_name": "NVIDIA H200"}, "cases": [{"case_id": cases[0].case_id, "verdict": "slower"}],
    }))
    body, _, _ = compose_body(tmp_path, env={}, pages_url="https://example.github.io/repo/")
    assert "example.github.io" in body
    assert "## Environment" not in body and "## How it was measured" not in body and REPORT_ONLY_NOTE in body


def test_how_it_was_measured_says_how_the_sides_ran(tmp_path: Path) -> None:
    """Under the judge the report said "Base and head of each case run in one worker process"
    and named fixed seeds."""
    cases = [case(0, slower=False)]
    in_process = render_compare(outcome(cases, tmp_path))
    judged = render_compare(replace(outcome(cases, tmp_path), isolation="judge"))
    how = in_process.split("## How it was measured")[1]
    assert "run in one worker process" in how and "--isolation judge" not in how
    assert "run in one worker process" not in judged
    assert "worker process of its own (`--isolation judge`)" in judged and "drawn from the OS's entropy" in judged


def test_the_line_under_the_verdict_says_how_the_cases_were_judged(tmp_path: Path) -> None:
    """With the judge, nothing the command printed nor the PR comment's top said the judge
    ran (only a section far down benchmark.md did); in process, nothing said what that leaves open."""
    from kbench_ci.cli.suite_common import headline

    cases = [case(0, slower=True)]
    in_process = headline(render_compare(outcome(cases, tmp_path))).splitlines()
    judged = headline(render_compare(replace(outcome(cases, tmp_path), isolation="judge"))).splitlines()
    assert in_process[4].startswith("_Measured in one process (`--isolation process`)") and "can pass" in in_process[4]
    assert judged[4].startswith("_Judged apart (`--isolation judge`)") and "runs none of their code" in judged[4]
