"""The ``run`` and ``compare`` commands. ``cli.py`` registers them with :func:`register`.

Printing and exit codes only; the work is in ``suite_run.py`` and ``compare.py``. Exit codes:
0 gate passed (or ``--no-fail``), 1 gate failed, 2 bad usage or config, 3 environment,
130 interrupted.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from kbench_ci.errors import ExitCode, KbenchError, UsageError

__all__ = ["register"]

_INTERRUPTED = 130

_DEVICE_HELP = "auto | cuda | cpu (auto: the GPU when there is one, else the CPU with host_time timing)"


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``compare`` to the kbench-ci app."""
    app.command("run", help="Check and time every kernel × shape of kbench.toml on this tree.")(run_command)
    app.command(
        "compare",
        help="Compare this tree (or --head REV) with --base REV: correctness first, then timing "
        "verdicts per case, and a gate.",
    )(compare_command)


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


def _progress_adapter(progress: Any, err: Callable[[str], None]) -> Callable[[Any], None]:
    """SuiteProgress → the CLI's ProgressLine: ``[case i/n case_id side] timing round r/R``.

    On a terminal every event updates the line; in a CI log only a change of case or phase
    prints, so a case writes a handful of lines rather than one per round.
    """
    last: dict[str, Any] = {"key": None}

    def forward(variant: str, phase: str, done: int, total: int, key: tuple[Any, ...]) -> None:
        if not progress.tty:
            if last["key"] == key:
                return
            last["key"] = key
        progress({"event": "progress", "variant": variant, "phase": phase, "done": done, "total": total})

    def on_progress(update: Any) -> None:
        where = f"case {update.index}/{update.total} {update.case_id}"
        if update.stage == "build":
            forward(where, "build", 0, 1, (update.index, "build"))
        elif update.stage == "remeasure" and update.event is None:
            progress.close()
            err(f"kbench-ci: {where}: suspected regression, measuring again with more rounds")
        elif update.stage in ("measure", "remeasure") and update.event is not None:
            event = update.event
            if event.get("event") != "progress":
                return
            phase = "timing round" if event.get("phase") == "timing" else str(event.get("phase"))
            if update.stage == "remeasure":
                phase = f"re-{phase}"
            forward(
                f"{where} {event.get('variant')}", phase, int(event.get("done", 0)), int(event.get("total", 1)),
                # A CI log gets one line per side and phase, not one per round.
                (update.index, update.stage, event.get("phase"),
                 None if event.get("phase") == "timing" else event.get("variant")),
            )
        elif update.stage == "done":
            progress.close()
            detail = f" — {update.detail}" if update.detail else ""
            err(f"kbench-ci: [{update.index}/{update.total}] {update.case_id}: {update.outcome}{detail}")

    return on_progress


def _write_json_summary(path: Optional[Path], payload: dict[str, Any]) -> None:
    if path is None:
        return
    from kbench_ci.results.atomic import write_json_atomically

    write_json_atomically(path, payload)


def _drive(work: Callable[[Callable[[Any], None]], Any], *, interrupted: str) -> Any:
    """Run ``work(on_progress)`` under the progress line, then print the headline.

    Typed errors become their one-line message and exit code, Ctrl-C exits 130 with
    ``interrupted`` said; on success the CPU-mode note, the report's headline and the paths.
    """
    from kbench_ci.cli.app import ProgressLine, err, fail

    progress = ProgressLine()
    try:
        outcome = work(_progress_adapter(progress, err))
    except KbenchError as exc:
        progress.close()
        raise fail(exc) from None
    except KeyboardInterrupt:
        progress.close()
        err(f"kbench-ci: interrupted; {interrupted}")
        raise typer.Exit(_INTERRUPTED) from None
    progress.close()
    if outcome.settings.timing_method_changed:
        err("kbench-ci: note: CPU mode timed with host_time (CUDA events need a GPU)")
    typer.echo(_headline(outcome.report_path.read_text(encoding="utf-8")))
    typer.echo(f"\nwrote {outcome.report_path} and {outcome.results_path}")
    return outcome


def _finish(
    *, passed: bool, no_fail: bool, failure: str, json_summary: Optional[Path],
    summary_for: Callable[[int], dict[str, Any]],
) -> None:
    """Exit 0 when the gate passed (or ``--no-fail``), else 1 with ``failure`` said; the
    JSON summary (``summary_for(exit code)``) is written either way."""
    from kbench_ci.cli.app import err

    code = ExitCode.OK if passed or no_fail else ExitCode.GATE_FAILED
    _write_json_summary(json_summary, summary_for(int(code)))
    if not passed:
        err(f"kbench-ci: {failure}" + (" (--no-fail: exit 0)" if no_fail else ""))
    raise typer.Exit(int(code))


def _headline(report: str) -> str:
    """The report up to its first ``##`` section: the verdict line and the table."""
    lines = []
    for line in report.splitlines():
        if line.startswith("## "):
            break
        lines.append(line)
    return "\n".join(lines).rstrip()


