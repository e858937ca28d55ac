"""benchmark.md for ``compare`` and ``run``. Returns strings, never prints; numbers are rounded
here and nowhere else."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kbench_ci.report.markdown import correctness_cell, environment_line, fmt, table, time_unit
from kbench_ci.results.model import CaseResult, VariantResult
from kbench_ci.stats import Summary, Verdict, summarize

if TYPE_CHECKING:
    from kbench_ci.gate.compare import CaseComparison, CompareOutcome
    from kbench_ci.gate.run import BuildOutcome, RunCase, RunOutcome

#: a marker per verdict, so the table reads at a glance (and without colour)
MARKERS: Mapping[Verdict, str] = {
    Verdict.INCORRECT: "❌",
    Verdict.FAILED: "💥",
    Verdict.SLOWER: "🔴",
    Verdict.INCONCLUSIVE: "❔",
    Verdict.REMOVED: "➖",
    Verdict.FIXED: "🩹",
    Verdict.ADDED: "🆕",
    Verdict.FASTER: "🟢",
    Verdict.UNCHANGED: "⚪",
}

_RUN_MARKERS = {"ok": "✅", "incorrect": "❌", "failed": "💥"}


def _pct(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "—"
    return f"{(ratio - 1.0) * 100:+.2f}%"


def _code(text: str) -> str:
    return f"`{text}`"


def _cell(text: str | None, limit: int = 160) -> str:
    """One table cell: one line, pipes escaped, long text cut (the details keep all of it)."""
    if not text:
        return ""
    line = " ".join(str(text).split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    return line.replace("|", "\\|")


def _median(variant: VariantResult | None) -> float | None:
    if variant is None or not variant.timed:
        return None
    return summarize(variant.samples_ms).median


def _with_unit(value_ms: float | None) -> str:
    if value_ms is None:
        return "—"
    unit, scale = time_unit([value_ms])
    return f"{fmt(value_ms, scale)} {unit}"


def _side_correctness(variant: VariantResult | None) -> str:
    return "—" if variant is None else _RUN_MARKERS.get(variant.status, "💥")


def _throttle_notice(cases: Sequence[CaseComparison] | Sequence[RunCase]) -> list[str]:
    throttled = [c.case_id for c in cases if c.throttled]
    if not throttled:
        return []
    return [f"> ⚠️ Measured while the GPU was throttled: {', '.join(_code(c) for c in throttled)}.", ""]


def _result_facts(result: CaseResult) -> list[tuple[str, str]]:
    """What the worker saw around the case: GPU state before and after, the timer, incidents."""
    facts = [
        ("GPU before", _gpu_state_text(result.gpu_state_before)),
        ("GPU after", _gpu_state_text(result.gpu_state_after)),
        ("timing", result.timing_method + (f" — {result.timing_description}" if result.timing_description else "")),
    ]
    if result.error:
        facts.append(("worker incident", _cell(result.error, 500)))
    return facts


def _compiler_output(build: BuildOutcome | None, title: str) -> list[str]:
    """A failed build's compiler output (its last 6000 characters), or nothing."""
    if build is None or build.ok or not build.compiler_output:
        return []
    return [title, "", "```", build.compiler_output.rstrip()[-6000:], "```", ""]


def _gpu_state_text(state: Mapping[str, Any] | None) -> str:
    if not state:
        return "not read (no nvidia-smi, or the CPU)"
    parts = []
    if state.get("sm_clock_mhz") is not None:
        parts.append(f"SM {state['sm_clock_mhz']:g} MHz")
    if state.get("memory_clock_mhz") is not None:
        parts.append(f"memory {state['memory_clock_mhz']:g} MHz")
    if state.get("temperature_c") is not None:
        parts.append(f"{state['temperature_c']:g} °C")
    if state.get("power_w") is not None:
        parts.append(f"{state['power_w']:g} W")
    reasons = state.get("throttle_reasons") or []
    parts.append("throttled: " + ", ".join(reasons) if reasons else "not throttled")
    return ", ".join(parts)


