"""benchmark.md for ``compare`` and ``run``. Returns strings, never prints; numbers are rounded
here and nowhere else."""

from __future__ import annotations

import html
import json
import math
import shlex
from collections.abc import Mapping, Sequence

from kbench_ci.report.markdown import (
    AUDIT_EXPLAINED,
    audit_rows,
    baselines_cell,
    cell,
    clock_rows,
    code,
    code_cell,
    compiler_output,
    correctness_rows,
    environment_line,
    fmt,
    isolation_line,
    median_ms,
    notes_lines,
    pct,
    result_facts,
    seeds_notice,
    seeds_range,
    summary_rows,
    table,
    throttle_notice,
    time_unit,
    with_unit,
)
from kbench_ci.report.why import (
    COMPILED_HEADERS,
    LAUNCH_HEADERS,
    autotune_sharing,
    autotune_split,
    compiled_rows,
    launch_changes,
    launch_rows,
    profile_lines,
    why_line,
)
from kbench_ci.results.decide import p_words
from kbench_ci.results.outcome import CaseComparison, CompareOutcome, GpuSlot, gpu_labels, gpus_shared
from kbench_ci.stats import Verdict
from kbench_ci.suite.settings import DEFAULT_ISOLATION, MAX_ADAPTIVE_ROUNDS

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


def _mermaid_label(text: str) -> str:
    # xychart-beta takes quoted category names; keep them free of quotes and brackets:
    # `vadd[N=4096]` reads `vadd N=4096` (not `vadd(N=4096)`, which looks like a call).
    return text.replace('"', "'").replace("[", " ").replace("]", "")


#: the charts' colours: slower bars, faster bars, the threshold line
_SLOWER_COLOUR, _FASTER_COLOUR, _LINE_COLOUR = "#cf222e", "#1a7f37", "#57606a"


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------


#: longest note shown under the comment's table (a case's details keep all of it)
NOTE_LIMIT = 300

#: under the table in CPU mode, where the baselines' column would read as a GPU speedup
CPU_BASELINES_CAVEAT = (
    "CPU mode: these are CPU times, Triton kernels run in Triton's interpreter (a Python loop over the "
    "program instances), so the head-vs-baselines figures say nothing about a GPU."
)

#: cases above which the `unchanged` ones leave the main table for a folded one even when no
#: case changed
MAX_TABLE_ROWS = 30


def sort_worst_first(cases: Sequence[CaseComparison]) -> list[CaseComparison]:
    """By verdict severity; within a verdict, in the order the suite lists the cases (``cases``
    comes in that order: the sort is stable), so a reader finds a kernel where the file has it."""
    return sorted(cases, key=lambda c: -c.verdict.severity)


def render_compare(
    outcome: CompareOutcome, *, gpu_of: Mapping[str, str] | None = None, preamble: Sequence[str] = ()
) -> str:
    """benchmark.md of a comparison. ``merge`` adds ``gpu_of`` (case id → the GPU model of the
    shard that measured it: a GPU column when there are several) and ``preamble`` (lines under the
    verdict: the shards, the geometric mean per GPU model, what is missing)."""
    ordered = sort_worst_first(outcome.cases)
    on_gpu = not outcome.settings.device.startswith("cpu")
    parts = _verdict_lines(outcome, preamble)
    parts += _cases_table(outcome, ordered, gpu_of, on_gpu=on_gpu)
    parts += _why_lines(ordered, on_gpu=on_gpu)

    repro = _reproduce_lines(outcome)
    if repro:
        parts += ["## Reproduce locally", "",
                  "From a checkout of the head (each command compares the working tree with the base):", "",
                  "```sh", *repro, "```", ""]

    chart = _compare_chart(ordered)
    if chart:
        parts += ["## Slower and faster cases", "", chart, ""]

    if ordered:
        parts += ["## Cases", ""]
        reasons = outcome.selection.reasons if outcome.selection is not None else {}
        for case in ordered:
            parts += _case_details(case, reasons.get(case.kernel, ()))

    parts += ["## Environment", "", table(["", ""], [
        *environment_line(outcome.environment),
        ("base", cell(f"{outcome.base.description} ({outcome.base.tree}, config {outcome.base.config or '—'})", 600)),
        ("head", cell(f"{outcome.head.description} ({outcome.head.tree}, config {outcome.head.config or '—'})", 600)),
    ]), ""]
    parts += ["## How it was measured", "", *_how_compare(outcome), ""]
    return "\n".join(parts)


