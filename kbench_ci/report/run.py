"""benchmark.md of ``run``: one row per case (correct? how fast?), then each case's details."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from kbench_ci.report.compare import gpus_notice
from kbench_ci.report.markdown import (
    AUDIT_EXPLAINED,
    RUN_MARKERS,
    audit_rows,
    baselines_cell,
    cell,
    clock_rows,
    code,
    code_cell,
    compiler_output,
    correctness_cell,
    correctness_rows,
    environment_line,
    fmt,
    isolation_line,
    notes_lines,
    result_facts,
    seeds_notice,
    seeds_range,
    summary_rows,
    table,
    throttle_notice,
    time_unit,
)
from kbench_ci.results.outcome import RunCase, RunOutcome, gpu_labels
from kbench_ci.stats import summarize


def render_run(
    outcome: RunOutcome, *, gpu_of: Mapping[str, str] | None = None, preamble: Sequence[str] = (),
    verdict: str | None = None,
) -> str:
    """benchmark.md of a run. ``merge`` adds ``gpu_of`` (case id → GPU model: a GPU column when
    there are several), ``preamble`` (lines under the verdict) and ``verdict`` (the merged
    verdict line, which also answers for missing shards)."""
    settings = outcome.settings
    with_gpu = gpu_of is not None and len(set(gpu_of.values())) > 1
    lanes = gpu_labels(outcome.gpus, outcome.cases)
    if not with_gpu and lanes is not None:
        # --gpus: the GPU (index and model) of each case
        with_gpu, gpu_of = True, lanes
    parts = ["# kbench-ci run", "", f"**{verdict or outcome.summary}**", "", isolation_line(outcome.isolation), "",
             *seeds_notice(outcome.isolation, settings.seeds), *preamble, *gpus_notice(outcome.gpus),
             f"suite `{outcome.config_path}` · {settings.rounds} rounds × {settings.trials_per_round} trials · "
             f"device `{settings.device}`", ""]
    parts += throttle_notice(outcome.cases)
    order = {"failed": 0, "incorrect": 1, "ok": 2}
    ordered = sorted(outcome.cases, key=lambda c: order[c.status])
    with_baselines = any(case.baselines for case in ordered)
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
                code(case.kernel),
                ", ".join(f"{k}={v}" for k, v in case.dims.items()),
                *([(gpu_of or {}).get(case.case_id, "—")] if with_gpu else []),
                median,
                ci,
                str(summary.n) if summary else "0",
                *([baselines_cell(case.baselines, "solution")] if with_baselines else []),
                correctness_cell(case.variant) if case.variant is not None else "—",
                f"{RUN_MARKERS[case.status]} **{case.status}**" + (" ⚠️ throttled" if case.throttled else ""),
                cell(case.message, 120),
            ])
        parts += [table(
            ["kernel", "shape", *(["GPU"] if with_gpu else []), "median", "95% CI of median", "samples",
             *(["vs baselines"] if with_baselines else []), "correctness", "status", "note"], rows,
            align=["left", "left", *(["left"] if with_gpu else []), "right", "right", "right",
                   *(["left"] if with_baselines else []), "left", "left", "left"],
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
              f"- Each case runs in its own worker process: checked on {settings.correctness_trials} seeds"
              + (f" ({seeds_range(settings.seeds)}, given by --seeds)" if settings.seeds else "") + " against "
              "the reference first (outputs poisoned before each call), then, if correct, timed in "
              f"{settings.rounds} rounds of {settings.trials_per_round} trials (after {settings.discard_first} "
              f"discarded per round, {settings.num_warmup} warm-up launches), timer `{settings.timing_method}`.",
              "- The median's 95% CI is the distribution-free order-statistic interval.",
              *(["- The suite's `baselines` are timed in the same rounds; \"vs baselines\" says how many times "
                 "faster or slower the solution is than each, from median(baseline) / median(solution)."]
                if with_baselines else []),
              *([f"- {AUDIT_EXPLAINED}"] if settings.timing_method == "cuda_event" else []),
              "- The run fails (exit 1) when any case is incorrect or failed because of its kernel; with exit 2 when "
              "every failing case failed on its ref.py, setup() or settings instead.", ""]
    return "\n".join(parts)


def _run_details(case: RunCase) -> list[str]:
    lines = ["<details>", f"<summary>{html.escape(f'{RUN_MARKERS[case.status]} {case.case_id} — {case.status}')}</summary>", ""]
    if case.message:
        lines += [f"**Note:** {cell(case.message, 2000)}", ""]
    facts: list[tuple[str, str]] = [("implementation", cell(case.implementation, 60))]
    if case.result is not None:
        facts += result_facts(case.result)
    if case.build is not None:
        facts.append(("build", ("ok" if case.build.ok else f"FAILED: {cell(case.build.message, 300)}")
                      + (" (cached)" if case.build.cached else "")
                      + (f" — {code_cell(case.build.command)}" if case.build.command else "")))
    lines += [table(["", ""], facts), ""]
    baselines = [(b.name, case.result.variant(b.name)) for b in case.baselines if case.result is not None]
    samples = summary_rows([("solution", case.variant), *baselines])
    if samples:
        lines += [samples, ""]
    lines += notes_lines([("solution", case.variant)])
    if case.variant is not None:
        lines += [correctness_rows([("solution", case.variant)]), ""]
        clock = clock_rows([("solution", case.variant)])
        if clock is not None:
            lines += [clock, ""]
        audit = audit_rows([("solution", case.variant)])
        if audit is not None:
            lines += [audit, ""]
    lines += compiler_output(case.build, "compiler output:")
    lines += ["</details>", ""]
    return lines
