"""benchmark.md of ``bench``: the summary, the speedups, correctness per variant, how it was timed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kbench_ci.report.markdown import (
    AUDIT_EXPLAINED,
    CLOCK_EXPLAINED,
    SUMMARY_STATS,
    audit_rows,
    cell,
    clock_rows,
    correctness_cell,
    environment_line,
    fmt,
    fmt_error,
    isolation_line,
    speed_of_light_text,
    speedup_text,
    table,
    time_unit,
    timing_cell,
    variant_summaries,
)
from kbench_ci.results.model import CaseResult, VariantResult
from kbench_ci.stats import Summary, speedup

#: under the speedups of a Triton kernel in CPU mode, where "2,637× slower than eager" would read
#: as a verdict on the kernel
INTERPRETER_CAVEAT = (
    "CPU mode: the Triton kernel ran in Triton's interpreter (TRITON_INTERPRET=1, a Python loop over its "
    "program instances), so these speedups say nothing about its speed on a GPU; they show that it ran."
)


def cache_mode_text(flush: bool, device: str) -> str:
    """What the timed calls found in the caches, in the words of the device they ran on."""
    if not flush:
        return "warm"
    if device.startswith("cpu"):
        return "cold (the CPU's caches evicted before every trial)"
    return "cold (L2 flushed before every trial)"


def render_bench(
    case: CaseResult,
    *,
    solution_name: str,
    ref_name: str,
    implementation: str,
    environment: Mapping[str, Any] | None,
    num_warmup: int,
    num_trials: int,
    discard_first: int,
    cache_mode: str,
    notes: Sequence[str] = (),
    isolation: str = "process",
) -> str:
    solution = case.variants[0]
    summaries = variant_summaries(case)
    verdict = "PASS" if solution.status == "ok" else ("FAIL" if solution.status == "incorrect" else "ERROR")
    header_rows: list[tuple[str, str]] = [
        ("solution", f"`{solution_name}`"),
        ("reference", f"`{ref_name}`"),
        ("implementation", implementation),
        *environment_line(environment),
        ("dims", ", ".join(f"{k}={v}" for k, v in case.dims.items()) or "—"),
        ("seed", str(case.seed)),
        ("correctness", f"**{verdict}**" + (f" — {cell(solution.message, 600)}" if solution.message and verdict != "PASS" else "")),
        ("timing method", timing_cell(case.timing_method, case.timing_description)),
        ("cache mode", cache_mode),
        ("trials", f"{num_warmup} warm-up, {num_trials} timed, first {discard_first} discarded (kept in results.json)"),
    ]
    parts = [f"# kbench-ci bench — `{solution_name}`", "", isolation_line(isolation), "", table(["", ""], header_rows), ""]

    if notes:
        parts += ["Notes: " + cell("; ".join(notes), 4000), ""]
    if case.error:
        parts += [f"> **Worker incident:** {cell(case.error, 2000)}", ""]

    timed = [v for v in case.variants if v.label in summaries]
    parts += _timing_lines(case, summaries)
    with_light = [v for v in case.variants if v.speed_of_light is not None]
    if with_light:
        parts += ["## Speed of light", "",
                  *(f"- `{v.label}`: {speed_of_light_text(v.speed_of_light)}" for v in with_light if v.speed_of_light), ""]

    parts += _speedup_lines(case, summaries, timed, environment)
    parts += _correctness_lines(case)
    clock = clock_rows([(f"`{v.label}`", v) for v in case.variants])
    if clock is not None:
        parts += ["## The judge's clock (`--isolation judge`)", "", CLOCK_EXPLAINED, "", clock, ""]
    audit = audit_rows([(f"`{v.label}`", v) for v in case.variants])
    if audit is not None:
        parts += ["## GPU work audit (CUPTI)", "", AUDIT_EXPLAINED, "", audit, ""]
    elif case.timing_method == "cuda_event":
        parts += ["## GPU work audit (CUPTI)", "", "Not audited: no variant was timed.", ""]
    return "\n".join(parts)


def _timing_lines(case: CaseResult, summaries: Mapping[str, Summary]) -> list[str]:
    """The timing table of the variants that were timed, and why the others were not."""
    timed = [v for v in case.variants if v.label in summaries]
    parts = ["## Timing", ""]
    if timed:
        unit, scale = time_unit([summaries[v.label].median for v in timed])
        rows = []
        for label, getter in SUMMARY_STATS:
            rows.append([f"{label} ({unit})", *(fmt(getter(summaries[v.label]), scale) for v in timed)])
        rows.append([
            f"95% CI of median ({unit})",
            *(f"[{fmt(summaries[v.label].ci_low, scale)}, {fmt(summaries[v.label].ci_high, scale)}]" for v in timed),
        ])
        rows.append(["samples", *(str(summaries[v.label].n) for v in timed)])
        rows.append(["first call (load/JIT/compile, ms)", *(fmt(v.first_call_ms, 1.0) for v in timed)])
        if any(v.compile_ms is not None for v in timed):
            rows.append(["explicit compile (ms)", *(fmt(v.compile_ms, 1.0) for v in timed)])
        parts += [table(["", *(f"`{v.label}`" for v in timed)], rows, align=["left", *("right" for _ in timed)]), ""]
        parts += ["First-call and compile times are wall clock and are never part of the samples.", ""]
    else:
        parts += ["Nothing was timed: no variant passed its correctness check.", ""]
    untimed = [v for v in case.variants if v.label not in summaries]
    for variant in untimed:
        parts.append(f"- `{variant.label}` not timed: {variant.status}" + (f" — {cell(variant.message, 2000)}" if variant.message else ""))
    if untimed:
        parts.append("")
    return parts


def _speedup_lines(case: CaseResult, summaries: Mapping[str, Summary], timed: Sequence[VariantResult],
                   environment: Mapping[str, Any] | None) -> list[str]:
    """The solution's speedup over each timed baseline, or why none is claimed."""
    solution = case.variants[0]
    baselines = [v for v in timed if v.role == "baseline"]
    parts = ["## Speedup of the solution (baseline time / solution time)", ""]
    if solution.label in summaries and baselines:
        rows = []
        for stat in ("median", "mean"):
            rows.append([
                stat,
                *(speedup_text(speedup(getattr(summaries[b.label], stat), getattr(summaries[solution.label], stat)), 3)
                  for b in baselines),
            ])
        parts += [table(["", *(f"vs `{b.label}`" for b in baselines)], rows), ""]
    elif solution.label not in summaries:
        parts += ["No speedup is claimed: the solution did not pass its correctness check.", ""]
    else:
        parts += ["No baselines were timed.", ""]
    on_cpu = case.timing_method == "host_time" and not (environment or {}).get("gpu_name")
    if on_cpu and baselines and any(v.kind == "triton" for v in case.variants if v.role == "solution"):
        parts += [f"_{INTERPRETER_CAVEAT}_", ""]
    return parts