def _verdict_lines(outcome: CompareOutcome, preamble: Sequence[str]) -> list[str]:
    """The report's top, above the table: the verdict, how the cases ran, what the job does, the
    caller's preamble, the notices, what was compared and at what settings."""
    gate = outcome.gate
    settings = outcome.settings
    parts = ["# kbench-ci compare", "", f"**{gate.summary}**", "", isolation_line(outcome.isolation), "",
             *seeds_notice(outcome.isolation, outcome.settings.seeds)]
    if not gate.passed and gate.complete:
        parts += [f"_{job_effect(outcome)}_", ""]
    parts += list(preamble)
    parts += gpus_notice(outcome.gpus)
    if gate.accepted:
        reason = outcome.request.accept_reason or "accepted with " + ", ".join(
            f"`--accept {entry}`" for entry in outcome.request.accept
        )
        parts += [
            f"_Accepted regression(s): {', '.join(code(c) for c in gate.accepted)} ({reason}). They are shown, "
            "but neither fail the gate nor enter the geometric mean; an incorrect case can never be accepted._",
            "",
        ]
    thresholds = sorted({c.threshold for c in outcome.cases})
    threshold_text = (
        f"{outcome.request.threshold * 100:g}% (--threshold)" if outcome.request.threshold is not None
        else (", ".join(f"{t * 100:g}%" for t in thresholds) or "—") + " (per kernel)"
    )
    parts += [
        f"base: {cell(outcome.base.description, 300)} · head: {cell(outcome.head.description, 300)} · "
        f"threshold {threshold_text} · {settings.rounds} rounds"
        + (f" (+ up to {settings.time_budget_s:g} s more until decided)" if settings.time_budget_s > 0 else "")
        + f" × {settings.trials_per_round} trials per side"
        + (f" · device `{settings.device}`"),
        "",
    ]
    if outcome.base.note:
        parts += [f"> **No baseline:** {cell(outcome.base.note, 2000)}.", ""]
    if outcome.head.note:
        parts += [f"> **Settings not applied:** {cell(outcome.head.note, 2000)}.", ""]
    parts += _selection_lines(outcome)
    if gate.geomean_ratio is not None:
        limit = (
            f" (limit +{gate.max_geomean_slowdown * 100:g}%{' — exceeded' if gate.geomean_failed else ''})"
            if gate.max_geomean_slowdown is not None else ""
        )
        parts += [f"Geometric mean of head/base over compared cases: {pct(gate.geomean_ratio)}{limit}", ""]
    parts += throttle_notice(outcome.cases)
    return parts


def _cases_table(
    outcome: CompareOutcome, ordered: Sequence[CaseComparison], gpu_of: Mapping[str, str] | None, *, on_gpu: bool
) -> list[str]:
    """The cases' table, worst first, with its notes; `unchanged` rows folded where others are."""
    lanes = gpu_labels(outcome.gpus, outcome.cases)
    # A column for the suite's baselines only where a case has some: the head's speedup over each.
    with_baselines = any(case.baselines for case in ordered)
    with_gpu = gpu_column(gpu_of) or lanes is not None
    gpu_of = gpu_of if gpu_column(gpu_of) else lanes
    # The table is of the cases that matter: `unchanged` rows go to a folded table of their own
    # (which the comment folds first when it runs long) as soon as one case is anything else,
    # or when a large suite's would fill the comment. A small suite with nothing but `unchanged`
    # keeps its one plain table.
    unchanged = [case for case in ordered if case.verdict is Verdict.UNCHANGED]
    quiet = unchanged if len(ordered) > MAX_TABLE_ROWS or len(unchanged) < len(ordered) else []
    loud = [case for case in ordered if case not in quiet]
    parts: list[str] = []
    if ordered:
        # Five columns (six with the baselines, seven with several GPU models) fit GitHub's
        # comment width (900 px) without a horizontal scroll bar: each cell is short, and the
        # notes, the only long text, are listed under the table, a note shared by shapes once.
        rows = [_case_row(case, gpu_of if with_gpu else None, with_baselines=with_baselines)
                for case in [*loud, *quiet]]
        headers = ["case", *(["GPU"] if with_gpu else []), "median, base → head", "change [95% CI]",
                   *(["head vs baselines"] if with_baselines else []), "verdict"]
        align = ["left", *(["left"] if with_gpu else []), "right", "right", *(["left"] if with_baselines else []), "left"]
        quiet_rows = rows[len(loud):]
        parts += [table(headers, rows[:len(loud)], align=align), ""] if loud else []
        parts += _notes_list(loud, ordered)
        if with_baselines and not on_gpu:
            parts += [f"_{CPU_BASELINES_CAVEAT}_", ""]
        if quiet:
            parts += ["<details>", f"<summary>{len(quiet)} unchanged case{'s' if len(quiet) > 1 else ''}</summary>", "",
                      table(headers, quiet_rows, align=align), "", *_notes_list(quiet, ordered), "</details>", ""]
    else:
        parts += ["No case has been measured yet.", ""]
    if not outcome.gate.complete:
        parts += [f"_{outcome.total_cases - len(outcome.cases)} case(s) not measured yet._", ""]
    return parts