def _summary_rows(variants: Sequence[tuple[str, VariantResult | None]]) -> str | None:
    summaries: dict[str, Summary] = {
        label: summarize(v.samples_ms) for label, v in variants if v is not None and v.timed
    }
    if not summaries:
        return None
    unit, scale = time_unit([s.median for s in summaries.values()])
    labels = list(summaries)
    rows = []
    for name, getter in (
        ("median", lambda s: s.median), ("mean", lambda s: s.mean), ("std", lambda s: s.std),
        ("min", lambda s: s.min), ("max", lambda s: s.max), ("p20", lambda s: s.p20), ("p80", lambda s: s.p80),
    ):
        rows.append([f"{name} ({unit})", *(fmt(getter(summaries[label]), scale) for label in labels)])
    rows.append([f"95% CI of median ({unit})", *(
        f"[{fmt(summaries[label].ci_low, scale)}, {fmt(summaries[label].ci_high, scale)}]" for label in labels
    )])
    rows.append(["samples", *(str(summaries[label].n) for label in labels)])
    by_label = dict(variants)
    rows.append(["rounds × samples", *(
        f"{len(by_label[label].rounds_ms)} × {len(by_label[label].rounds_ms[0]) if by_label[label].rounds_ms else 0}"  # type: ignore[union-attr]
        for label in labels
    )])
    rows.append(["first call (ms)", *(fmt(by_label[label].first_call_ms) for label in labels)])  # type: ignore[union-attr]
    return table(["", *labels], rows, align=["left", *("right" for _ in labels)])


def _correctness_rows(variants: Sequence[tuple[str, VariantResult | None]]) -> str:
    rows = []
    for label, variant in variants:
        if variant is None:
            rows.append([label, "not run", "", "", ""])
            continue
        c = variant.correctness
        rows.append([
            label,
            correctness_cell(variant),
            ", ".join(str(t.seed) for t in c.trials) if c else "—",
            "yes" if variant.post_timing_check else ("no" if variant.post_timing_check is False else "—"),
            _cell(variant.message, 300) if variant.status != "ok" else "",
        ])
    return table(["side", "correctness", "seeds", "re-checked after timing", "message"], rows)


def _mermaid_label(text: str) -> str:
    # xychart-beta takes quoted category names; keep them free of quotes and brackets.
    return text.replace('"', "'").replace("[", "(").replace("]", ")")


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------


def sort_worst_first(cases: Sequence[CaseComparison]) -> list[CaseComparison]:
    """By verdict severity, then by the size of the slowdown (largest first)."""
    return sorted(
        cases,
        key=lambda c: (-c.verdict.severity, -(c.estimate.ratio if c.estimate is not None else 0.0)),
    )


