"""Speed of light: a solution's achieved bandwidth and FLOP/s against this GPU's ceilings, and
the physical floor no honest call can beat.

The ceilings are measured once per GPU model (and driver/torch pair) and cached as JSON in the
cache folder's ``ceilings/``: the copy bandwidth (``dst.copy_(src)`` of 512 MiB, reads plus
writes, best of several) and the dense matmul rate per dtype (``torch.mm`` at 8192³; float32 as
TF32, the fastest the tensor cores do with float32 inputs, so no honest float32 kernel is above
it). The work per call comes from the suite's ``bytes``/``flops`` expressions over the dims
(``declared``) or, without them, from every input read once and every output written once
(``inferred``, a lower bound that a gather or a masked kernel does not meet).

A median time below ``max(bytes / copy bandwidth, flops / matmul rate) / HEADROOM`` is
impossible: with declared work the variant is ``incorrect`` (it skipped work, e.g. by
remembering results); with inferred work it is a loud note, since the bound may not hold.
On the CPU nothing is measured: a ceilings file placed in the folder is used as it is (tests).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kbench_ci.errors import KbenchError, SignatureError
from kbench_ci.results.atomic import write_text_atomically
from kbench_ci.results.model import SpeedOfLight
from kbench_ci.suite.settings import default_cache_dir
from kbench_ci.suite.size_expr import evaluate_size_expression

#: how far above a measured ceiling an honest kernel may still be (a hand-tuned copy can beat
#: ``copy_``, a kernel can beat cuBLAS on one shape; a remembered result is many times faster)
HEADROOM = 1.25
#: the environment variable naming the ceilings folder (set for workers from the cache folder)
CEILINGS_DIR_ENV = "KBENCH_CI_CEILINGS_DIR"
_COPY_BYTES = 512 * 2**20
_MATMUL_SIZE = 8192
_REPEATS = 10
#: dtypes whose matmul rate is measured, and the name their ceiling is kept under
_MATMUL_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}


@dataclass(frozen=True, slots=True)
class Ceilings:
    """One GPU model's measured limits."""

    device: str
    copy_bytes_per_s: float
    #: dtype name → FLOP/s of a dense matmul
    matmul_flops_per_s: Mapping[str, float]


def ceilings_dir() -> Path:
    return Path(os.environ.get(CEILINGS_DIR_ENV) or default_cache_dir() / "ceilings")


def device_key(device: torch.device) -> str:
    """What the ceilings are kept under: the GPU model, its SM count and the torch build."""
    if device.type != "cuda":
        return f"{device.type}|torch {torch.__version__.split('+')[0]}"
    properties = torch.cuda.get_device_properties(device)
    return f"{properties.name}|{properties.multi_processor_count} SMs|torch {torch.__version__}"


