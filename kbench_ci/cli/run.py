"""``kbench-ci run``: check and time every kernel × shape of kbench.toml on this tree.

Printing and exit codes only; the work is in :mod:`kbench_ci.gate.run`.
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
from kbench_ci.results.outcome import RunOutcome, RunRequest
from kbench_ci.results.schema import SUMMARY_SCHEMA
from kbench_ci.suite import settings

if TYPE_CHECKING:
    from kbench_ci.gate.progress import ProgressFn

__all__ = ["HELP", "run"]

#: options ``-h`` leaves out (``--help-all`` shows them): what a first run does not need
ADVANCED = ("config", "json_summary", "rounds", "case_timeout", "gpu", "gpus", "shard", "shard_timings", "fresh_worker",
            "cache_dir", "no_cache", "seeds")
HELP = "Check and time every kernel × shape of kbench.toml on this tree."


def run(
    config: Annotated[
        Path | None,
        typer.Option("--config", rich_help_panel="What to compare",
            help="kbench.toml or pyproject.toml (default: found from here upwards)"),
    ] = None,
    output_dir: OutputDirOption = DEFAULT_OUTPUT_DIR,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds", rich_help_panel="How to measure",
                help=f"timing rounds per case, 1 to {settings.MAX_ADAPTIVE_ROUNDS} (default: the suite's, "
                f"{settings.DEFAULT_ROUNDS})",
        ),
    ] = None,
    case_timeout: CaseTimeoutOption = None,
    seeds: SeedsOption = None,
    no_fail: Annotated[
        bool, typer.Option("--no-fail", metavar="", rich_help_panel="The gate",
            help="report, but exit 0 even when a case is incorrect or failed (a case failed because of its ref.py, "
            "setup() or settings still exits 2)")
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
    # torch-free start-up: gate.run pulls in torch, so it is imported only when the command runs.
    from kbench_ci.gate.run import run_suite  # noqa: PLC0415

    def work(on_progress: ProgressFn) -> RunOutcome:
        chosen_shard = shard_request(shard, shard_timings)
        problems = UsageProblems()
        check_gpu_and_output_dir(gpu, problems)
        check_seconds(problems, case_timeout=case_timeout)
        check_rounds(problems, rounds)
        chosen_seeds = check_seeds(problems, seeds)
        problems.raise_any()
        chosen, slots = resolve_gpus(device, gpu, gpus)
        request = RunRequest(
            start=Path.cwd(), device=chosen, gpus=slots, shard=chosen_shard, output_dir=output_dir, config=config,
            rounds=rounds, case_timeout_s=case_timeout, kernels=tuple(kernel or ()), command_line=tuple(sys.argv),
            seeds=chosen_seeds,
        )
        return run_suite(
            request, on_progress=on_progress,
            options=execution_options(fresh_worker=fresh_worker, cache_dir=cache_dir, no_cache=no_cache, isolation=isolation),
        )

    outcome = drive(
        work, interrupted=f"cases measured so far are in {output_dir / 'results.json'}", output_dir=output_dir,
        json_summary=json_summary,
    )
    finish(
        passed=outcome.passed, no_fail=no_fail, failure=outcome.summary, json_summary=json_summary,
        user_failures=outcome.user_failures, kernel_failed=outcome.kernel_failed,
        summary_for=lambda code: {
            "schema": SUMMARY_SCHEMA, "command": "run", "passed": outcome.passed, "summary": outcome.summary, "counts": outcome.counts,
            "exit_code": code, "results": str(outcome.results_path), "report": str(outcome.report_path),
            "shard": outcome.shard.label if outcome.shard is not None else None,
        },
    )