def _correctness_lines(case: CaseResult) -> list[str]:
    """Every variant's correctness trials: result, seeds, errors, tolerance."""
    parts = [
        "## Correctness",
        "",
        "Checked against the eager `reference()` on fresh seeded inputs, every output poisoned (NaN / sentinel) "
        "before each call, inputs checked unmodified.",
        "",
    ]
    rows = []
    for variant in case.variants:
        c = variant.correctness
        tolerance = "—"
        if c and c.trials and c.trials[0].outputs:
            o = c.trials[0].outputs[0]
            tolerance = f"atol={o.atol:g} rtol={o.rtol:g} ({o.tolerance_source})"
        rows.append([
            f"`{variant.label}`",
            correctness_cell(variant),
            ", ".join(str(t.seed) for t in c.trials) if c else "—",
            fmt_error(c.max_abs_error) if c else "—",
            fmt_error(c.max_rel_error) if c else "—",
            str(c.mismatched) if c else "—",
            tolerance,
            cell(variant.message, 300) if variant.status != "ok" else "; ".join(
                part for part in ("outputs re-checked after timing" if variant.post_timing_check else "", variant.fresh_inputs)
                if part
            ),
        ])
    parts += [table(["variant", "result", "seeds", "max abs err", "max rel err", "mismatched", "tolerance", "note"], rows), ""]
    return parts