def _case_row(case: CaseComparison, gpu_of: Mapping[str, str] | None, *, with_baselines: bool) -> list[str]:
    """One case's cells; a GPU cell where ``gpu_of`` is given (several GPUs)."""
    estimate = case.estimate
    verdict = f"{MARKERS[case.verdict]}\u00a0**{case.verdict_text}**"
    if case.remeasured:
        verdict += " (remeasured)"
    if case.throttled:
        verdict += " ⚠️ throttled"
    return [
        case_cell(case),
        *([cell(gpu_of.get(case.case_id, "—"), 80)] if gpu_of is not None else []),
        medians_cell(median_ms(case.base), median_ms(case.head)),
        f"{pct(estimate.ratio)} [{pct(estimate.ci_low)}, {pct(estimate.ci_high)}]" if estimate else "—",
        *([baselines_cell(case.baselines, separator="<br>")] if with_baselines else []),
        verdict,
    ]


def gpus_notice(gpus: tuple[GpuSlot, ...]) -> list[str]:
    """Under the verdict when ``--gpus`` spread the cases over several workers: which GPUs, and
    plainly, when two workers shared one GPU, that the timings are not valid."""
    if len(gpus) < 2:
        return []
    lines = [f"Cases spread over {len(gpus)} GPU workers (`--gpus`): " + ", ".join(slot.label for slot in gpus)
             + ". A case's base and head always ran on the same GPU.", ""]
    if gpus_shared(gpus):
        lines += [
            "> ⚠️ **Timings not valid:** two workers shared one GPU (`--gpus` named an index twice), so each "
            "case was timed while another ran beside it. Use this only to test the distribution; do not trust "
            "its verdicts or medians.",
            "",
        ]
    return lines


def gpu_column(gpu_of: Mapping[str, str] | None) -> bool:
    """A GPU column only when the cases ran on more than one GPU model (merged shards)."""
    return gpu_of is not None and len(set(gpu_of.values())) > 1


def reproduce_command(outcome: CompareOutcome, kernel: str, seeds: Sequence[int] = ()) -> str:
    """The local command that compares one kernel of the head with the same base commit, under
    the same isolation where it was not the default (a judged failure is judged again), and
    with ``--seeds`` where ``seeds`` are given (:func:`failing_seeds`)."""
    words = ["kbench-ci", "compare", "--base", outcome.base.sha or outcome.base.ref or "BASE", "--kernel", kernel]
    if outcome.isolation != DEFAULT_ISOLATION:
        words += ["--isolation", outcome.isolation]
    if seeds:
        words += ["--seeds", ",".join(str(seed) for seed in seeds)]
    if outcome.request.base_mode != "merge-base":
        words += ["--base-mode", outcome.request.base_mode]
    if outcome.head.config and outcome.head.config != "kbench.toml":
        words += ["--config", outcome.head.config]
    return " ".join(shlex.quote(word) for word in words)


