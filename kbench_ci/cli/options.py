"""Options that several commands share, and what ``--device`` / ``--gpu`` resolve to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kbench_ci.cli.console import err
from kbench_ci.errors import EnvironmentProblem, UsageError
from kbench_ci.results.outcome import ShardRequest
from kbench_ci.suite.shards import parse_shard, read_timings

__all__ = [
    "DEFAULT_OUTPUT_DIR",
    "GpuOption",
    "OutputDirOption",
    "ShardOption",
    "ShardTimingsOption",
    "resolve_device",
    "shard_request",
]

#: where benchmark.md and results.json go unless --output-dir says otherwise
DEFAULT_OUTPUT_DIR = Path("bench_out")

OutputDirOption = Annotated[Path, typer.Option("--output-dir", help="where benchmark.md and results.json go")]
GpuOption = Annotated[int, typer.Option("--gpu", help="CUDA device index")]
ShardOption = Annotated[
    str | None,
    typer.Option(
        "--shard", metavar="K/N",
        help="measure only the K-th of N shares of the cases (a job of a runner matrix); "
        "join the shards' folders with `kbench-ci merge`",
    ),
]
ShardTimingsOption = Annotated[
    Path | None,
    typer.Option(
        "--shard-timings", metavar="FILE",
        help="balance the shards by time: an earlier results.json (e.g. the last run on main) or "
        "{case_id: seconds}; give every job the same file (default: balanced by count)",
    ),
]


def shard_request(shard: str | None, timings: Path | None) -> ShardRequest | None:
    """``--shard K/N`` and ``--shard-timings FILE`` as the gate's request (None without --shard)."""
    if shard is None:
        if timings is not None:
            raise UsageError("--shard-timings needs --shard K/N", hint="e.g. --shard 1/3 --shard-timings last/results.json")
        return None
    spec = parse_shard(shard)
    return ShardRequest(
        spec.index, spec.count, timings=read_timings(timings) if timings is not None else None,
        timings_file=str(timings) if timings is not None else None,
    )


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
