"""What ``run`` and ``compare`` share: their common options, driving a suite under the progress
line and the error boundary, the report's headline, and the gate's exit code and JSON summary.

Exit codes: 0 gate passed (or ``--no-fail``), 1 gate failed (a kernel), 2 bad usage or config, or
every failing case failed because of the user's ref.py, setup() or settings, 3 environment,
130 interrupted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from kbench_ci.cli.console import ProgressLine, err, error_boundary, out, suite_progress
from kbench_ci.errors import ExitCode
from kbench_ci.results.atomic import write_json_atomically
from kbench_ci.results.outcome import CompareOutcome, RunOutcome, UserFailure
from kbench_ci.results.outdir import check_output_file, output_folder
from kbench_ci.suite.settings import CACHE_DIR_ENV, ISOLATION_ENV, ExecutionOptions, check_isolation

if TYPE_CHECKING:
    from kbench_ci.gate.progress import ProgressFn

__all__ = [
    "CacheDirOption",
    "CaseTimeoutOption",
    "DeviceOption",
    "FreshWorkerOption",
    "JsonSummaryOption",
    "KernelOption",
    "NoCacheOption",
    "drive",
    "execution_options",
    "finish",
    "headline",
]

DEVICE_HELP = "auto | cuda | cpu (auto: the GPU when there is one, else the CPU with host_time timing)"

DeviceOption = Annotated[str, typer.Option("--device", rich_help_panel="How to measure", help=DEVICE_HELP)]
CaseTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--case-timeout", rich_help_panel="How to measure",
        help="seconds per case before it counts as hung, at least 0.001 (default: each kernel's timeout)",
    ),
]
KernelOption = Annotated[list[str] | None, typer.Option("--kernel", rich_help_panel="What to compare", metavar="NAME",
    help="only this kernel (repeatable)")]
JsonSummaryOption = Annotated[
    Path | None, typer.Option("--json-summary", rich_help_panel="Output", help="also write a small JSON with the gate and the file paths")
]

FreshWorkerOption = Annotated[
    bool,
    typer.Option(
        "--fresh-worker", metavar="", rich_help_panel="Workers and caches",
        help="start a new worker process for every case instead of one warm worker for the suite (for "
        "debugging; slower; also KBENCH_CI_FRESH_WORKER=1 or warm_worker = false in kbench.toml)",
    ),
]
CacheDirOption = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir", rich_help_panel="Workers and caches",
        help=f"folder for built libraries and Triton/TorchInductor caches, kept across runs (default: ${CACHE_DIR_ENV}, "
        "kbench.toml's cache_dir, else $XDG_CACHE_HOME/kbench-ci or ~/.cache/kbench-ci)",
    ),
]
NoCacheOption = Annotated[
    bool,
    typer.Option("--no-cache", metavar="", rich_help_panel="Workers and caches",
        help="keep nothing across runs: build every kernel, JIT-compile afresh"),
]


IsolationOption = Annotated[
    str | None,
    typer.Option(
        "--isolation", rich_help_panel="How to measure", metavar="process|judge",
        help="judge: each side in a process of its own, judged by one that runs no pull-request code "
        f"(docs/isolation.md); process (default): one worker for both (also {ISOLATION_ENV}, or kbench.toml)",
    ),
]


def execution_options(
    *, fresh_worker: bool, cache_dir: Path | None, no_cache: bool, isolation: str | None = None
) -> ExecutionOptions:
    """The three options above, for ``run_suite`` / ``run_compare``'s ``execution`` (resolved
    against the environment and kbench.toml by :func:`kbench_ci.suite.settings.execution`)."""
    if isolation is not None:
        check_isolation(isolation, where="--isolation")
    return ExecutionOptions(fresh_worker=fresh_worker, cache_dir=cache_dir, no_cache=no_cache, isolation=isolation)


Outcome = TypeVar("Outcome", RunOutcome, CompareOutcome)


def drive(
    work: Callable[[ProgressFn], Outcome], *, interrupted: str, output_dir: Path, json_summary: Path | None
) -> Outcome:
    """Run ``work(on_progress)`` under the progress line and the error boundary, then print the
    headline.

    The output folder and the ``--json-summary`` file are checked first (and the folder held,
    see :func:`~kbench_ci.results.outdir.output_folder`), so neither fails after the run.
    ``interrupted`` is said after Ctrl-C (what survives it); on success the CPU-mode note, the
    report's headline and the paths.
    """
    progress = ProgressLine()
    with error_boundary(progress=progress, interrupted=interrupted):
        if json_summary is not None:
            check_output_file(json_summary, "--json-summary")
        with output_folder(output_dir):
            outcome = work(suite_progress(progress))
    if outcome.settings.timing_method_changed:
        err("kbench-ci: note: CPU mode timed with host_time (CUDA events need a GPU)")
    out(headline(outcome.report_path.read_text(encoding="utf-8")))
    out(f"\nwrote {outcome.report_path} and {outcome.results_path}")
    return outcome


def finish(
    *, passed: bool, no_fail: bool, failure: str, json_summary: Path | None,
    summary_for: Callable[[int], dict[str, Any]], user_failures: Sequence[UserFailure] = (), kernel_failed: bool = True,
) -> NoReturn:
    """Exit with the gate's code; the JSON summary (``summary_for(exit code)``) is written either way.

    * 0: the gate passed;
    * 1 (0 with ``--no-fail``): a case failed for a reason of its kernel's (``kernel_failed``:
      incorrect, crashed, hung, not built, slower), ``failure`` said; it wins when some other
      case failed because of the user's files, which a second line names;
    * 2 (``--no-fail`` or not: it waives the kernel's verdict, not a broken file): every failing
      case failed because of the user's ref.py, setup() or settings (``user_failures``), said
      in one line naming the first and the fix.
    """
    if passed:
        code = ExitCode.OK
    elif kernel_failed or not user_failures:
        code = ExitCode.OK if no_fail else ExitCode.GATE_FAILED
    else:
        code = ExitCode.USAGE
    if json_summary is not None:
        with error_boundary():
            write_json_atomically(json_summary, summary_for(int(code)))
    if code == ExitCode.USAGE:
        err(f"kbench-ci: error: {user_failures_line(user_failures)}")
    elif not passed:
        err(f"kbench-ci: {failure}" + (" (--no-fail: exit 0)" if no_fail else ""))
        if user_failures:
            err(f"kbench-ci: note: also, not the kernel's: {user_failures_line(user_failures)}")
    raise typer.Exit(int(code))


def user_failures_line(failures: Sequence[UserFailure]) -> str:
    """The first case's cause (it names the file and the fix), and how many more cases share the blame."""
    first = failures[0]
    more = failures[1:]
    shown = ", ".join(failure.case_id for failure in more[:5]) + (" …" if len(more) > 5 else "")
    return f"{first.case_id}: {first.message}" + (
        f"; {len(more)} more case{'s' if len(more) > 1 else ''} failed for their ref.py, setup() or settings: {shown}"
        if more else ""
    )


def headline(report: str) -> str:
    """The report up to its first ``##`` section: the verdict line and the table."""
    lines = []
    for line in report.splitlines():
        if line.startswith("## "):
            break
        lines.append(line)
    return "\n".join(lines).rstrip()
