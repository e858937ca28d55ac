"""What ptxas says of each kernel it compiled (``nvcc --resource-usage``): registers, spills,
stack and shared memory, kept beside the built library so the worker that loads it can report
them (results.model.CompiledKernel) whether the library was compiled now or taken from the cache.

The lines parsed (CUDA 12-13)::

    ptxas info    : Compiling entry function '_Z4vaddPKfS0_Pfi' for 'sm_90'
    ptxas info    : Function properties for _Z4vaddPKfS0_Pfi
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 12 registers, used 0 barriers, 380 bytes cmem[0]
    ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


@dataclass(frozen=True, slots=True)
class PtxasKernel:
    """ptxas's resource usage of one entry function."""

    #: the entry's symbol (mangled for C++ kernels, plain for ``extern "C"`` ones)
    symbol: str
    registers: int
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    #: static shared memory (dynamic shared memory is decided at launch)
    shared_bytes: int = 0

    @property
    def name(self) -> str:
        return readable_name(self.symbol)


def readable_name(symbol: str) -> str:
    """``_Z4vaddPKfS0_Pfi`` → ``vadd``, ``_ZN4cute6kernelE…`` → ``cute::kernel``: the name
    without demangling its types (enough to match CUPTI's names, which carry the parameters)."""
    if not symbol.startswith("_Z"):
        return symbol
    body = symbol[3:] if symbol.startswith("_ZN") else symbol[2:]
    parts: list[str] = []
    while body and body[0].isdigit():
        digits = re.match(r"\d+", body)
        if digits is None:
            break
        length = int(digits.group())
        start = len(digits.group())
        parts.append(body[start:start + length])
        body = body[start + length:]
        if not symbol.startswith("_ZN"):
            break
    return "::".join(parts) if parts else symbol


def parse_resource_usage(text: str) -> tuple[PtxasKernel, ...]:
    """Every entry function's resources in nvcc/ptxas output, in the order compiled."""
    found: dict[str, dict[str, int]] = {}
    current: str | None = None
    for line in text.splitlines():
        if match := _ENTRY.search(line):
            current = match.group(1)
            found.setdefault(current, {})
        elif match := _PROPERTIES.search(line):
            current = match.group(1)
            found.setdefault(current, {})
        elif current is not None and (match := _FRAME.search(line)):
            found[current].update(stack_bytes=int(match.group(1)), spill_stores=int(match.group(2)),
                                  spill_loads=int(match.group(3)))
        elif current is not None and (match := _USED.search(line)):
            found[current]["registers"] = int(match.group(1))
            if smem := _SMEM.search(line):
                found[current]["shared_bytes"] = int(smem.group(1))
    return tuple(PtxasKernel(symbol=symbol, **values) for symbol, values in found.items() if "registers" in values)


def resources_path(library: Path) -> Path:
    """The file beside a built library that holds its kernels' resources."""
    return library.with_name(library.name + ".ptxas.json")


def write_resources(library: Path, kernels: tuple[PtxasKernel, ...]) -> None:
    resources_path(library).write_text(json.dumps([asdict(kernel) for kernel in kernels], indent=1), encoding="utf-8")


def read_resources(library: Path) -> tuple[PtxasKernel, ...]:
    """The resources written beside ``library``; () when there are none or they cannot be read."""
    try:
        data = json.loads(resources_path(library).read_text(encoding="utf-8"))
        return tuple(PtxasKernel(**entry) for entry in data)
    except (OSError, ValueError, TypeError):
        return ()
