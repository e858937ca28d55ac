"""What the compiler made of a solution's kernels, read after its calls (so everything it
compiles lazily is compiled): ptxas's resource usage beside a ``.cu``'s library, or, for a
Python solution, the Triton kernels its module holds — registers, spills, shared memory, warps,
stages, and the autotuner's pick.

Triton's objects are read by duck typing (no import of triton here): an autotuner has
``best_config`` and ``fn``; a heuristics wrapper has ``fn``; a JIT function keeps its compiled
kernels in ``device_caches`` (Triton 3: device → (kernel cache, ...)) or ``cache`` (Triton 2:
device → kernel cache); a compiled kernel has ``n_regs``, ``n_spills`` and ``metadata``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kbench_ci.cuda import ptxas
from kbench_ci.cuda.build import shared_library_path
from kbench_ci.results.model import CompiledKernel

#: objects a module may hold that lead to a kernel (wrappers nest: autotune(heuristics(jit)))
_MAX_WRAPPING = 4


def cuda_kernels(source: Path) -> tuple[CompiledKernel, ...]:
    """ptxas's figures for the library built from ``source`` (none when it was built without them)."""
    return tuple(
        CompiledKernel(
            name=kernel.name, source="ptxas", registers=kernel.registers, spill_stores=kernel.spill_stores,
            spill_loads=kernel.spill_loads, stack_bytes=kernel.stack_bytes, shared_bytes=kernel.shared_bytes,
            symbol=kernel.symbol,
        )
        for kernel in ptxas.read_resources(shared_library_path(source))
    )


def triton_kernels(namespace: Mapping[str, Any]) -> tuple[CompiledKernel, ...]:
    """The Triton kernels of a module's namespace that have been compiled, with their autotune picks."""
    found: list[CompiledKernel] = []
    seen: set[int] = set()
    for value in namespace.values():
        pick, jit = _unwrap(value)
        if jit is None or id(jit) in seen:
            continue
        seen.add(id(jit))
        compiled = list(_compiled_of(jit))
        if not compiled:
            continue
        chosen = _matching(compiled, pick)
        metadata = getattr(chosen, "metadata", None)
        found.append(CompiledKernel(
            name=str(getattr(chosen if chosen is not None else compiled[-1], "name", None)
                     or getattr(jit, "__name__", "kernel")),
            source="triton",
            registers=_int(getattr(chosen, "n_regs", None)),
            spill_stores=_int(getattr(chosen, "n_spills", None)),
            shared_bytes=_int(_field(metadata, "shared")),
            num_warps=_int(_field(metadata, "num_warps") if chosen is not None else getattr(pick, "num_warps", None)),
            num_stages=_int(_field(metadata, "num_stages") if chosen is not None else getattr(pick, "num_stages", None)),
            autotune_pick=str(pick) if pick is not None else None,
            versions=len(compiled),
        ))
    return tuple(found)


def _unwrap(value: Any) -> tuple[Any, Any]:
    """(the autotuner's pick or None, the JIT function) behind ``value``, or (None, None)."""
    pick = None
    for _ in range(_MAX_WRAPPING):
        if value is None or isinstance(value, (type, int, float, str, bytes)):
            return None, None
        if hasattr(value, "device_caches") or (hasattr(value, "cache") and hasattr(value, "run") and hasattr(value, "src")):
            return pick, value
        if hasattr(value, "best_config") and hasattr(value, "fn"):
            pick = pick if pick is not None else getattr(value, "best_config", None)
            value = value.fn
        elif hasattr(value, "fn") and hasattr(value, "run"):
            value = value.fn
        else:
            return None, None
    return None, None


def _compiled_of(jit: Any) -> Iterator[Any]:
    caches = getattr(jit, "device_caches", None)
    if isinstance(caches, Mapping):
        for entry in caches.values():
            kernels = entry[0] if isinstance(entry, tuple) and entry else entry
            yield from _kernels_in(kernels)
        return
    cache = getattr(jit, "cache", None)
    if isinstance(cache, Mapping):
        for kernels in cache.values():
            yield from _kernels_in(kernels)


def _kernels_in(kernels: Any) -> Iterable[Any]:
    if isinstance(kernels, Mapping):
        return [kernel for kernel in kernels.values() if hasattr(kernel, "metadata")]
    return []


def _matching(compiled: list[Any], pick: Any) -> Any:
    """The compiled kernel of the autotuner's pick: the one of its warps and stages when there
    is exactly one (configs that differ only in block sizes cannot be told apart from here: then
    None, and no figure is reported rather than another config's); the last compiled (the one
    the calls used) when nothing was autotuned."""
    if pick is None:
        return compiled[-1]
    wanted = (getattr(pick, "num_warps", None), getattr(pick, "num_stages", None))
    matches = [kernel for kernel in compiled if _warps_and_stages(kernel) == wanted]
    return matches[0] if len(matches) == 1 else None


def _warps_and_stages(kernel: Any) -> tuple[Any, Any]:
    metadata = getattr(kernel, "metadata", None)
    return _field(metadata, "num_warps"), _field(metadata, "num_stages")


def _field(metadata: Any, name: str) -> Any:
    if isinstance(metadata, Mapping):
        return metadata.get(name)
    return getattr(metadata, name, None)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
