"""``kbench-ci bench``: check one kernel against its PyTorch reference and time it.

Printing and exit codes only; the work is in :mod:`kbench_ci.gate.bench`.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer

from kbench_ci.cli.console import ProgressLine, err, error_boundary, out
from kbench_ci.cli.options import (
    DEFAULT_OUTPUT_DIR,
    GpuOption,
    OutputDirOption,
    UsageProblems,
    check_gpu_and_output_dir,
    check_seconds,
    resolve_device,
)
from kbench_ci.errors import ExitCode, UsageError
from kbench_ci.results.model import MeasureSettings
from kbench_ci.results.outdir import output_folder
from kbench_ci.suite import settings, values

__all__ = ["CONTEXT_SETTINGS", "HELP", "bench"]

HELP = "Check one kernel against its PyTorch reference and time it. Unknown --NAME=VALUE flags are dimensions."
#: the flags bench does not know are the problem's dimensions (--M=1024), parsed by the command
CONTEXT_SETTINGS: dict[str, Any] = {"allow_extra_args": True, "ignore_unknown_options": True}
# the panels of `bench -h`
_RUN, _CORRECTNESS, _MEASURE, _SOL = "What to run", "Correctness", "How to measure", "Speed of light"


def _known_options(ctx: typer.Context) -> list[str]:
    """Every ``--flag`` of the command, to suggest the one a mistyped flag meant."""
    return [opt for param in ctx.command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")]


def _one_implementation(implementation: list[str] | None, backend: list[str] | None) -> str:
    """``--implementation`` and its alias ``--backend``: any number of times, but one value.

    Click would keep the last one silently; two different values are a mistake to name."""
    given = [("--implementation", v) for v in implementation or ()] + [("--backend", v) for v in backend or ()]
    values = list(dict.fromkeys(value for _, value in given))
    if len(values) > 1:
        named = " and ".join(f"{flag} {value}" for flag, value in given)
        raise UsageError(
            f"{named} name different implementations",
            hint=f"give one of {', '.join(values)} (--backend is another name for --implementation)",
        )
    return values[0] if values else "auto"


def bench(
    ctx: typer.Context,
    solution: Annotated[
        Path, typer.Argument(help="kernel.cu (built .so beside it) or kernel.py (setup/run_kernel)")
    ],
    ref: Annotated[Path, typer.Option("--ref", rich_help_panel=_RUN, help="ref.py defining reference(**kwargs)")],
    implementation: Annotated[
        list[str] | None,
        typer.Option(
            "--implementation", rich_help_panel=_RUN, metavar="<name>",
            help="auto | cuda-cpp | cutlass | triton | cute-dsl | pytorch (default: auto)",
        ),
    ] = None,
    backend: Annotated[
        list[str] | None, typer.Option("--backend", rich_help_panel=_RUN, metavar="<name>", help="another name for --implementation")
    ] = None,
    baselines: Annotated[
        str,
        typer.Option(
            "--baselines", rich_help_panel=_RUN, help="comma list of pytorch-eager, torch-compile, flashinfer; or all / none"
        ),
    ] = "none",
    output_dir: OutputDirOption = DEFAULT_OUTPUT_DIR,
    seed: Annotated[int, typer.Option("--seed", rich_help_panel=_CORRECTNESS)] = settings.DEFAULT_SEED,
    correctness_trials: Annotated[
        int, typer.Option("--correctness-trials", rich_help_panel=_CORRECTNESS, min=1)
    ] = settings.DEFAULT_CORRECTNESS_TRIALS,
    timing_method: Annotated[
        str, typer.Option("--timing-method", rich_help_panel=_MEASURE, help="cuda_event | host_time")
    ] = settings.DEFAULT_TIMING_METHOD,
    num_warmup: Annotated[int, typer.Option("--num-warmup", rich_help_panel=_MEASURE, min=0)] = settings.DEFAULT_NUM_WARMUP,
    num_trials: Annotated[int, typer.Option("--num-trials", rich_help_panel=_MEASURE, min=1)] = settings.DEFAULT_NUM_TRIALS,
    discard_first: Annotated[int, typer.Option("--discard-first", rich_help_panel=_MEASURE, min=0)] = settings.DEFAULT_DISCARD_FIRST,
    gpu: GpuOption = 0,
    device: Annotated[str, typer.Option("--device", rich_help_panel=_MEASURE, help="auto | cuda | cpu")] = "auto",
    atol: Annotated[float | None, typer.Option("--atol", rich_help_panel=_CORRECTNESS, min=0.0)] = None,
    rtol: Annotated[float | None, typer.Option("--rtol", rich_help_panel=_CORRECTNESS, min=0.0)] = None,
    precision: Annotated[
        str | None, typer.Option("--precision", rich_help_panel=_CORRECTNESS, help="tf32: float32 outputs get tf32 tolerances")
    ] = None,
    ptr_size: Annotated[
        list[str] | None,
        typer.Option(
            "--ptr-size", rich_help_panel=_RUN, metavar="NAME=EXPR",
            help="pointer sizes for .cu without setup(): NAME=EXPR (repeatable) or EXPR for all",
        ),
    ] = None,
    work_bytes: Annotated[
        str | None, typer.Option("--bytes", rich_help_panel=_SOL, help='bytes one call must move, over the dims: e.g. "3*N*4"')
    ] = None,
    work_flops: Annotated[
        str | None, typer.Option("--flops", rich_help_panel=_SOL, help='FLOPs one call must do, over the dims: e.g. "2*M*N*K"')
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", rich_help_panel=_MEASURE, help="seconds before a hung kernel is killed")
    ] = settings.DEFAULT_TIMEOUT_S,
    no_flush_l2: Annotated[
        bool, typer.Option("--no-flush-l2", metavar="", rich_help_panel=_MEASURE,
                           help="time with a warm L2 (default: flushed before every trial)")
    ] = False,
    isolation: Annotated[
        str, typer.Option("--isolation", rich_help_panel=_MEASURE, metavar="process|judge",
                          help="judge: the solution in a process of its own, checked by one that runs none of its code "
                          "(docs/isolation.md)")
    ] = "process",
) -> None:
    # torch-free start-up: these modules pull in torch, so they are imported only when bench runs.
    from kbench_ci.gate.bench import BenchRequest, parse_dimension_args, run_bench  # noqa: PLC0415
    from kbench_ci.measure.baselines import parse_baselines  # noqa: PLC0415
    from kbench_ci.measure.impls import resolve_implementation  # noqa: PLC0415
    from kbench_ci.suite.size_expr import parse_ptr_size_options  # noqa: PLC0415

    progress = ProgressLine()
    with error_boundary(progress=progress):
        known_options = _known_options(ctx)
        problems = UsageProblems()
        dims: dict[str, int] = {}
        kind = ""
        chosen_baselines: tuple[str, ...] = ()
        per_pointer: dict[str, str] = {}
        default_size: str | None = None
        with problems.check():
            dims = parse_dimension_args(list(ctx.args), known_options)
        with problems.check():
            kind = resolve_implementation(_one_implementation(implementation, backend), solution)
        with problems.check():
            chosen_baselines = parse_baselines(baselines)
        problems.value("--seed", partial(values.integer, minimum=0), seed)
        check_gpu_and_output_dir(gpu, problems)
        check_seconds(problems, timeout=timeout)
        with problems.check():
            if timing_method not in ("cuda_event", "host_time"):
                raise UsageError(f"unknown --timing-method '{timing_method}'", hint="use cuda_event or host_time")
        with problems.check():
            if precision not in (None, "tf32"):
                raise UsageError(f"unknown --precision '{precision}'", hint="the only option is tf32")
        with problems.check():
            if discard_first >= num_trials:
                raise UsageError("--discard-first must be smaller than --num-trials")
        with problems.check():
            per_pointer, default_size = parse_ptr_size_options(ptr_size or [])
        problems.raise_any()
        chosen_device = resolve_device(device, gpu)
        cpu_timing_note = chosen_device == "cpu" and timing_method == "cuda_event"
        if cpu_timing_note:
            timing_method = "host_time"
        request = BenchRequest(
            solution=solution, ref=ref, implementation=kind, baselines=chosen_baselines, dims=dims,
            output_dir=output_dir,
            settings=MeasureSettings(
                device=chosen_device, seed=seed, correctness_trials=correctness_trials, timing_method=timing_method,
                num_warmup=num_warmup, trials_per_round=num_trials, discard_first=discard_first, rounds=1,
                flush_l2=not no_flush_l2,
            ),
            atol=atol, rtol=rtol, precision=precision, ptr_sizes=per_pointer,
            ptr_size=default_size, bytes_expr=work_bytes, flops_expr=work_flops, timeout_s=timeout,
            command_line=tuple(sys.argv),
            known_options=tuple(known_options),
            isolation=settings.check_isolation(isolation, where="--isolation"),
        )
        # Checked and held before the worker starts: a bad folder fails in a second, not after
        # the run, and a second run into the same folder is refused.
        with output_folder(output_dir):
            # Said once the run starts, not before a usage error (which is then one line)
            outcome = run_bench(request, on_event=progress, on_start=(
                (lambda: err("kbench-ci: warning: CPU mode times with host_time (CUDA events need a GPU)"))
                if cpu_timing_note else None
            ))
    solution_result = outcome.case.variants[0]
    for note in solution_result.notes:
        err(f"kbench-ci: {note}")
    out(outcome.report_path.read_text(encoding="utf-8"))
    out(f"wrote {outcome.report_path} and {outcome.results_path}")
    if solution_result.status != "ok":
        err(f"kbench-ci: {solution_result.label} {solution_result.status.upper()}: {solution_result.message}")
        raise typer.Exit(int(ExitCode.GATE_FAILED))