def render_compare(outcome: CompareOutcome) -> str:
    gate = outcome.gate
    settings = outcome.settings
    parts = ["# kbench-ci compare", "", f"**{gate.summary}**", ""]
    if outcome.request.no_fail and not gate.passed and gate.complete:
        parts += ["_`--no-fail`: reported without failing the job._", ""]
    thresholds = sorted({c.threshold for c in outcome.cases})
    threshold_text = (
        f"{outcome.request.threshold * 100:g}% (--threshold)" if outcome.request.threshold is not None
        else (", ".join(f"{t * 100:g}%" for t in thresholds) or "—") + " (per kernel)"
    )
    parts += [
        f"base: {outcome.base.description} · head: {outcome.head.description} · "
        f"threshold {threshold_text} · {settings.rounds} rounds × {settings.trials_per_round} trials per side"
        + (f" · device `{settings.device}`"),
        "",
    ]
    if outcome.base.note:
        parts += [f"> **No baseline:** {outcome.base.note}.", ""]
    if gate.geomean_ratio is not None:
        limit = (
            f" (limit +{gate.max_geomean_slowdown * 100:g}%{' — exceeded' if gate.geomean_failed else ''})"
            if gate.max_geomean_slowdown is not None else ""
        )
        parts += [f"Geometric mean of head/base over compared cases: {_pct(gate.geomean_ratio)}{limit}", ""]
    parts += _throttle_notice(outcome.cases)

    ordered = sort_worst_first(outcome.cases)
    if ordered:
        rows = []
        for case in ordered:
            estimate = case.estimate
            base_median, head_median = _median(case.base), _median(case.head)
            verdict = f"{MARKERS[case.verdict]} **{case.verdict.value}**"
            if case.remeasured:
                verdict += " (remeasured)"
            if case.throttled:
                verdict += " ⚠️ throttled"
            correctness = (
                f"{_side_correctness(case.base)} / {_side_correctness(case.head)}"
                if case.measurement is not None else "—"
            )
            rows.append([
                _code(case.kernel),
                ", ".join(f"{k}={v}" for k, v in case.dims.items()),
                _with_unit(base_median),
                _with_unit(head_median),
                _pct(estimate.ratio) if estimate else "—",
                f"[{_pct(estimate.ci_low)}, {_pct(estimate.ci_high)}]" if estimate else "—",
                verdict,
                correctness,
                _cell(case.message, 120),
            ])
        parts += [
            table(
                ["kernel", "shape", "base median", "head median", "change", "95% CI", "verdict",
                 "correct (base / head)", "note"],
                rows,
                align=["left", "left", "right", "right", "right", "right", "left", "center", "left"],
            ),
            "",
        ]
    else:
        parts += ["No case has been measured yet.", ""]
    if not gate.complete:
        parts += [f"_{outcome.total_cases - len(outcome.cases)} case(s) not measured yet._", ""]

    chart = _compare_chart(ordered)
    if chart:
        parts += ["## Change per case", "", chart, ""]

    if ordered:
        parts += ["## Cases", ""]
        for case in ordered:
            parts += _case_details(case)

    parts += ["## Environment", "", table(["", ""], [
        *environment_line(outcome.environment),
        ("base", f"{outcome.base.description} ({outcome.base.tree}, config {outcome.base.config or '—'})"),
        ("head", f"{outcome.head.description} ({outcome.head.tree}, config {outcome.head.config or '—'})"),
    ]), ""]
    parts += ["## How it was measured", "", *_how_compare(outcome), ""]
    return "\n".join(parts)


def _compare_chart(cases: Sequence[CaseComparison]) -> str | None:
    timed = [c for c in cases if c.estimate is not None and math.isfinite(c.estimate.ratio)]
    if not timed:
        return None
    values = [round((c.estimate.ratio - 1.0) * 100, 3) for c in timed]  # type: ignore[union-attr]
    low = min(0.0, min(values))
    high = max(0.0, max(values))
    pad = max(0.5, (high - low) * 0.1)
    labels = ", ".join(f'"{_mermaid_label(c.case_id)}"' for c in timed)
    return "\n".join([
        "```mermaid",
        "xychart-beta",
        '  title "Head vs base: change of the median time (%, positive = slower)"',
        f"  x-axis [{labels}]",
        f'  y-axis "change (%)" {low - pad:.2f} --> {high + pad:.2f}',
        f"  bar [{', '.join(f'{v:g}' for v in values)}]",
        "```",
    ])


