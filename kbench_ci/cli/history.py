"""``kbench-ci history record`` and ``history show``: the trend of every case on the main branch.

Printing and exit codes only; the work is in :mod:`kbench_ci.history`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kbench_ci.cli.console import error_boundary, out
from kbench_ci.cli.help_format import Command, Group
from kbench_ci.errors import UsageError
from kbench_ci.history.show import suite_thresholds, threshold_sentence, trends, write_site
from kbench_ci.history.store import (
    DEFAULT_BRANCH,
    check_main_line,
    entries,
    entries_from_results,
    gate_note,
    record_all,
    report_payload,
)

__all__ = ["HELP", "app"]

HELP = "Keep each main-branch run's results by commit on a data branch, and show their trend and steps."

app = typer.Typer(no_args_is_help=True, help=HELP, cls=Group)

_BRANCH = typer.Option("--branch", help="the data branch the history lives on")


@app.command("record", cls=Command, help="Append a run's or compare's results (DIR/results.json), keyed by commit, to the data branch.")
def record_command(
    report: Annotated[Path, typer.Option("--report", help="the --output-dir of `kbench-ci run` or `compare`")],
    commit: Annotated[str | None, typer.Option("--commit", help="the commit measured (default: a compare's head)")] = None,
    branch: Annotated[str, _BRANCH] = DEFAULT_BRANCH,
    push: Annotated[
        str | None, typer.Option("--push", help="also push the branch to this remote, retrying when another job got there first")
    ] = None,
    main_branch: Annotated[
        str | None,
        typer.Option("--main-branch", help="the branch whose trend the history is; the commit must be on it "
                     "(default: the repository's default branch: origin/HEAD, else main or master)"),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", metavar="", help="record results of a dirty tree, of another commit than "
                           "--commit, or of a commit not on the main branch, anyway")
    ] = False,
) -> None:
    with error_boundary():
        payload = report_payload(report)
        recorded = entries_from_results(payload, commit=commit, force=force)
        if not force:
            check_main_line(recorded[0].commit, Path.cwd(), main_branch=main_branch)
        tip = record_all(recorded, Path.cwd(), branch=branch, remote=push)
    where = ", ".join(f"{len(entry.points)} on {entry.gpu}" for entry in recorded)
    note = gate_note(payload)
    out(f"recorded {sum(len(e.points) for e in recorded)} cases of {recorded[0].commit[:12]} ({where}) on {branch} "
               f"at {tip[:12]}" + (f", pushed to {push}" if push else "") + (f"; {note}" if note else ""))


@app.command("show", cls=Command, help="Render history.md, index.html and a chart per case from the data branch.")
def show_command(
    output_dir: Annotated[Path, typer.Option("--output-dir", help="where the site goes")],
    kernel: Annotated[str | None, typer.Option("--kernel", help="only this kernel's cases")] = None,
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", help="smallest lasting change reported as a step, for every case (default: the "
                     "threshold each case was judged by, else its kernel's in kbench.toml, else 0.02)"),
    ] = None,
    branch: Annotated[str, _BRANCH] = DEFAULT_BRANCH,
) -> None:
    with error_boundary():
        if threshold is not None and not threshold > 0:
            raise UsageError(f"--threshold must be > 0, got {threshold:g}", hint="e.g. --threshold 0.02")
        found = trends(entries(Path.cwd(), branch=branch), threshold=threshold, kernel=kernel,
                       suite_thresholds=lambda: suite_thresholds(Path.cwd()))
        write_site(found, output_dir)
    steps = sum(len(t.steps) for t in found)
    out(f"wrote {output_dir / 'history.md'}, index.html and {len(found)} charts; {steps} steps; "
               f"{threshold_sentence(found)}")
    for trend in found:
        for step in trend.steps:
            out(f"step: {trend.case_id} on {trend.gpu}: {step.ratio - 1:+.1%} at {trend.step_range(step)}")
