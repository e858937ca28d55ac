"""A changed case says what its launches did (report/why.py), one line under
the table for every slower/faster case and the full table in its details; the launches survive
results.json."""

from __future__ import annotations

import json
from dataclasses import replace

from kbench_ci.report.compare import _case_details, _why_lines
from kbench_ci.report.why import MAX_IN_LINE, compiled_changes, launch_changes, short_kernel_name, why_line
from kbench_ci.results.model import CaseResult, CompiledKernel, EscapeAudit, KernelLaunch, VariantResult
from kbench_ci.results.outcome import Assessment, CaseComparison, Measurement, PhaseTimes
from kbench_ci.results.schema import to_jsonable, variant_from_json
from kbench_ci.stats import RatioEstimate, Verdict

MATMUL_BASE = KernelLaunch(name="matmul_kernel", per_call=1, share=1.0, mean_us=180.0, grid=(512, 1, 1),
                           block=(256, 1, 1), registers=168, shared_bytes=131072, blocks_per_sm=3.88, occupancy_pct=25)
MATMUL_HEAD = KernelLaunch(name="matmul_kernel", per_call=1, share=0.94, mean_us=190.0, grid=(512, 1, 1),
                           block=(256, 1, 1), registers=207, shared_bytes=131072, blocks_per_sm=3.88, occupancy_pct=13)
TAIL = KernelLaunch(name="void reduce_tail<float, 4>(float const*, float*, int)", per_call=1, share=0.06,
                    mean_us=12.0, grid=(64, 1, 1), block=(128, 1, 1), registers=32, shared_bytes=0,
                    blocks_per_sm=0.48, occupancy_pct=3)


def variant(label: str, launches: tuple[KernelLaunch, ...], *, audited: bool = True) -> VariantResult:
    audit = EscapeAudit(status="passed", event_ms=(0.2,), cupti_span_ms=(0.19,), launches=launches) if audited else None
    return VariantResult(label=label, kind="triton", role="solution", status="ok", rounds_ms=((0.2, 0.2),),
                         escape_audit=audit)


def test_kernel_names_lose_return_type_and_parameters_and_long_ones_are_cut() -> None:
    assert short_kernel_name("void reduce_tail<float, 4>(float const*, float*, int)") == "reduce_tail<float, 4>"
    assert short_kernel_name("matmul_kernel") == "matmul_kernel"
    long = short_kernel_name("void cutlass::Kernel2<" + "x" * 200 + ">(Params)")
    assert len(long) == 60 and long.endswith("…") and long.startswith("cutlass::Kernel2<")


def test_register_pressure_and_a_new_kernel_are_named_largest_first() -> None:
    changes = launch_changes((MATMUL_BASE,), (MATMUL_HEAD, TAIL))
    assert changes == [
        "`matmul_kernel`: registers 168 → 207, occupancy 25% → 13%, 180 → 190 us per call (+5.6%)",
        "a new kernel `reduce_tail<float, 4>` (6% of the time)",
    ]


def test_a_kernel_gone_and_a_launch_count_change_are_named() -> None:
    changes = launch_changes((MATMUL_BASE, TAIL), (replace(MATMUL_BASE, per_call=2),))
    assert "`matmul_kernel`: launches per call 1 → 2, 180 → 360 us per call (+100.0%)" in changes
    assert "`reduce_tail<float, 4>` no longer launched (was 6% of the time)" in changes


def test_same_launches_say_the_change_is_inside_the_kernel_and_no_trace_says_nothing() -> None:
    assert why_line(variant("base", (MATMUL_BASE,)), variant("head", (MATMUL_BASE,))) == (
        "same kernels, launch shapes and resources as the base: the change is inside the kernel code")
    assert why_line(variant("base", (MATMUL_BASE,)), variant("head", (), audited=False)) is None
    assert why_line(None, variant("head", (MATMUL_BASE,))) is None


def test_a_long_list_of_changes_is_cut_in_the_line_and_counted() -> None:
    base = tuple(KernelLaunch(name=f"k{i}", per_call=1, share=0.1, mean_us=10.0, registers=32) for i in range(5))
    head = tuple(KernelLaunch(name=f"k{i}", per_call=1, share=0.1, mean_us=10.0, registers=40) for i in range(5))
    line = why_line(variant("base", base), variant("head", head))
    assert line is not None and line.count("registers 32 → 40") == MAX_IN_LINE and line.endswith("; 2 more in the details")


def comparison(verdict: Verdict, base: VariantResult, head: VariantResult) -> CaseComparison:
    estimate = RatioEstimate(ratio=1.056, ci_low=1.05, ci_high=1.06, p_value=0.001, n_rounds=8, confidence=0.95,
                             round_ratios=(1.056,) * 8)
    result = CaseResult(case_id="tmm[M=4096]", dims={"M": 4096}, seed=42, variants=(base, head), timing_method="cuda_event")
    measurement = Measurement(result=result, assessment=Assessment(verdict, estimate, None), rounds=8, phases=PhaseTimes())
    return CaseComparison(case_id="tmm[M=4096]", kernel="tmm", dims={"M": 4096}, verdict=verdict, threshold=0.02,
                          estimate=estimate, message=None, measurement=measurement)