def failing_seeds(outcome: CompareOutcome, case: CaseComparison) -> tuple[int, ...]:
    """The seeds of ``case``'s head's failed correctness trials, where a local run could not
    make the same contents without them: the judge drew them from the OS's entropy, or
    ``--seeds`` chose them. In one process without ``--seeds`` a trial's seed is the suite's
    (``seed + k``), made again by the same command. Empty for a case that is not ``incorrect``,
    or whose head failed only in a timed call (its message names that call's seed)."""
    if case.verdict is not Verdict.INCORRECT or (outcome.isolation != "judge" and not outcome.settings.seeds):
        return ()
    head = case.head
    if head is None or head.correctness is None:
        return ()
    return tuple(trial.seed for trial in head.correctness.trials if not trial.passed)


def _reproduce_lines(outcome: CompareOutcome) -> list[str]:
    """One line per command that measures a failing kernel again (each command once, however
    many of its shapes failed), followed by what failed: ``kbench-ci compare … --kernel vadd  # 4 incorrect``.
    A kernel whose incorrect cases failed trials at seeds a local run would not make again
    carries them (every shape's, each once), so that the line checks the same contents."""
    failed: dict[str, dict[str, int]] = {}
    seeds: dict[str, dict[int, None]] = {}
    for case in sort_worst_first(outcome.cases):
        if case.fails_gate:
            verdicts = failed.setdefault(case.kernel, {})
            verdicts[case.verdict.value] = verdicts.get(case.verdict.value, 0) + 1
            seeds.setdefault(case.kernel, {}).update(dict.fromkeys(failing_seeds(outcome, case)))
    return [
        f"{reproduce_command(outcome, kernel, tuple(seeds[kernel]))}  # "
        + ", ".join(f"{n} {verdict}" for verdict, n in verdicts.items())
        for kernel, verdicts in failed.items()
    ]


def _given(seeds: Sequence[int]) -> str:
    """The judged description's words for ``--seeds``: the correctness trials' seeds were not drawn."""
    return f"; the correctness trials' at the seeds --seeds gave, {seeds_range(seeds)}" if seeds else ""


def job_effect(outcome: CompareOutcome) -> str:
    """What a failed gate does to the job, as the caller said (the action fails the job in its
    own step, after the comment) or as this command's exit code does. A gate failed only by
    cases that failed on their ref.py, setup() or settings exits 2 whatever the caller said:
    the action's gate step passes that on, whatever fail-on-regression says."""
    if outcome.user_failures and not outcome.kernel_failed:
        return ("kbench-ci compare exits 2: the failing cases failed on their ref.py, setup() or settings, not on "
                "their kernels; the job running it fails until those files are fixed")
    if outcome.request.job_note:
        return outcome.request.job_note
    if outcome.request.no_fail:
        return "`--no-fail`: kbench-ci compare exits 0 although the gate failed"
    return "kbench-ci compare exits 1: the job running it fails"


#: bars drawn at most per chart; the largest changes are kept
MAX_CHART_BARS = 20


def _compare_chart(cases: Sequence[CaseComparison]) -> str | None:
    """A chart of the slower cases and one of the faster ones: horizontal bars, each as long as
    its change (no bar is clipped: the axis runs from 0 past the largest), each case's threshold
    drawn as a line. None when no case is slower or faster.

    Mermaid's xychart draws every bar from the edge of the plot, not from 0: a negative change
    on an axis below 0 reads wrong (a +4% bar from -8%), and a series that is zero for some
    cases draws a stub for each of them (a series of zeros drew a grey bar per case). So each
    chart has one series, of one verdict, with no zeros in it: the size of the change, in the
    verdict's colour; the bars lie along the chart so that long case names stay readable."""
    lines: list[str] = []
    for verdict, colour, name in ((Verdict.SLOWER, _SLOWER_COLOUR, "slower"), (Verdict.FASTER, _FASTER_COLOUR, "faster")):
        these = [c for c in cases if c.verdict is verdict and c.estimate is not None and math.isfinite(c.estimate.ratio)]
        if not these:
            continue
        largest = sorted(these, key=lambda c: -abs(c.estimate.ratio - 1.0))[:MAX_CHART_BARS]  # type: ignore[union-attr]
        shown = [c for c in these if c in largest]  # in the table's order
        sizes = [abs(c.estimate.ratio - 1.0) * 100 for c in shown]  # type: ignore[union-attr]
        thresholds = [c.threshold * 100 for c in shown]
        labels = ", ".join(f'"{_mermaid_label(c.case_id)} {pct(c.estimate.ratio)}"' for c in shown)  # type: ignore[union-attr]
        config = {
            "xyChart": {"width": 860, "height": 190 + 32 * len(shown)},
            "themeVariables": {"xyChart": {"plotColorPalette": f"{colour}, {_LINE_COLOUR}"}},
        }
        title = (f"{len(shown)} {name} case{'s' if len(shown) > 1 else ''}"
                 + (f" (the largest of {len(these)})" if len(shown) < len(these) else ""))
        lines += [
            "```mermaid",
            f"%%{{init: {json.dumps(config)}}}%%",
            "xychart-beta horizontal",
            f'  title "{title}: change of the median time (%)"',
            f"  x-axis [{labels}]",
            f'  y-axis "{"slower" if verdict is Verdict.SLOWER else "faster"} by (%)" 0 --> {_round_up(max(*sizes, *thresholds) * 1.08):g}',
            f"  bar [{', '.join(f'{size:.4g}' for size in sizes)}]",
            # each case's own threshold: a bar that ends left of the line is within it
            f"  line [{', '.join(f'{t:g}' for t in thresholds)}]",
            "```",
            "",
        ]
    if not lines:
        return None
    return "\n".join(["Bars: the size of each change; line: the case's threshold.", "", *lines[:-1]])


