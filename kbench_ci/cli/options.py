"""Options that several commands share, and what ``--device`` / ``--gpu`` resolve to."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from kbench_ci.cli.console import err
from kbench_ci.cuda.driver import CudaDevice, cuda_devices
from kbench_ci.errors import EnvironmentProblem, UsageError
from kbench_ci.results.outcome import GpuSlot, ShardRequest
from kbench_ci.suite import settings, values
from kbench_ci.suite.shards import parse_shard, read_timings

__all__ = [
    "DEFAULT_OUTPUT_DIR",
    "UsageProblems",
    "check_gpu_and_output_dir",
    "check_seconds",
    "GpuOption",
    "GpusOption",
    "OutputDirOption",
    "ShardOption",
    "SeedsOption",
    "ShardTimingsOption",
    "check_seeds",
    "parse_gpus",
    "resolve_device",
    "resolve_gpus",
    "shard_request",
]

#: where benchmark.md and results.json go unless --output-dir says otherwise
DEFAULT_OUTPUT_DIR = Path("bench_out")

_T = TypeVar("_T")


class UsageProblems:
    """Every problem of a command line, reported at once (as kbench.toml's are): each check
    that fails adds its line, and :meth:`raise_any` raises them together. The value rules are
    kbench.toml's (:mod:`kbench_ci.suite.values`), so both say the same of the same value."""

    def __init__(self) -> None:
        self.found: list[UsageError] = []

    @contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except UsageError as exc:
            self.found.append(exc)

    def value(self, option: str, rule: Callable[[_T], _T], value: _T) -> _T:
        try:
            return rule(value)
        except values.InvalidValue as exc:
            self.found.append(UsageError(f"{option} {exc}"))
            return value

    def not_empty(self, option: str, argv: Sequence[str] | None = None) -> None:
        """An option given as an empty string (``--output-dir ""``): typer turns it into '.'."""
        args = list(sys.argv[1:] if argv is None else argv)
        for index, arg in enumerate(args):
            given = arg == f"{option}=" or (arg == option and index + 1 < len(args) and not args[index + 1].strip())
            if given:
                self.found.append(UsageError(f"{option} must be a folder path, got an empty string"))
                return

    def raise_any(self) -> None:
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise UsageError(f"{len(self.found)} problems:" + "".join(f"\n  - {p.one_line()}" for p in self.found))

OutputDirOption = Annotated[Path, typer.Option("--output-dir", rich_help_panel="Output", help="where benchmark.md and results.json go")]
GpuOption = Annotated[int | None, typer.Option("--gpu", rich_help_panel="GPUs and shards", help="CUDA device index (default 0)")]
GpusOption = Annotated[
    str | None,
    typer.Option(
        "--gpus", rich_help_panel="GPUs and shards", metavar="all|I,J,...",
        help="spread the cases over several GPUs of one model, one warm worker each: 'all' or indices such as "
        "0,1,3; a case's base and head always share one GPU. An index twice (0,0) puts two workers on one GPU: "
        "for testing the distribution only, its timings are not valid",
    ),
]
ShardOption = Annotated[
    str | None,
    typer.Option(
        "--shard", rich_help_panel="GPUs and shards", metavar="K/N",
        help="measure only the K-th of N shares of the cases (a job of a runner matrix); "
        "join the shards' folders with `kbench-ci merge`",
    ),
]
ShardTimingsOption = Annotated[
    Path | None,
    typer.Option(
        "--shard-timings", rich_help_panel="GPUs and shards", metavar="FILE",
        help="balance the shards by time: an earlier results.json (e.g. the last run on main) or "
        "{case_id: seconds}; give every job the same file (default: balanced by count)",
    ),
]

SeedsOption = Annotated[
    str | None,
    typer.Option(
        "--seeds", rich_help_panel="How to measure", metavar="S,S,...",
        help="one correctness trial at each of these seeds, for every side (a report's reproduce line names the "
        "failing ones): a local debugging aid; under the judge the seeds are then chosen, not drawn, and the "
        "report says so",
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


def check_gpu_and_output_dir(gpu: int | None, problems: UsageProblems | None = None) -> None:
    """``--gpu`` and ``--output-dir`` by kbench.toml's rules, both problems at once: raised now,
    or added to ``problems`` (a command that checks more options first)."""
    found = UsageProblems() if problems is None else problems
    if gpu is not None:
        found.value("--gpu", partial(values.integer, minimum=0), gpu)
    found.not_empty("--output-dir")
    if problems is None:
        found.raise_any()


def check_seconds(
    problems: UsageProblems, *, case_timeout: float | None = None, time_budget: float | None = None,
    timeout: float | None = None,
) -> None:
    """``--case-timeout`` / ``bench --timeout`` by kbench.toml's rule for ``timeout``, and
    ``--time-budget`` by its rule for ``time_budget`` (:mod:`kbench_ci.suite.values`): the
    same values refused, in the same words. Each given one is checked; problems go to ``problems``."""
    for option, value in (("--case-timeout", case_timeout), ("--timeout", timeout)):
        if value is not None:
            problems.value(option, values.timeout_seconds, value)
    if time_budget is not None:
        problems.value("--time-budget", values.budget_seconds, time_budget)


def check_rounds(problems: UsageProblems, rounds: int | None) -> None:
    """``--rounds`` by kbench.toml's rule for ``rounds``: 1 to :data:`~kbench_ci.suite.settings.MAX_ADAPTIVE_ROUNDS`,
    the most rounds a case has."""
    if rounds is None:
        return
    with problems.check():
        try:
            values.integer(rounds, minimum=1, maximum=settings.MAX_ADAPTIVE_ROUNDS)
        except values.InvalidValue as exc:
            raise UsageError(
                f"--rounds {exc}",
                hint=f"give 1 to {settings.MAX_ADAPTIVE_ROUNDS}; compare adds rounds by itself until the verdict is "
                "decided (--time-budget)",
            ) from None


def check_seeds(problems: UsageProblems, seeds: str | None) -> tuple[int, ...]:
    """``--seeds 1234,5678`` as the seeds (empty without the option), each by kbench.toml's rule
    for ``seed``; a problem goes to ``problems`` (and nothing is returned for it)."""
    if seeds is None:
        return ()
    entries = [entry.strip() for entry in seeds.split(",")]
    if not all(re.fullmatch(r"[+-]?\d+", entry) for entry in entries):
        problems.found.append(UsageError(
            f"--seeds must be whole numbers separated by commas, got {seeds!r}",
            hint="e.g. --seeds 1234,5678: the seeds a report's reproduce line names",
        ))
        return ()
    chosen = [problems.value("--seeds", partial(values.integer, minimum=0), int(entry)) for entry in entries]
    return tuple(chosen)


def resolve_device(device: str, gpu: int | None) -> str:
    """``auto``: the chosen GPU (``--gpu``, default 0) when CUDA is there, else CPU with a
    one-line warning."""
    gpu = 0 if gpu is None else gpu
    choice = device.strip().lower()
    if choice not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown --device '{device}'", hint="use auto, cuda or cpu")
    if choice == "cpu":
        return "cpu"
    devices = usable_cuda_devices()
    if not devices:
        if choice == "cuda":
            raise EnvironmentProblem(
                "--device cuda was asked for but no CUDA device is available", hint="use --device cpu"
            )
        err(
            "kbench-ci: warning: no CUDA device found; running on CPU "
            "(PyTorch on CPU tensors, Triton under TRITON_INTERPRET=1, host_time timing)"
        )
        return "cpu"
    count = len(devices)
    if not 0 <= gpu < count:
        raise UsageError(
            f"--gpu {gpu} does not exist; this machine has {count} CUDA device(s)", hint=f"use 0..{count - 1}"
        )
    return f"cuda:{gpu}"


def parse_gpus(text: str) -> tuple[int, ...] | None:
    """``--gpus``: ``all`` → None; ``0,1,3`` → (0, 1, 3), in the order given, duplicates kept."""
    value = text.strip().lower()
    if value == "all":
        return None
    entries = [entry.strip() for entry in value.split(",")]
    if not all(entry.isdigit() for entry in entries):
        raise UsageError(
            f"--gpus {text!r} is not a list of GPU indices", hint="use all, or indices such as 0,1,3"
        )
    return tuple(int(entry) for entry in entries)


def usable_cuda_devices() -> tuple[CudaDevice, ...]:
    """The CUDA devices a worker can measure on: the driver's, none where the installed torch was
    built without CUDA. Asked of the driver and of torch's ``version.py``, not of torch itself:
    the parent never imports torch, so the warm worker starts (and imports it) at once. A torch
    that cannot use these GPUs for another reason (a driver too old for its CUDA) is found by
    the worker, which stops the run with exit 3."""
    if torch_cuda_build() is None:
        return ()
    return cuda_devices()


#: ``cuda: Optional[str] = '13.0'`` (or ``= None``) in torch/version.py, as torch's build writes it
_TORCH_CUDA_LINE = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*(?P<value>.+?)\s*$", re.MULTILINE)


def torch_cuda_build(version_file: Path | None = None) -> str | None:
    """The CUDA version the installed torch was built for (``"13.0"``), read from its
    ``version.py`` without importing it; None for a CPU-only build or no torch. A file that
    cannot be read or parsed counts as CUDA (``"unknown"``): the worker will tell."""
    if version_file is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.origin:
            return None
        version_file = Path(spec.origin).parent / "version.py"
    try:
        match = _TORCH_CUDA_LINE.search(version_file.read_text(encoding="utf-8"))
    except OSError:
        return "unknown"
    if match is None:
        return "unknown"
    value = match.group("value")
    return None if value == "None" else value.strip("'\"")


def cuda_device_names() -> list[str]:
    """The model of each CUDA device this process sees, by index (none: no usable CUDA)."""
    return [device.name for device in usable_cuda_devices()]


def resolve_gpus(device: str, gpu: int | None, gpus: str | None) -> tuple[str, tuple[GpuSlot, ...]]:
    """``--device``, ``--gpu`` and ``--gpus`` → the device of the request and the GPU workers.

    Without ``--gpus`` (or with one GPU in it): :func:`resolve_device` and no slots, as always.
    With several: one slot per entry; an index that does not exist, GPUs of different models,
    ``--device cpu`` or ``--gpu`` beside it are refused before anything runs. An index named
    twice is allowed (two workers on one GPU, to test the distribution) with a warning.
    """
    if gpus is None:
        return resolve_device(device, gpu), ()
    if gpu is not None:
        raise UsageError(
            "--gpu and --gpus cannot be given together", hint="--gpus 0,1 names every GPU to use; --gpu N picks one"
        )
    choice = device.strip().lower()
    if choice not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown --device '{device}'", hint="use auto, cuda or cpu")
    indices = parse_gpus(gpus)
    if choice == "cpu":
        raise UsageError(
            "--gpus spreads cases over CUDA GPUs, and --device cpu runs on the CPU", hint="drop --gpus, or --device cpu"
        )
    if indices is not None and len(indices) == 1:
        return resolve_device("cuda", indices[0]), ()
    names = cuda_device_names()
    if not names:
        raise EnvironmentProblem(f"--gpus {gpus} was asked for but no CUDA device is available", hint="drop --gpus")
    chosen = tuple(range(len(names))) if indices is None else indices
    missing = sorted({index for index in chosen if index >= len(names)})
    if missing:
        raise UsageError(
            f"--gpus {gpus}: GPU {', '.join(map(str, missing))} does not exist; this machine has "
            f"{len(names)} CUDA device(s)",
            hint=f"use indices 0..{len(names) - 1}, or --gpus all",
        )
    models = sorted({names[index] for index in chosen})
    if len(models) > 1:
        first = names[chosen[0]]
        same = ",".join(str(index) for index in dict.fromkeys(chosen) if names[index] == first)
        raise UsageError(
            f"--gpus {gpus} mixes GPU models ("
            + ", ".join(f"{index}: {names[index]}" for index in dict.fromkeys(chosen))
            + "), and timings of one suite must come from one model",
            hint=f"name GPUs of one model, e.g. --gpus {same}, or one job per model with --shard",
        )
    if len(chosen) == 1:
        return f"cuda:{chosen[0]}", ()
    if len(set(chosen)) < len(chosen):
        err(
            f"kbench-ci: warning: --gpus {gpus} puts two workers on one GPU: for testing the distribution "
            "only; timings taken while two workers share a GPU are not valid (the report says so)"
        )
    slots = tuple(GpuSlot(index, names[index], position) for position, index in enumerate(chosen))
    return f"cuda:{chosen[0]}", slots