def _case_details(case: CaseComparison) -> list[str]:
    estimate = case.estimate
    headline = f"{MARKERS[case.verdict]} {case.case_id} — {case.verdict.value}"
    if estimate is not None:
        headline += f" {_pct(estimate.ratio)}"
    lines = ["<details>", f"<summary>{html.escape(headline)}</summary>", ""]
    if case.message:
        lines += [f"**Note:** {_cell(case.message, 2000)}", ""]
    facts: list[tuple[str, str]] = [("threshold", f"{case.threshold * 100:g}%")]
    if estimate is not None:
        facts += [
            ("head / base (median ratio)", f"{estimate.ratio:.4f} ({_pct(estimate.ratio)})"),
            (f"{estimate.confidence:.0%} CI (paired bootstrap)", f"[{estimate.ci_low:.4f}, {estimate.ci_high:.4f}]"),
            ("p-value (Wilcoxon signed-rank over rounds)" if estimate.n_rounds > 1 else "p-value (Mann-Whitney U)",
             f"{estimate.p_value:.3g}"),
            ("rounds", str(estimate.n_rounds)),
            ("per-round ratios", ", ".join(f"{r:.4f}" for r in estimate.round_ratios)),
        ]
    if case.first is not None:
        first = case.first.estimate
        facts.append((
            "first measurement",
            f"{case.first.verdict.value}, {case.first.rounds} rounds"
            + (f", ratio {first.ratio:.4f} [{first.ci_low:.4f}, {first.ci_high:.4f}], p = {first.p_value:.3g}" if first else "")
            + f"; measured again with {case.measurement.rounds if case.measurement else '?'} rounds, which decided",
        ))
    if case.result is not None:
        facts += _result_facts(case.result)
    if case.throttled:
        facts.append(("⚠️ throttled", ", ".join(case.throttle_reasons)))
    for build in (case.base_build, case.head_build):
        if build is not None:
            facts.append((
                f"{build.side} build",
                ("ok" if build.ok else f"FAILED: {_cell(build.message, 300)}")
                + (f" ({build.duration_s:.1f} s)" if build.duration_s else " (reused)")
                + (f" — `{_cell(build.command, 400)}`" if build.command else ""),
            ))
    facts.append((
        "time spent",
        f"build {case.phases.build_s:.1f} s, load {case.phases.load_s:.1f} s, "
        f"correctness {case.phases.correctness_s:.1f} s, timing {case.phases.timing_s:.1f} s",
    ))
    lines += [table(["", ""], facts), ""]
    variants = [("base", case.base), ("head", case.head)]
    samples = _summary_rows(variants)
    if samples:
        lines += [samples, ""]
    if case.measurement is not None:
        lines += [_correctness_rows(variants), ""]
    for build in (case.base_build, case.head_build):
        if build is not None:
            lines += _compiler_output(build, f"{build.side} compiler output:")
    lines += ["</details>", ""]
    return lines


def _how_compare(outcome: CompareOutcome) -> list[str]:
    s = outcome.settings
    factor = outcome.request.remeasure_factor
    return [
        f"- Base and head of each case run in one worker process. Each side is checked first on "
        f"{s.correctness_trials} seeds ({s.seed}…{s.seed + s.correctness_trials - 1}) against the reference, outputs "
        "poisoned before each call; a side that is wrong is never timed.",
        f"- Then both are timed in {s.rounds} interleaved rounds (base, head / head, base / …), each round "
        f"{s.trials_per_round} timed trials per side after {s.discard_first} discarded, "
        f"{s.num_warmup} warm-up launches before the first round; timer `{s.timing_method}`"
        + (", cold L2" if s.flush_l2 and s.timing_method == "cuda_event" else "") + ".",
        "- change = median(head samples) / median(base samples) − 1. The 95% CI bootstraps whole rounds, "
        "paired across sides, then samples within them; the p-value is a Wilcoxon signed-rank test of the "
        "per-round log ratios.",
        "- **slower**: ratio > 1 + threshold, CI lower bound > 1 and p < 0.05. **faster**: the mirror image. "
        "**unchanged**: the whole CI inside [1/(1+t), 1+t]. Otherwise **inconclusive**.",
        f"- A suspected regression (slower, or inconclusive with ratio > 1 + threshold) is measured again with "
        f"{s.rounds * factor} rounds, and that measurement alone decides.",
        "- The gate fails on any slower, incorrect or failed case"
        + (f", or when the geometric mean of head/base exceeds +{outcome.max_geomean_slowdown * 100:g}%"
           if outcome.max_geomean_slowdown is not None else "")
        + ". See docs/compare.md.",
    ]


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------