def _round_up(value: float) -> float:
    """``value`` rounded up to a round axis end: 1, 2 or 5 times a power of ten, or a multiple of it."""
    step = 10 ** math.floor(math.log10(value)) if value > 0 else 1.0
    return math.ceil(value / step) * step


def _selection_lines(outcome: CompareOutcome) -> list[str]:
    """``--changed-only``: what was left out and why, or why everything was measured."""
    selection = outcome.selection
    if selection is None:
        return []
    if selection.everything_reason is not None:
        lines = [f"**Changed only:** every kernel measured: {cell(selection.everything_reason, 600)}."]
    elif selection.not_affected:
        names = ", ".join(code(name) for name in selection.not_affected)
        lines = [f"**Changed only:** {len(selection.not_affected)} kernel(s) not affected by this change (not measured): "
                 f"{names}."]
    else:
        lines = ["**Changed only:** the change reaches every selected kernel."]
    lines += [f"_{cell(note, 600)}_" for note in selection.notes]
    return [*lines, ""]


def _why_lines(cases: Sequence[CaseComparison], *, on_gpu: bool = True) -> list[str]:
    """One line per slower or faster case: what its launches did (report/why.py). In CPU mode
    there are no launches to read: a case gets a line only where there is something to say."""
    lines = []
    for case in cases:
        if case.verdict not in (Verdict.SLOWER, Verdict.FASTER):
            split = autotune_split(case.base, case.head)
            if split is not None:
                lines.append(f"- {code(case.case_id)} {case.verdict.value}: ⚠️ {split}")
            continue
        why = why_line(case.base, case.head)
        if why is None and not on_gpu:
            continue
        estimate = f" {pct(case.estimate.ratio)}" if case.estimate is not None else ""
        lines.append(f"- {code(case.case_id)} {case.verdict.value}{estimate}: "
                     + (why or "no launch anatomy on both sides (the CUPTI audit did not run or could not be read)"))
    return ["## Why it changed", "", *lines, ""] if lines else []


def case_cell(case: CaseComparison) -> str:
    """The kernel and its shape: ```tmm` M=1024, N=4096, K=4096`` (the cell wraps at the commas)."""
    shape = ", ".join(f"{k}={v}" for k, v in case.dims.items())
    return f"{code(case.kernel)} {shape}" if shape else code(case.kernel)


def medians_cell(base_ms: float | None, head_ms: float | None) -> str:
    """``134.7 → 140.3 us``: both medians, the unit once where they share it."""
    if base_ms is None or head_ms is None:
        return f"{with_unit(base_ms)} → {with_unit(head_ms)}"
    base_unit, base_scale = time_unit([base_ms])
    head_unit, head_scale = time_unit([head_ms])
    if base_unit == head_unit:
        return f"{fmt(base_ms, base_scale)} → {fmt(head_ms, head_scale)}\u00a0{head_unit}"
    return f"{with_unit(base_ms)} → {with_unit(head_ms)}"