def _file_for(key: str, folder: Path) -> Path:
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def load_ceilings(key: str, folder: Path) -> Ceilings | None:
    """The cached ceilings of ``key``; None when absent or unreadable (then measured again)."""
    try:
        data = json.loads(_file_for(key, folder).read_text())
        if data["device"] != key:
            return None
        return Ceilings(device=key, copy_bytes_per_s=float(data["copy_bytes_per_s"]),
                        matmul_flops_per_s={str(k): float(v) for k, v in data["matmul_flops_per_s"].items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_ceilings(ceilings: Ceilings, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomically(_file_for(ceilings.device, folder), json.dumps({
        "device": ceilings.device, "copy_bytes_per_s": ceilings.copy_bytes_per_s,
        "matmul_flops_per_s": dict(ceilings.matmul_flops_per_s),
    }, indent=1))


def _best_seconds(run: Callable[[], object], device: torch.device) -> float:
    run()
    torch.cuda.synchronize(device)
    best = float("inf")
    for _ in range(_REPEATS):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        run()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def _copy_rate(device: torch.device) -> float:
    source = torch.empty(_COPY_BYTES, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return 2 * _COPY_BYTES / _best_seconds(lambda: target.copy_(source), device)


def _matmul_rate(device: torch.device, dtype: torch.dtype) -> float:
    a = torch.randn(_MATMUL_SIZE, _MATMUL_SIZE, device=device).to(dtype)
    b = torch.randn(_MATMUL_SIZE, _MATMUL_SIZE, device=device).to(dtype)
    return 2 * _MATMUL_SIZE**3 / _best_seconds(lambda: torch.mm(a, b), device)


def measure_ceilings(device: torch.device) -> Ceilings:
    """The copy bandwidth and matmul rates of the GPU ``device`` (about a second)."""
    tf32 = torch.backends.cuda.matmul.allow_tf32
    with torch.cuda.device(device):
        copy_rate = _copy_rate(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            rates = {name: _matmul_rate(device, dtype) for dtype, name in _MATMUL_DTYPES.items()}
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.cuda.empty_cache()
    return Ceilings(device=device_key(device), copy_bytes_per_s=copy_rate, matmul_flops_per_s=rates)


def ceilings_for(device: torch.device) -> Ceilings | None:
    """This device's ceilings: cached, else measured and cached (GPU), else None (CPU, no file)."""
    key, folder = device_key(device), ceilings_dir()
    cached = load_ceilings(key, folder)
    if cached is not None or device.type != "cuda":
        return cached
    measured = measure_ceilings(device)
    keep(measured, folder)
    return measured


def keep(ceilings: Ceilings, folder: Path) -> None:
    """Cache ``ceilings``; an unwritable cache folder only costs measuring again next time."""
    try:
        save_ceilings(ceilings, folder)
    except (OSError, KbenchError):
        pass


def remeasured(device: torch.device, cached: Ceilings) -> Ceilings:
    """The ceilings measured again, each the higher of the two: a copy measured while another
    process shared the GPU reads low, and a low ceiling would make honest kernels impossible."""
    fresh = measure_ceilings(device)
    best = Ceilings(
        device=cached.device, copy_bytes_per_s=max(cached.copy_bytes_per_s, fresh.copy_bytes_per_s),
        matmul_flops_per_s={name: max(rate, cached.matmul_flops_per_s.get(name, 0.0))
                            for name, rate in fresh.matmul_flops_per_s.items()},
    )
    keep(best, ceilings_dir())
    return best


@dataclass(frozen=True, slots=True)
class Work:
    """What one call must do: bytes moved, FLOPs done, and whether the suite said so."""

    bytes: int | None
    flops: int | None
    declared: bool


def declared_work(bytes_expr: str | None, flops_expr: str | None, dims: Mapping[str, Any]) -> Work | None:
    """The work the suite's expressions give for ``dims``; None when it declares none.
    Raises SignatureError naming the expression that cannot be evaluated."""
    if bytes_expr is None and flops_expr is None:
        return None
    values: dict[str, int | None] = {}
    for name, expression in (("bytes", bytes_expr), ("flops", flops_expr)):
        if expression is None:
            values[name] = None
            continue
        try:
            values[name] = evaluate_size_expression(expression, dims)
        except SignatureError as exc:
            raise SignatureError(f'"{name} = {expression!r}": {exc}', hint=exc.hint) from None
    return Work(bytes=values["bytes"], flops=values["flops"], declared=True)


def inferred_work(inputs: Mapping[str, Any]) -> Work:
    """Every tensor input read once and every output written once (no FLOPs known): the outputs'
    buffers are among the inputs, and a buffer passed under two names is counted once."""
    seen: set[int] = set()
    total = 0
    for value in inputs.values():
        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() not in seen:
            storage = value.untyped_storage()
            seen.add(storage.data_ptr())
            # a broadcast (stride-0) view reads its storage once, not numel() times
            total += min(storage.nbytes(), value.numel() * value.element_size())
    return Work(bytes=total or None, flops=None, declared=False)


def has_eight_bit_inputs(inputs: Mapping[str, Any]) -> bool:
    """Any 8-bit tensor input (FP8, INT8, UINT8): tensor cores run those faster than any rate measured here."""
    return any(isinstance(value, torch.Tensor) and value.element_size() == 1 and value.dtype != torch.bool
               for value in inputs.values())


def main_float_dtype(inputs: Mapping[str, Any]) -> str | None:
    """The floating dtype holding the most bytes among the inputs: the matmul ceiling's dtype."""
    weight: dict[str, int] = {}
    for value in inputs.values():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            name = _MATMUL_DTYPES.get(value.dtype)
            if name is not None:
                weight[name] = weight.get(name, 0) + value.numel() * value.element_size()
    return max(weight, key=lambda name: weight[name]) if weight else None


def assess(
    work: Work, median_ms: float, ceilings: Ceilings | None, dtype: str | None, *, eight_bit: bool = False
) -> SpeedOfLight:
    """The solution's figures against the ceilings, and the floor it cannot beat. The share of
    peak is against the rate of the inputs' own dtype; the floor against the fastest rate
    measured (a float32 kernel may compute in fp16 inside), and there is no FLOP floor for a
    kernel with 8-bit inputs (FP8 and INT8 tensor cores outrun every rate measured here)."""
    copy_rate = ceilings.copy_bytes_per_s if ceilings is not None else None
    matmul_rate = ceilings.matmul_flops_per_s.get(dtype) if ceilings is not None and dtype is not None else None
    fastest = max(ceilings.matmul_flops_per_s.values(), default=None) if ceilings is not None else None
    floors = []
    if work.bytes and copy_rate:
        floors.append(work.bytes / (copy_rate * HEADROOM) * 1e3)
    if work.flops and fastest and not eight_bit:
        floors.append(work.flops / (fastest * HEADROOM) * 1e3)
    return SpeedOfLight(
        source="declared" if work.declared else "inferred", bytes=work.bytes, flops=work.flops, median_ms=median_ms,
        copy_bytes_per_s=copy_rate, matmul_flops_per_s=matmul_rate, matmul_dtype=dtype if matmul_rate else None,
        floor_ms=max(floors) if floors else None,
    )


def floor_message(figures: SpeedOfLight) -> str:
    """Why a time below the floor cannot be true, with the figures."""
    what = []
    if figures.bytes and figures.copy_bytes_per_s:
        what.append(f"{figures.bytes:,} bytes at {figures.copy_bytes_per_s / 1e12:.3g} TB/s measured copy bandwidth")
    if figures.flops and figures.matmul_flops_per_s:
        what.append(f"{figures.flops:,} FLOPs at {figures.matmul_flops_per_s / 1e12:.3g} TFLOP/s measured "
                    f"{figures.matmul_dtype} matmul rate")
    head = (f"median {figures.median_ms * 1e3:.4g} us is below the physical floor of {(figures.floor_ms or 0) * 1e3:.4g} us "
            f"({' and '.join(what)}, with {HEADROOM:g}x headroom")
    if figures.source == "declared":
        return (head + "; work declared in kbench.toml): no call can do that work so fast, so the timed calls skipped "
                "it (results remembered, or work done outside the timer)")
    return (head + "; work inferred as every input read once and every output written once): if the kernel must read "
            "all of its inputs, it skipped work; if it reads only part of them, declare `bytes = \"...\"` for it in "
            "kbench.toml")
