"""``kbench-ci build``: compile .cu solutions to the .so beside them, printing the nvcc line.

Printing and exit codes only; the work is in :mod:`kbench_ci.cuda.build`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kbench_ci.cli.console import err, error_boundary, out

__all__ = ["HELP", "build"]

HELP = "Compile a .cu solution to the .so beside it (cached by source hash); prints the exact nvcc line."


def build(
    sources: Annotated[list[Path], typer.Argument(help="one or more .cu files")],
    cutlass: Annotated[
        bool,
        typer.Option(
            "--cutlass", metavar="", help="add CUTLASS/CuTe include flags (CUTLASS_PATH or the nvidia-cutlass package)"
        ),
    ] = False,
    arch: Annotated[
        str | None, typer.Option("--arch", help="sm_90 etc.; default: the GPU's, or KBENCH_CUDA_ARCH")
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", metavar="", help="rebuild even when the source hash matches")
    ] = False,
    flag: Annotated[list[str] | None, typer.Option("--flag", metavar="FLAG", help="extra nvcc flag (repeatable)")] = None,
) -> None:
    # torch-free start-up: kbench_ci.cuda pulls in torch, so it is imported only when build runs.
    from kbench_ci.cuda.build import CompileError, format_command, plan_build  # noqa: PLC0415
    from kbench_ci.cuda.build import build as run_build  # noqa: PLC0415

    with error_boundary():
        for source in sources:
            try:
                plan = plan_build(
                    source, cutlass=cutlass, arch=arch, extra_flags=tuple(flag or ()), arch_option="--arch"
                )
                out(format_command(plan))
                result = run_build(plan, use_cache=not no_cache)
            except CompileError as exc:
                err(exc.compiler_output.rstrip())  # the compiler's own words first, then the one-line error
                raise
            state = "up to date (source hash matches)" if result.cached else f"built in {result.duration_s:.1f} s"
            out(f"{plan.output}: {state}")