def _notes_list(shown: Sequence[CaseComparison], every: Sequence[CaseComparison]) -> list[str]:
    """The notes of the table's cases, under it: one line per note, naming the cases that share
    it (``vadd`, all 4 shapes: …`` when every shape of a kernel has it)."""
    groups: dict[tuple[str, str], list[CaseComparison]] = {}
    for case in shown:
        if case.message:
            groups.setdefault((case.kernel, cell(case.message, NOTE_LIMIT)), []).append(case)
    lines = []
    for (kernel, note), sharing in groups.items():
        shapes = sum(c.kernel == kernel for c in every)
        if len(sharing) > 1 and len(sharing) == shapes:
            who = f"{code(kernel)}, all {shapes} shapes"
        else:
            who = ", ".join(code(c.case_id) for c in sharing)
        lines.append(f"- {who}: {note}")
    return [*lines, ""] if lines else []


def _compiled_table(case: CaseComparison) -> list[str]:
    base = case.base.compiled if case.base is not None else ()
    head = case.head.compiled if case.head is not None else ()
    if not base and not head:
        return []
    sharing = autotune_sharing(case.base, case.head)
    return ["What the compiler made of the kernels:", "",
            table(COMPILED_HEADERS, compiled_rows("base", base) + compiled_rows("head", head)), "",
            *([f"Autotuning: {'; '.join(sharing)}.", ""] if sharing else [])]


def _launch_table(case: CaseComparison) -> list[str]:
    base = case.base.escape_audit.launches if case.base is not None and case.base.escape_audit is not None else ()
    head = case.head.escape_audit.launches if case.head is not None and case.head.escape_audit is not None else ()
    if not base and not head:
        return []
    lines = ["What one call launches (CUPTI, the audited calls):", "",
             table(LAUNCH_HEADERS, launch_rows("base", base) + launch_rows("head", head)), ""]
    if base and head:
        changes = launch_changes(base, head)
        lines += [("Changed: " + "; ".join(changes)) if changes else "Same kernels, shapes and resources on both sides.", ""]
    return lines


def _case_details(case: CaseComparison, reasons: Sequence[str] = ()) -> list[str]:
    estimate = case.estimate
    headline = f"{MARKERS[case.verdict]} {case.case_id} — {case.verdict_text}"
    if estimate is not None:
        headline += f" {pct(estimate.ratio)}"
    lines = ["<details>", f"<summary>{html.escape(headline)}</summary>", ""]
    if case.message:
        lines += [f"**Note:** {cell(case.message, 2000)}", ""]
    facts: list[tuple[str, str]] = [("threshold", f"{case.threshold * 100:g}%")]
    if reasons:
        facts.append(("measured because", cell("; ".join(reasons), 600)))
    if estimate is not None:
        facts += [
            ("head / base (median ratio)", f"{estimate.ratio:.4f} ({pct(estimate.ratio)})"),
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
            + (f", ratio {first.ratio:.4f} [{first.ci_low:.4f}, {first.ci_high:.4f}], {p_words(first)}" if first else "")
            + f"; measured again with {case.measurement.rounds if case.measurement else '?'} rounds, which decided",
        ))
    if case.result is not None:
        facts += result_facts(case.result)
    if case.throttled:
        facts.append(("⚠️ throttled", cell(", ".join(case.throttle_reasons), 300)))
    for build in (case.base_build, case.head_build):
        if build is not None:
            facts.append((
                f"{build.side} build",
                ("ok" if build.ok else f"FAILED: {cell(build.message, 300)}")
                + (" (cached)" if build.cached else f" ({build.duration_s:.1f} s)" if build.duration_s else " (reused)")
                + (f" — {code_cell(build.command)}" if build.command else ""),
            ))
    facts.append((
        "time spent",
        f"build {case.phases.build_s:.1f} s, load {case.phases.load_s:.1f} s, "
        f"correctness {case.phases.correctness_s:.1f} s, timing {case.phases.timing_s:.1f} s"
        + (f", CUPTI audit {case.phases.audit_s:.1f} s" if case.phases.audit_s > 0 else ""),
    ))
    lines += [table(["", ""], facts), ""]
    variants = [("base", case.base), ("head", case.head)]
    if case.baselines:
        facts_b = [(f"baseline `{b.name}`", baselines_cell((b,)) + (f" ({cell(b.message, 300)})" if b.message else ""))
                   for b in case.baselines]
        lines += [table(["", ""], facts_b), ""]
    timed_variants = variants + [(b.name, case.result.variant(b.name)) for b in case.baselines if case.result is not None]
    samples = summary_rows(timed_variants)
    if samples:
        lines += [samples, ""]
    lines += notes_lines(variants)
    if case.measurement is not None:
        lines += [correctness_rows(variants), ""]
        audit = audit_rows(variants)
        if audit is not None:
            lines += [audit, ""]
        clock = clock_rows(variants)
        if clock is not None:
            lines += [clock, ""]
        lines += _launch_table(case)
        lines += _compiled_table(case)
        lines += profile_lines(case.profile)
    for build in (case.base_build, case.head_build):
        if build is not None:
            lines += compiler_output(build, f"{build.side} compiler output:")
    lines += ["</details>", ""]
    return lines


