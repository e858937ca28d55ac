"""``kbench-ci merge``: the result folders of a runner matrix's shards joined into one report.

Printing and exit codes only; the work is in :mod:`kbench_ci.gate.merge`.

Exit codes: 0 the merged gate passed (or ``--no-fail``), 1 it failed, 2 bad input (a folder
without results.json, a results.json of another command), 4 the shards do not add up to one run
(a shard missing or there twice, a case in two shards, shards of different counts or commits):
the report names the shard; ``--no-fail`` does not cover that.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kbench_ci.cli.console import err, error_boundary, out
from kbench_ci.cli.options import DEFAULT_OUTPUT_DIR, OutputDirOption
from kbench_ci.cli.suite_common import user_failures_line
from kbench_ci.errors import ExitCode
from kbench_ci.gate.merge import MergeOutcome, MergeRequest, merge_shards
from kbench_ci.results.atomic import write_json_atomically
from kbench_ci.results.outdir import check_output_file, output_folder
from kbench_ci.results.schema import SUMMARY_SCHEMA
from kbench_ci.suite.loader import parse_threshold

__all__ = ["HELP", "merge"]

HELP = (
    "Join the result folders of `compare --shard K/N` (or `run --shard K/N`) jobs into one results.json "
    "and one benchmark.md, with one gate recomputed from all cases."
)


def merge(
    directories: Annotated[
        list[Path], typer.Argument(metavar="DIR...", help="the shards' --output-dir folders (e.g. downloaded artifacts)")
    ],
    output_dir: OutputDirOption = DEFAULT_OUTPUT_DIR,
    threshold: Annotated[
        str | None,
        typer.Option(
            "--threshold",
            help="re-judge every timed case's recorded ratio at this threshold: 0.02 or \"2%\" "
            "(default: each shard's verdicts; nothing is measured again)",
        ),
    ] = None,
    max_geomean_slowdown: Annotated[
        str | None,
        typer.Option(
            "--max-geomean-slowdown",
            help='fail when the geometric mean of head/base on any one GPU model exceeds 1 + this (default: the shards\')',
        ),
    ] = None,
    no_fail: Annotated[
        bool,
        typer.Option("--no-fail", metavar="", help="exit 0 on a failed gate (missing shards still exit 4, bad input 2)"),
    ] = False,
    job_note: Annotated[
        str | None,
        typer.Option("--job-note", hidden=True, help="what a failed gate does to the job (the action sets it)"),
    ] = None,
    json_summary: Annotated[
        Path | None, typer.Option("--json-summary", help="also write a small JSON with the gate and the file paths")
    ] = None,
) -> None:
    from kbench_ci.cli.compare import parse_fraction  # noqa: PLC0415 (imports gate.compare lazily too)

    with error_boundary():
        if json_summary is not None:
            check_output_file(json_summary, "--json-summary")
        request = MergeRequest(
            directories=tuple(directories), output_dir=output_dir,
            threshold=parse_threshold(threshold) if threshold is not None else None,
            max_geomean_slowdown=(
                parse_fraction(max_geomean_slowdown, option="--max-geomean-slowdown")
                if max_geomean_slowdown is not None else None
            ),
            no_fail=no_fail, job_note=job_note, command_line=tuple(sys.argv),
        )
        with output_folder(output_dir):
            outcome = merge_shards(request)
    out(f"merged {len(outcome.sources)} shard folder(s) of `{outcome.command}`: {outcome.summary}")
    out(f"wrote {outcome.report_path} and {outcome.results_path}")
    code = _exit_code(outcome, no_fail=no_fail)
    if json_summary is not None:
        with error_boundary():
            write_json_atomically(json_summary, {
                "schema": SUMMARY_SCHEMA, "command": "merge", "merged": outcome.command, "passed": outcome.passed,
                "complete": outcome.complete,
                "summary": outcome.summary, "problems": [p.as_json() for p in outcome.problems],
                "failing_cases": list(outcome.failing), "exit_code": int(code),
                "results": str(outcome.results_path), "report": str(outcome.report_path),
            })
    for problem in outcome.problems:
        err(f"kbench-ci: {problem.message}")
    if code == ExitCode.USAGE:
        err(f"kbench-ci: error: {user_failures_line(outcome.user_failures)}")
    elif not outcome.passed and not outcome.problems:
        err(f"kbench-ci: {outcome.summary}" + (" (--no-fail: exit 0)" if no_fail else ""))
        if outcome.user_failures:
            err(f"kbench-ci: note: also, not the kernel's: {user_failures_line(outcome.user_failures)}")
    raise typer.Exit(int(code))


def _exit_code(outcome: MergeOutcome, *, no_fail: bool) -> ExitCode:
    """As the unsharded command's (cli/suite_common.finish), with 4 for shards that do not add up."""
    if outcome.problems:
        return ExitCode.SHARDS_INCOMPLETE
    if outcome.passed:
        return ExitCode.OK
    if not outcome.kernel_failed and outcome.user_failures:
        return ExitCode.USAGE  # --no-fail waives a kernel's verdict, not a broken file
    return ExitCode.OK if no_fail else ExitCode.GATE_FAILED
