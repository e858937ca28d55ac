"""``kbench-ci compare``: this tree (or ``--head``) against ``--base``, case by case, and a gate.

Printing and exit codes only; the work is in :mod:`kbench_ci.gate.compare`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kbench_ci.cli.help_format import HelpAllOption
from kbench_ci.cli.options import (
    DEFAULT_OUTPUT_DIR,
    GpuOption,
    GpusOption,
    OutputDirOption,
    SeedsOption,
    ShardOption,
    ShardTimingsOption,
    UsageProblems,
    check_gpu_and_output_dir,
    check_rounds,
    check_seconds,
    check_seeds,
    resolve_gpus,
    shard_request,
)
from kbench_ci.cli.suite_common import (
    CacheDirOption,
    CaseTimeoutOption,
    DeviceOption,
    FreshWorkerOption,
    IsolationOption,
    JsonSummaryOption,
    KernelOption,
    NoCacheOption,
    drive,
    execution_options,
    finish,
)
from kbench_ci.errors import UsageError
from kbench_ci.results.outcome import CompareOutcome, CompareRequest
from kbench_ci.results.schema import SUMMARY_SCHEMA
from kbench_ci.suite import settings
from kbench_ci.suite.loader import parse_threshold

if TYPE_CHECKING:
    from kbench_ci.gate.progress import ProgressFn

__all__ = ["HELP", "compare", "parse_fraction"]

#: options ``-h`` leaves out (``--help-all`` shows them): what a first compare does not need
ADVANCED = ("base_mode", "config", "json_summary", "max_geomean_slowdown", "rounds", "time_budget", "case_timeout",
            "profile", "gpu", "gpus", "shard", "shard_timings", "fresh_worker", "cache_dir", "no_cache",
            "seeds")
HELP = (
    "Compare this tree (or --head REV) with --base REV: correctness first, then timing "
    "verdicts per case, and a gate."
)


def parse_fraction(value: str, *, option: str) -> float:
    """``"1%"``, ``"0.01"`` → 0.01; must be finite and > 0 (may exceed 1, unlike a threshold)."""
    text = value.strip()
    try:
        number = float(text[:-1].strip()) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"{option} must be a number or a percentage such as 0.01 or 1%, got {value!r}") from None
    if not (number > 0.0 and number != float("inf")):
        raise UsageError(f"{option} must be greater than 0, got {value!r}")
    return number


def compare(
    base: Annotated[
        str, typer.Option("--base", rich_help_panel="What to compare",
            help="the base revision: a branch, tag or sha (e.g. main, origin/main)")
    ],
    head: Annotated[
        str | None,
        typer.Option(
            "--head", rich_help_panel="What to compare",
                help="the head revision (default: this working tree as it is, uncommitted changes included)"
        ),
    ] = None,
    base_mode: Annotated[
        str,
        typer.Option(
            "--base-mode", rich_help_panel="What to compare",
                help="merge-base (default: where head branched off base) | tip (base as it is)"
        ),
    ] = "merge-base",
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", rich_help_panel="What to compare",
                help="kbench.toml or pyproject.toml inside the repository (each side reads its own copy)"
        ),
    ] = None,
    output_dir: OutputDirOption = DEFAULT_OUTPUT_DIR,
    threshold: Annotated[
        str | None,
        typer.Option(
            "--threshold", rich_help_panel="The gate",
            help="smallest slowdown that fails the gate, for every kernel: 0.02 or \"2%\" "
            f"(default: per kernel, {settings.DEFAULT_THRESHOLD:.0%})",
        ),
    ] = None,
    max_geomean_slowdown: Annotated[
        str | None,
        typer.Option(
            "--max-geomean-slowdown", rich_help_panel="The gate",
                help='fail when the geometric mean of head/base exceeds 1 + this: 0.01 or "1%"'
        ),
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds", rich_help_panel="How to measure",
            help=f"interleaved timing rounds per case, 1 to {settings.MAX_ADAPTIVE_ROUNDS} (default: the suite's, "
            f"{settings.DEFAULT_ROUNDS})",
        ),
    ] = None,
    time_budget: Annotated[
        float | None,
        typer.Option(
            "--time-budget", rich_help_panel="How to measure",
            help="seconds of timing a case may add past --rounds until its verdict is decided; 0: exactly "
            f"--rounds (default: the suite's, {settings.DEFAULT_TIME_BUDGET_S:g})",
        ),
    ] = None,
    case_timeout: CaseTimeoutOption = None,
    seeds: SeedsOption = None,
    no_fail: Annotated[
        bool,
        typer.Option("--no-fail", metavar="", rich_help_panel="The gate",
            help="report regressions but exit 0 (usage and environment errors still exit 2 / 3; cases that failed only on "
            "their ref.py, setup() or settings still exit 2)"),
    ] = False,
    accept: Annotated[
        list[str] | None,
        typer.Option(
            "--accept", rich_help_panel="The gate", metavar="KERNEL|CASE",
            help="accept a known regression of a kernel or a case id ('softmax[N=2048]'; '*': every case), "
            "repeatable: 'slower (accepted)' passes the gate, 'incorrect' never does",
        ),
    ] = None,
    accept_reason: Annotated[
        str | None, typer.Option("--accept-reason", hidden=True, help="why --accept was given (the action: its label)")
    ] = None,
    job_note: Annotated[
        str | None,
        typer.Option("--job-note", hidden=True, help="what a failed gate does to the job (the action sets it)"),
    ] = None,
    changed_only: Annotated[
        bool,
        typer.Option(
            "--changed-only", metavar="", rich_help_panel="What to compare",
            help="measure only the kernels whose files (imports and headers included) or kbench.toml entry "
            "differ between base and head (docs/compare.md)",
        ),
    ] = False,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile", rich_help_panel="How to measure", metavar="",
            help="after timing, run each slower or faster case's base and head once under ncu (--clock-control "
            "none): DRAM bytes, achieved occupancy, SM and memory throughput in the case's details",
        ),
    ] = False,
    device: DeviceOption = "auto",
    gpu: GpuOption = None,
    gpus: GpusOption = None,
    kernel: KernelOption = None,
    json_summary: JsonSummaryOption = None,
    shard: ShardOption = None,
    shard_timings: ShardTimingsOption = None,
    fresh_worker: FreshWorkerOption = False,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = False,
    isolation: IsolationOption = None,
    help_all: HelpAllOption = False,  # noqa: ARG001  (read by its callback, which exits)
) -> None:
    # torch-free start-up: gate.compare pulls in torch, so it is imported only when the command runs.
    from kbench_ci.gate.compare import run_compare  # noqa: PLC0415

    def work(on_progress: ProgressFn) -> CompareOutcome:
        if base_mode not in ("merge-base", "tip"):
            raise UsageError(f"unknown --base-mode '{base_mode}'", hint="use merge-base or tip")
        chosen_threshold = parse_threshold(threshold) if threshold is not None else None
        chosen_geomean = (
            parse_fraction(max_geomean_slowdown, option="--max-geomean-slowdown")
            if max_geomean_slowdown is not None else None
        )
        chosen_shard = shard_request(shard, shard_timings)
        problems = UsageProblems()
        check_gpu_and_output_dir(gpu, problems)
        check_seconds(problems, case_timeout=case_timeout, time_budget=time_budget)
        check_rounds(problems, rounds)
        chosen_seeds = check_seeds(problems, seeds)
        problems.raise_any()
        chosen, slots = resolve_gpus(device, gpu, gpus)
        request = CompareRequest(
            start=Path.cwd(), base=base, head=head, base_mode=base_mode, config=config, device=chosen,
            output_dir=output_dir, threshold=chosen_threshold, max_geomean_slowdown=chosen_geomean,
            rounds=rounds, time_budget_s=time_budget, case_timeout_s=case_timeout, kernels=tuple(kernel or ()), no_fail=no_fail,
            command_line=tuple(sys.argv), accept=tuple(accept or ()), accept_reason=accept_reason,
            job_note=job_note, shard=chosen_shard, gpus=slots, changed_only=changed_only, profile=profile,
            seeds=chosen_seeds,
        )
        return run_compare(
            request, on_progress=on_progress,
            options=execution_options(fresh_worker=fresh_worker, cache_dir=cache_dir, no_cache=no_cache, isolation=isolation),
        )

    outcome = drive(
        work, interrupted=f"worktrees removed; cases measured so far are in {output_dir / 'results.json'}",
        output_dir=output_dir, json_summary=json_summary,
    )
    gate = outcome.gate
    failing = ", ".join(gate.failing[:10]) + (" …" if len(gate.failing) > 10 else "")
    finish(
        passed=gate.passed, no_fail=no_fail, failure=gate.summary + (f": {failing}" if failing else ""),
        json_summary=json_summary, user_failures=outcome.user_failures, kernel_failed=outcome.kernel_failed,
        summary_for=lambda code: {
            "schema": SUMMARY_SCHEMA, "command": "compare", **gate.as_json(), "exit_code": code,
            "base": outcome.base.as_json(), "head": outcome.head.as_json(),
            "results": str(outcome.results_path), "report": str(outcome.report_path),
            "shard": outcome.shard.label if outcome.shard is not None else None,
        },
    )
