"""The ``kbench-ci`` command line: the only place that prints for humans and picks exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from kbench_ci.suite import settings
from kbench_ci.errors import ExitCode, KbenchError, UsageError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="A CI regression gate for GPU kernels: correct first, timed truthfully, judged with statistics.",
    pretty_exceptions_enable=False,
)

_BENCH_OPTIONS = [
    "--implementation", "--backend", "--baselines", "--ref", "--output-dir", "--seed", "--correctness-trials",
    "--timing-method", "--num-warmup", "--num-trials", "--discard-first", "--gpu", "--device", "--atol", "--rtol",
    "--precision", "--ptr-size", "--timeout", "--no-flush-l2",
]


@app.callback()
def _root() -> None:
    """A CI regression gate for GPU kernels: correct first, timed truthfully, judged with statistics."""


def err(message: str) -> None:
    typer.echo(message, err=True)


def fail(exc: KbenchError) -> typer.Exit:
    err(f"kbench-ci: error: {exc.one_line()}")
    return typer.Exit(int(exc.exit_code))


class ProgressLine:
    """A live progress line on a terminal; plain phase lines in CI logs."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last_plain: tuple[str, str] | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("event") != "progress":
            return
        variant, phase = event["variant"], event["phase"]
        done, total = event["done"], event["total"]
        if self.tty:
            sys.stderr.write(f"\r\033[K[{variant}] {phase} {done + 1}/{total}")
            sys.stderr.flush()
        elif self.last_plain != (variant, phase):
            self.last_plain = (variant, phase)
            err(f"[{variant}] {phase} ...")

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def resolve_device(device: str, gpu: int) -> str:
    """``auto``: the chosen GPU when CUDA is there, else CPU with a one-line warning."""
    import torch

    choice = device.strip().lower()
    if choice not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown --device '{device}'", hint="use auto, cuda or cpu")
    if choice == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        if choice == "cuda":
            from kbench_ci.errors import EnvironmentProblem

            raise EnvironmentProblem("--device cuda was asked for but no CUDA device is available", hint="use --device cpu")
        err("kbench-ci: warning: no CUDA device found; running on CPU (PyTorch on CPU tensors, Triton under TRITON_INTERPRET=1, host_time timing)")
        return "cpu"
    count = torch.cuda.device_count()
    if not 0 <= gpu < count:
        raise UsageError(f"--gpu {gpu} does not exist; this machine has {count} CUDA device(s)", hint=f"use 0..{count - 1}")
    return f"cuda:{gpu}"


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    help="Check one kernel against its PyTorch reference and time it. Unknown --NAME=VALUE flags are dimensions.",
)
def bench(
    ctx: typer.Context,
    solution: Path = typer.Argument(..., help="kernel.cu (built .so beside it) or kernel.py (setup/run_kernel)"),
    ref: Path = typer.Option(..., "--ref", help="ref.py defining reference(**kwargs)"),
    implementation: str = typer.Option("auto", "--implementation", "--backend", help="auto | cuda-cpp | cutlass | triton | cute-dsl | pytorch"),
    baselines: str = typer.Option("none", "--baselines", help="comma list of pytorch-eager, torch-compile, flashinfer; or all / none"),
    output_dir: Path = typer.Option(Path("bench_out"), "--output-dir", help="where benchmark.md and results.json go"),
    seed: int = typer.Option(settings.DEFAULT_SEED, "--seed"),
    correctness_trials: int = typer.Option(settings.DEFAULT_CORRECTNESS_TRIALS, "--correctness-trials", min=1),
    timing_method: str = typer.Option(settings.DEFAULT_TIMING_METHOD, "--timing-method", help="cuda_event | host_time"),
    num_warmup: int = typer.Option(settings.DEFAULT_NUM_WARMUP, "--num-warmup", min=0),
    num_trials: int = typer.Option(settings.DEFAULT_NUM_TRIALS, "--num-trials", min=1),
    discard_first: int = typer.Option(settings.DEFAULT_DISCARD_FIRST, "--discard-first", min=0),
    gpu: int = typer.Option(0, "--gpu", help="CUDA device index"),
    device: str = typer.Option("auto", "--device", help="auto | cuda | cpu"),
    atol: Optional[float] = typer.Option(None, "--atol", min=0.0),
    rtol: Optional[float] = typer.Option(None, "--rtol", min=0.0),
    precision: Optional[str] = typer.Option(None, "--precision", help="tf32: float32 outputs get tf32 tolerances"),
    ptr_size: list[str] = typer.Option([], "--ptr-size", help="pointer sizes for .cu without setup(): NAME=EXPR (repeatable) or EXPR for all"),
    timeout: float = typer.Option(settings.DEFAULT_TIMEOUT_S, "--timeout", help="seconds before a hung kernel is killed"),
    no_flush_l2: bool = typer.Option(False, "--no-flush-l2", help="time with a warm L2 (default: flushed before every trial)"),
) -> None:
    from kbench_ci.gate.bench import BenchRequest, parse_dimension_args, run_bench
    from kbench_ci.results.model import MeasureSettings
    from kbench_ci.measure.baselines import parse_baselines
    from kbench_ci.measure.impls import resolve_implementation

    progress = ProgressLine()
    try:
        dims = parse_dimension_args(list(ctx.args), _BENCH_OPTIONS)
        kind = resolve_implementation(implementation, solution)
        chosen_baselines = parse_baselines(baselines)
        if timing_method not in ("cuda_event", "host_time"):
            raise UsageError(f"unknown --timing-method '{timing_method}'", hint="use cuda_event or host_time")
        if precision not in (None, "tf32"):
            raise UsageError(f"unknown --precision '{precision}'", hint="the only option is tf32")
        if discard_first >= num_trials:
            raise UsageError("--discard-first must be smaller than --num-trials")
        from kbench_ci.cuda.signature import parse_ptr_size_options

        per_pointer, default_size = parse_ptr_size_options(ptr_size)
        chosen_device = resolve_device(device, gpu)
        if chosen_device == "cpu" and timing_method == "cuda_event":
            err("kbench-ci: warning: CPU mode times with host_time (CUDA events need a GPU)")
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
            ptr_size=default_size, timeout_s=timeout, command_line=tuple(sys.argv),
        )
        outcome = run_bench(request, on_event=progress)
    except KbenchError as exc:
        progress.close()
        raise fail(exc) from None
    progress.close()
    for note in outcome.case.variants[0].notes:
        err(f"kbench-ci: {note}")
    typer.echo(outcome.report_path.read_text(encoding="utf-8"))
    typer.echo(f"wrote {outcome.report_path} and {outcome.results_path}")
    solution_result = outcome.case.variants[0]
    if solution_result.status != "ok":
        err(f"kbench-ci: {solution_result.label} {solution_result.status.upper()}: {solution_result.message}")
        raise typer.Exit(int(ExitCode.GATE_FAILED))