def _how_compare(outcome: CompareOutcome) -> list[str]:
    s = outcome.settings
    factor = outcome.request.remeasure_factor
    judged = outcome.isolation == "judge"
    return [
        (
            f"- Each side of a case runs in a worker process of its own (`--isolation judge`); a judge process that "
            f"runs no pull-request code makes every call's inputs (the base's setup() at seeds drawn from the OS's "
            f"entropy{_given(s.seeds)}), checks each side first on {s.correctness_trials} of them against the base's reference, outputs "
            "poisoned before each call, and checks every timed call too; a side that is wrong is never timed. "
            "The judge's own clock spans every call (docs/isolation.md)."
            if judged else
            f"- Base and head of each case run in one worker process. Each side is checked first on "
            f"{s.correctness_trials} seeds ({seeds_range(s.trial_seeds)}) against the reference, "
            "outputs poisoned before each call; a side that is wrong is never timed."
        ),
        f"- Then both are timed in {s.rounds} interleaved rounds (base, head / head, base / …), each round "
        f"{s.trials_per_round} timed trials per side after {s.discard_first} discarded, "
        f"{s.num_warmup} warm-up launches before the first round; timer `{s.timing_method}`"
        + (", cold L2" if s.flush_l2 and s.timing_method == "cuda_event" else "") + ".",
        *(
            [f"- Rounds are adaptive: after those {s.rounds}, both sides are timed two more rounds at a time "
             f"until the verdict below is decided, {s.time_budget_s:g} s of timing are spent, or "
             f"{MAX_ADAPTIVE_ROUNDS} rounds are done; each case's details give the rounds used."]
            if s.time_budget_s > 0 else []
        ),
        "- change = median(head samples) / median(base samples) − 1. The 95% CI bootstraps whole rounds, "
        "paired across sides, then samples within them; the p-value is a Wilcoxon signed-rank test of the "
        "per-round log ratios.",
        "- **slower**: ratio > 1 + threshold, CI lower bound > 1 and p < 0.05. **faster**: the mirror image. "
        "**unchanged**: the whole CI inside [1/(1+t), 1+t]. Otherwise **inconclusive**.",
        f"- A suspected regression (slower, or inconclusive with ratio > 1 + threshold) is measured again, "
        f"starting from {s.rounds * factor} rounds ({factor}× the first) and adaptive like the first, and that "
        "measurement alone decides; its note gives the rounds it used.",
        *([f"- {AUDIT_EXPLAINED}"] if s.timing_method == "cuda_event" else []),
        *(
            ["- The suite's `baselines` are timed in the same rounds, with the base's inputs and reference; "
             "\"head vs baselines\" says how many times faster or slower the head is than each, "
             "from median(baseline) / median(head). "
             "They never decide the gate."]
            if any(case.baselines for case in outcome.cases) else []
        ),
        "- The gate fails on any slower (unless accepted: `--accept` or the PR label), incorrect or failed case"
        + (f", or when the geometric mean of head/base exceeds +{outcome.max_geomean_slowdown * 100:g}%"
           if outcome.max_geomean_slowdown is not None else "")
        + ". See docs/compare.md.",
    ]


# --------------------------------------------------------------------------------------------
# run
# --------------------------------------------------------------------------------------------


