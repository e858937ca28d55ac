"""``kbench-ci comment``: post or update the sticky PR comment with a benchmark report.

Printing and exit codes only; the work is in :mod:`kbench_ci.github.comment`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kbench_ci.cli.console import err, error_boundary, out
from kbench_ci.errors import UsageError
from kbench_ci.github.comment import compose_body, run_comment
from kbench_ci.suite import values

__all__ = ["HELP", "comment"]

HELP = "Post or update the sticky PR comment with DIR/benchmark.md (finds its own comment by a hidden marker)."


def comment(
    report: Annotated[
        Path | None, typer.Option("--report", help="directory holding benchmark.md and results.json")
    ] = None,
    from_artifact: Annotated[
        Path | None,
        typer.Option(
            "--from-artifact", help="a downloaded benchmark artifact (fork recipe); holds pr-number.txt"
        ),
    ] = None,
    repository: Annotated[str | None, typer.Option("--repo", help="owner/name; default GITHUB_REPOSITORY")] = None,
    pr: Annotated[int | None, typer.Option("--pr", help="pull request number; default from the event payload")] = None,
    mode: Annotated[str, typer.Option("--mode", help="always | on-change | on-regression | never")] = "always",
    marker_id: Annotated[
        str, typer.Option("--marker-id", help="keeps comments of several suites apart")
    ] = "default",
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", "--print", metavar="",
            help="print the exact comment body (marker, links, folding) and post nothing: no token, no network",
        ),
    ] = False,
    skip_head_check: Annotated[
        bool,
        typer.Option(
            "--skip-head-check", metavar="",
            help="with --pr N, when the artifact (--from-artifact outside a workflow_run event) or the report "
            "(--report in a workflow_run event) names no head commit: post without checking that it is of the "
            "pull request's head (you checked it)",
        ),
    ] = False,
    comment_author: Annotated[
        str | None,
        typer.Option(
            "--comment-author", metavar="LOGIN",
            help="the account the token writes as (an app's NAME[bot], a PAT's login); only its comments are "
            "edited. Default: KBENCH_COMMENT_AUTHOR, else github-actions[bot]",
        ),
    ] = None,
) -> None:
    with error_boundary():
        report_dir = report or from_artifact
        if report_dir is None:
            raise UsageError("give --report DIR or --from-artifact DIR")
        if pr is not None:
            try:
                values.integer(pr, minimum=1)
            except values.InvalidValue as exc:
                raise UsageError(f"--pr {exc}", hint="a pull request's number, as in its URL: --pr 42") from None
        if dry_run:
            body, truncated, _ = compose_body(report_dir, marker_id=marker_id)
            out(body)
            if truncated:
                err("kbench-ci: the body was shortened to fit GitHub's comment limit")
            return
        outcome = run_comment(
            report_dir, from_artifact=from_artifact, repository=repository, pr_number=pr,
            token=None, api_url=None, mode=mode, marker_id=marker_id, skip_head_check=skip_head_check,
            comment_author=comment_author,
        )
    if outcome.action in ("forbidden", "rate-limited"):
        # Exit 0: the comment is a courtesy; the job's verdict is the gate's.
        err(f"kbench-ci: warning: {outcome.reason}")
        return
    out(f"comment {outcome.action}: {outcome.url or outcome.reason}")