def test_the_report_has_one_why_line_per_changed_case_and_the_table_in_the_details() -> None:
    slower = comparison(Verdict.SLOWER, variant("base", (MATMUL_BASE,)), variant("head", (MATMUL_HEAD, TAIL)))
    unchanged = comparison(Verdict.UNCHANGED, variant("base", (MATMUL_BASE,)), variant("head", (MATMUL_BASE,)))
    lines = _why_lines([slower, unchanged])
    assert lines[0] == "## Why it changed"
    assert [line for line in lines if line.startswith("- ")] == [
        "- `tmm[M=4096]` slower +5.60%: `matmul_kernel`: registers 168 → 207, occupancy 25% → 13%, "
        "180 → 190 us per call (+5.6%); a new kernel `reduce_tail<float, 4>` (6% of the time)"
    ]
    assert _why_lines([unchanged]) == []
    details = "\n".join(_case_details(slower))
    assert "What one call launches (CUPTI, the audited calls):" in details
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in details.splitlines() if "`reduce_tail" in line
            and line.startswith("|")]
    assert rows == [["head", "`reduce_tail<float, 4>`", "1", "6%", "12", "64", "128", "32", "0", "0.48", "3%"]]


def test_launches_survive_results_json() -> None:
    original = variant("head", (MATMUL_HEAD, KernelLaunch(name="Memcpy DtoD (Device -> Device)", per_call=1,
                                                            share=0.0, mean_us=1.5)))
    assert variant_from_json(json.loads(json.dumps(to_jsonable(original)))) == original


def test_compiler_changes_lead_the_line_and_a_split_autotune_pick_is_flagged_on_an_unchanged_case() -> None:
    base_k = CompiledKernel(name="matmul_kernel", source="triton", registers=168, spill_stores=0, shared_bytes=131072,
                            num_warps=8, num_stages=3, autotune_pick="BLOCK_M: 128, num_warps: 8, num_stages: 3")
    head_k = replace(base_k, registers=207, spill_stores=48, autotune_pick="BLOCK_M: 64, num_warps: 8, num_stages: 3")
    base = replace(variant("base", (MATMUL_BASE,)), compiled=(base_k,))
    head = replace(variant("head", (MATMUL_BASE,)), compiled=(head_k,))
    assert compiled_changes((base_k,), (head_k,)) == [
        "compiled `matmul_kernel`: registers 168 → 207, spill stores 0 → 48, autotuner picked "
        "`BLOCK_M: 128, num_warps: 8, num_stages: 3` on base, `BLOCK_M: 64, num_warps: 8, num_stages: 3` on head"
    ]
    line = why_line(base, head)
    assert line is not None and line.startswith("compiled `matmul_kernel`: registers 168 → 207")
    unchanged = comparison(Verdict.UNCHANGED, base, head)
    (flag,) = [entry for entry in _why_lines([unchanged]) if entry.startswith("- ")]
    assert flag.startswith("- `tmm[M=4096]` unchanged: ⚠️ `matmul_kernel`: the autotuner picked `BLOCK_M: 128")
    details = "\n".join(_case_details(unchanged))
    assert "What the compiler made of the kernels:" in details and "`BLOCK_M: 64, num_warps: 8, num_stages: 3`" in details
    # without a trace, the compiler's figures alone still explain a change
    assert why_line(replace(base, escape_audit=None), replace(head, escape_audit=None)) is not None


def test_the_details_say_whether_base_and_head_share_one_autotune_pick_or_tuned_apart() -> None:
    """One pick read from the autotune cache (one compiled version), two tunings
    that agree (a version per config on each side), or two picks."""
    from kbench_ci.report.why import autotune_sharing

    pick = "BLOCK_M: 128, num_warps: 8, num_stages: 3"
    tuned = CompiledKernel(name="matmul_kernel", source="triton", registers=168, autotune_pick=pick, versions=3)
    cached = replace(tuned, versions=1)
    base = replace(variant("base", (MATMUL_BASE,)), compiled=(tuned,))
    assert autotune_sharing(base, replace(base, label="head", compiled=(cached,))) == [
        f"`matmul_kernel`: one pick shared through the autotune cache, `{pick}`"]
    assert autotune_sharing(base, replace(base, label="head", compiled=(tuned,))) == [
        f"`matmul_kernel`: tuned apart (3 and 3 versions compiled), both picked `{pick}`"]
    other = replace(tuned, autotune_pick="BLOCK_M: 64, num_warps: 4, num_stages: 4")
    assert autotune_sharing(base, replace(base, label="head", compiled=(other,))) == [
        f"`matmul_kernel`: tuned apart, base picked `{pick}` and head `BLOCK_M: 64, num_warps: 4, num_stages: 4`"]
    plain = replace(tuned, autotune_pick=None)
    assert autotune_sharing(replace(base, compiled=(plain,)), replace(base, label="head", compiled=(plain,))) == []
    details = "\n".join(_case_details(comparison(Verdict.UNCHANGED, base, replace(base, label="head", compiled=(cached,)))))
    assert "Autotuning: `matmul_kernel`: one pick shared through the autotune cache" in details


def test_compiled_kernels_survive_results_json() -> None:
    kernel = CompiledKernel(name="vadd", source="ptxas", registers=12, spill_stores=0, spill_loads=0, stack_bytes=0,
                            shared_bytes=0)
    original = replace(variant("head", ()), compiled=(kernel,))
    assert variant_from_json(json.loads(json.dumps(to_jsonable(original)))) == original


def test_template_instances_sharing_a_name_are_matched_by_symbol() -> None:
    """Found in review: vadd<float> and vadd<half> both read `vadd`; matched by name, an unchanged
    pair showed "registers 12 → 16"."""
    floats = CompiledKernel(name="vadd", source="ptxas", registers=12, symbol="_Z4vaddIfEvPKT_S2_PS0_i")
    halves = CompiledKernel(name="vadd", source="ptxas", registers=16, symbol="_Z4vaddI6__halfEvPKT_S3_PS1_i")
    assert compiled_changes((floats, halves), (floats, halves)) == []
    assert compiled_changes((floats, halves), (floats, replace(halves, registers=24))) == [
        "compiled `vadd`: registers 16 → 24"]