@app.command(help="Compile a .cu solution to the .so beside it (cached by source hash); prints the exact nvcc line.")
def build(
    sources: list[Path] = typer.Argument(..., help="one or more .cu files"),
    cutlass: bool = typer.Option(False, "--cutlass", help="add CUTLASS/CuTe include flags (CUTLASS_PATH or the nvidia-cutlass package)"),
    arch: Optional[str] = typer.Option(None, "--arch", help="sm_90 etc.; default: the GPU's, or KBENCH_CUDA_ARCH"),
    no_cache: bool = typer.Option(False, "--no-cache", help="rebuild even when the source hash matches"),
    flag: list[str] = typer.Option([], "--flag", help="extra nvcc flag (repeatable)"),
) -> None:
    from kbench_ci.cuda.build import CompileError, format_command, plan_build
    from kbench_ci.cuda.build import build as run_build

    for source in sources:
        try:
            plan = plan_build(source, cutlass=cutlass, arch=arch, extra_flags=tuple(flag))
            typer.echo(format_command(plan))
            result = run_build(plan, use_cache=not no_cache)
        except CompileError as exc:
            err(exc.compiler_output.rstrip())
            raise fail(exc) from None
        except KbenchError as exc:
            raise fail(exc) from None
        state = "up to date (source hash matches)" if result.cached else f"built in {result.duration_s:.1f} s"
        typer.echo(f"{plan.output}: {state}")


@app.command(help="Post or update the sticky PR comment with DIR/benchmark.md (finds its own comment by a hidden marker).")
def comment(
    report: Optional[Path] = typer.Option(None, "--report", help="directory holding benchmark.md and results.json"),
    from_artifact: Optional[Path] = typer.Option(None, "--from-artifact", help="a downloaded benchmark artifact (fork recipe); holds pr-number.txt"),
    repository: Optional[str] = typer.Option(None, "--repo", help="owner/name; default GITHUB_REPOSITORY"),
    pr: Optional[int] = typer.Option(None, "--pr", help="pull request number; default from the event payload"),
    mode: str = typer.Option("always", "--mode", help="always | on-change | on-regression | never"),
    marker_id: str = typer.Option("default", "--marker-id", help="keeps comments of several suites apart"),
) -> None:
    from kbench_ci.github.comment import run_comment

    if report is None and from_artifact is None:
        raise fail(UsageError("give --report DIR or --from-artifact DIR"))
    try:
        outcome = run_comment(
            report or from_artifact, from_artifact=from_artifact, repository=repository, pr_number=pr,
            token=None, api_url=None, mode=mode, marker_id=marker_id,
        )
    except KbenchError as exc:
        raise fail(exc) from None
    if outcome.action == "forbidden":
        err(f"kbench-ci: warning: {outcome.reason}")
        return
    typer.echo(f"comment {outcome.action}: {outcome.url or outcome.reason}")


# Suite commands (run, compare) live in their own module; registered here so `python -m
# kbench_ci.cli.app` and the console script see the same app.
from kbench_ci.cli import suite_commands as cli_suite  # noqa: E402

cli_suite.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
