"""Options that several commands share, and what ``--device`` / ``--gpu`` resolve to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kbench_ci.cli.console import err
from kbench_ci.errors import EnvironmentProblem, UsageError

__all__ = ["DEFAULT_OUTPUT_DIR", "GpuOption", "OutputDirOption", "resolve_device"]

#: where benchmark.md and results.json go unless --output-dir says otherwise
DEFAULT_OUTPUT_DIR = Path("bench_out")

OutputDirOption = Annotated[Path, typer.Option("--output-dir", help="where benchmark.md and results.json go")]
GpuOption = Annotated[int, typer.Option("--gpu", help="CUDA device index")]


def resolve_device(device: str, gpu: int) -> str:
    """``auto``: the chosen GPU when CUDA is there, else CPU with a one-line warning."""
    # torch-free start-up: torch is imported only once a command needs a device, never for --help.
    import torch  # noqa: PLC0415

    choice = device.strip().lower()
    if choice not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown --device '{device}'", hint="use auto, cuda or cpu")
    if choice == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        if choice == "cuda":
            raise EnvironmentProblem(
                "--device cuda was asked for but no CUDA device is available", hint="use --device cpu"
            )
        err(
            "kbench-ci: warning: no CUDA device found; running on CPU "
            "(PyTorch on CPU tensors, Triton under TRITON_INTERPRET=1, host_time timing)"
        )
        return "cpu"
    count = torch.cuda.device_count()
    if not 0 <= gpu < count:
        raise UsageError(
            f"--gpu {gpu} does not exist; this machine has {count} CUDA device(s)", hint=f"use 0..{count - 1}"
        )
    return f"cuda:{gpu}"