def run_command(
    config: Optional[Path] = typer.Option(None, "--config", help="kbench.toml or pyproject.toml (default: found from here upwards)"),
    output_dir: Path = typer.Option(Path("bench_out"), "--output-dir", help="where benchmark.md and results.json go"),
    rounds: Optional[int] = typer.Option(None, "--rounds", min=1, help="timing rounds per case (default: the suite's, 10)"),
    case_timeout: Optional[float] = typer.Option(None, "--case-timeout", min=0.001, help="seconds per case before it counts as hung (default: each kernel's timeout)"),
    no_fail: bool = typer.Option(False, "--no-fail", help="report, but exit 0 even when a case is incorrect or failed"),
    device: str = typer.Option("auto", "--device", help=_DEVICE_HELP),
    gpu: int = typer.Option(0, "--gpu", help="CUDA device index"),
    kernel: list[str] = typer.Option([], "--kernel", help="only this kernel (repeatable)"),
    json_summary: Optional[Path] = typer.Option(None, "--json-summary", help="also write a small JSON with the gate and the file paths"),
) -> None:
    from kbench_ci.cli.app import resolve_device
    from kbench_ci.gate.run import run_suite
    from kbench_ci.results.outcome import RunRequest

    def work(on_progress: Callable[[Any], None]) -> Any:
        request = RunRequest(
            start=Path.cwd(), device=resolve_device(device, gpu), output_dir=output_dir, config=config,
            rounds=rounds, case_timeout_s=case_timeout, kernels=tuple(kernel), command_line=tuple(sys.argv),
        )
        return run_suite(request, on_progress=on_progress)

    outcome = _drive(work, interrupted=f"cases measured so far are in {output_dir / 'results.json'}")
    _finish(
        passed=outcome.passed, no_fail=no_fail, failure=outcome.summary, json_summary=json_summary,
        summary_for=lambda code: {
            "command": "run", "passed": outcome.passed, "summary": outcome.summary, "counts": outcome.counts,
            "exit_code": code, "results": str(outcome.results_path), "report": str(outcome.report_path),
        },
    )


def compare_command(
    base: str = typer.Option(..., "--base", help="the base revision: a branch, tag or sha (e.g. main, origin/main)"),
    head: Optional[str] = typer.Option(None, "--head", help="the head revision (default: this working tree as it is, uncommitted changes included)"),
    base_mode: str = typer.Option("merge-base", "--base-mode", help="merge-base (default: where head branched off base) | tip (base as it is)"),
    config: Optional[Path] = typer.Option(None, "--config", help="kbench.toml or pyproject.toml inside the repository (each side reads its own copy)"),
    output_dir: Path = typer.Option(Path("bench_out"), "--output-dir", help="where benchmark.md and results.json go"),
    threshold: Optional[str] = typer.Option(None, "--threshold", help='smallest slowdown that fails the gate, for every kernel: 0.02 or "2%" (default: per kernel, 2%)'),
    max_geomean_slowdown: Optional[str] = typer.Option(None, "--max-geomean-slowdown", help='fail when the geometric mean of head/base exceeds 1 + this: 0.01 or "1%"'),
    rounds: Optional[int] = typer.Option(None, "--rounds", min=1, help="interleaved timing rounds per case (default: the suite's, 10)"),
    case_timeout: Optional[float] = typer.Option(None, "--case-timeout", min=0.001, help="seconds per case before it counts as hung (default: each kernel's timeout)"),
    no_fail: bool = typer.Option(False, "--no-fail", help="report regressions but exit 0 (usage and environment errors still exit 2 / 3)"),
    device: str = typer.Option("auto", "--device", help=_DEVICE_HELP),
    gpu: int = typer.Option(0, "--gpu", help="CUDA device index"),
    kernel: list[str] = typer.Option([], "--kernel", help="only this kernel (repeatable)"),
    json_summary: Optional[Path] = typer.Option(None, "--json-summary", help="also write a small JSON with the gate and the file paths"),
) -> None:
    from kbench_ci.cli.app import resolve_device
    from kbench_ci.gate.compare import run_compare
    from kbench_ci.results.outcome import CompareRequest
    from kbench_ci.suite.loader import parse_threshold

    def work(on_progress: Callable[[Any], None]) -> Any:
        if base_mode not in ("merge-base", "tip"):
            raise UsageError(f"unknown --base-mode '{base_mode}'", hint="use merge-base or tip")
        chosen_threshold = parse_threshold(threshold) if threshold is not None else None
        chosen_geomean = (
            parse_fraction(max_geomean_slowdown, option="--max-geomean-slowdown")
            if max_geomean_slowdown is not None else None
        )
        chosen = resolve_device(device, gpu)
        request = CompareRequest(
            start=Path.cwd(), base=base, head=head, base_mode=base_mode, config=config, device=chosen,
            output_dir=output_dir, threshold=chosen_threshold, max_geomean_slowdown=chosen_geomean,
            rounds=rounds, case_timeout_s=case_timeout, kernels=tuple(kernel), no_fail=no_fail,
            command_line=tuple(sys.argv),
        )
        return run_compare(request, on_progress=on_progress)

    outcome = _drive(
        work, interrupted=f"worktrees removed; cases measured so far are in {output_dir / 'results.json'}"
    )
    gate = outcome.gate
    failing = ", ".join(gate.failing[:10]) + (" …" if len(gate.failing) > 10 else "")
    _finish(
        passed=gate.passed, no_fail=no_fail, failure=gate.summary + (f": {failing}" if failing else ""),
        json_summary=json_summary,
        summary_for=lambda code: {
            "command": "compare", **gate.as_json(), "exit_code": code,
            "base": outcome.base.as_json(), "head": outcome.head.as_json(),
            "results": str(outcome.results_path), "report": str(outcome.report_path),
        },
    )