def render_run(outcome: RunOutcome) -> str:
    settings = outcome.settings
    parts = ["# kbench-ci run", "", f"**{outcome.summary}**", "",
             f"suite `{outcome.config_path}` · {settings.rounds} rounds × {settings.trials_per_round} trials · "
             f"device `{settings.device}`", ""]
    parts += _throttle_notice(outcome.cases)
    order = {"failed": 0, "incorrect": 1, "ok": 2}
    ordered = sorted(outcome.cases, key=lambda c: order[c.status])
    if ordered:
        rows = []
        for case in ordered:
            summary = summarize(case.variant.samples_ms) if case.variant is not None and case.variant.timed else None
            if summary is not None:
                unit, scale = time_unit([summary.median])
                median = f"{fmt(summary.median, scale)} {unit}"
                ci = f"[{fmt(summary.ci_low, scale)}, {fmt(summary.ci_high, scale)}] {unit}"
            else:
                median = ci = "—"
            rows.append([
                _code(case.kernel),
                ", ".join(f"{k}={v}" for k, v in case.dims.items()),
                median,
                ci,
                str(summary.n) if summary else "0",
                correctness_cell(case.variant) if case.variant is not None else "—",
                f"{_RUN_MARKERS[case.status]} **{case.status}**" + (" ⚠️ throttled" if case.throttled else ""),
                _cell(case.message, 120),
            ])
        parts += [table(
            ["kernel", "shape", "median", "95% CI of median", "samples", "correctness", "status", "note"], rows,
            align=["left", "left", "right", "right", "right", "left", "left", "left"],
        ), ""]
    else:
        parts += ["No case has been measured yet.", ""]
    if not outcome.complete:
        parts += [f"_{outcome.total_cases - len(outcome.cases)} case(s) not measured yet._", ""]
    if ordered:
        parts += ["## Cases", ""]
        for case in ordered:
            parts += _run_details(case)
    parts += ["## Environment", "", table(["", ""], environment_line(outcome.environment)), ""]
    parts += ["## How it was measured", "",
              f"- Each case runs in its own worker process: checked on {settings.correctness_trials} seeds against "
              "the reference first (outputs poisoned before each call), then, if correct, timed in "
              f"{settings.rounds} rounds of {settings.trials_per_round} trials (after {settings.discard_first} "
              f"discarded per round, {settings.num_warmup} warm-up launches), timer `{settings.timing_method}`.",
              "- The median's 95% CI is the distribution-free order-statistic interval.",
              "- The run fails (exit 1) when any case is incorrect or failed.", ""]
    return "\n".join(parts)


def _run_details(case: RunCase) -> list[str]:
    lines = ["<details>", f"<summary>{html.escape(f'{_RUN_MARKERS[case.status]} {case.case_id} — {case.status}')}</summary>", ""]
    if case.message:
        lines += [f"**Note:** {_cell(case.message, 2000)}", ""]
    facts: list[tuple[str, str]] = [("implementation", case.implementation)]
    if case.result is not None:
        facts += _result_facts(case.result)
    if case.build is not None:
        facts.append(("build", ("ok" if case.build.ok else f"FAILED: {_cell(case.build.message, 300)}")
                      + (f" — `{_cell(case.build.command, 400)}`" if case.build.command else "")))
    lines += [table(["", ""], facts), ""]
    samples = _summary_rows([("solution", case.variant)])
    if samples:
        lines += [samples, ""]
    if case.variant is not None:
        lines += [_correctness_rows([("solution", case.variant)]), ""]
    lines += _compiler_output(case.build, "compiler output:")
    lines += ["</details>", ""]
    return lines
