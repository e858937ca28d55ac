"""C = A + B on M x N tensors, written in the CuTe DSL (``nvidia-cutlass-dsl``).

kbench-ci contract for a Python solution:
  * ``setup(**dims)`` builds the inputs (tensors land on the GPU that kbench-ci picked: it sets
    torch's default device, so none is named here) and names the outputs;
  * ``compile_kernel(**inputs)`` is called once before timing, so JIT compilation is never timed;
  * ``run_kernel(**inputs)`` launches on torch's current stream and does not synchronise.

The kernel follows the CuTe pattern for memory-bound elementwise work: each CTA takes a tile of
the tensors, a thread-value layout gives every thread a row of 128-bit vectors, and a
predicate built from an identity (coordinate) tensor masks the ragged edge of the last tiles.
"""

from __future__ import annotations

from typing import Any

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute  # noqa: PLR0402 -- the spelling of the DSL's own docs
import torch
from cutlass.cute.runtime import from_dlpack

#: the alignment the compiled code may assume for every tensor (torch allocations are 256-byte
#: aligned; 16 bytes is what one 128-bit vector access needs)
_ALIGN_BYTES = 16

# One compiled function per (shape, dtype): cute.compile takes 0.3-1 s, so it happens in
# compile_kernel() and never in the timed run_kernel() calls.
_COMPILED: dict[tuple[Any, ...], Any] = {}


@cute.kernel
def _add_kernel(
    gA: cute.Tensor,
    gB: cute.Tensor,
    gC: cute.Tensor,
    cC: cute.Tensor,
    shape: cute.Shape,
    thr_layout: cute.Layout,
    val_layout: cute.Layout,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()

    # This CTA's tile of each tensor, and the logical coordinates of its elements.
    tile = ((None, None), bidx)
    blkA, blkB, blkC, blkCrd = gA[tile], gB[tile], gC[tile], cC[tile]

    load = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), gA.element_type)
    store = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), gC.element_type)
    thr_load = cute.make_tiled_copy_tv(load, thr_layout, val_layout).get_slice(tidx)
    thr_store = cute.make_tiled_copy_tv(store, thr_layout, val_layout).get_slice(tidx)

    thrA = thr_load.partition_S(blkA)
    thrB = thr_load.partition_S(blkB)
    thrC = thr_store.partition_S(blkC)
    frgA = cute.make_fragment_like(thrA)
    frgB = cute.make_fragment_like(thrB)
    frgC = cute.make_fragment_like(thrC)

    # Elements past the tensor's edge (M or N not a multiple of the tile) are neither read
    # nor written.
    thrCrd = thr_store.partition_S(blkCrd)
    pred = cute.make_rmem_tensor(thrCrd.shape, cutlass.Boolean)
    for i in range(cute.size(pred)):
        pred[i] = cute.elem_less(thrCrd[i], shape)

    cute.copy(load, thrA, frgA, pred=pred)
    cute.copy(load, thrB, frgB, pred=pred)
    frgC.store(frgA.load() + frgB.load())
    cute.copy(store, frgC, thrC, pred=pred)


@cute.jit
def _add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, stream: cuda.CUstream):
    # 128 threads as 4 rows x 32, each moving a 4 x (one 128-bit vector) block of values.
    vector = 128 // mA.element_type.width
    thr_layout = cute.make_ordered_layout((4, 32), order=(1, 0))
    val_layout = cute.make_ordered_layout((4, vector), order=(1, 0))
    tiler_mn, tv_layout = cute.make_layout_tv(thr_layout, val_layout)

    gA = cute.zipped_divide(mA, tiler_mn)  # ((TileM, TileN), (RestM, RestN))
    gB = cute.zipped_divide(mB, tiler_mn)
    gC = cute.zipped_divide(mC, tiler_mn)
    cC = cute.zipped_divide(cute.make_identity_tensor(mC.shape), tiler=tiler_mn)

    _add_kernel(gA, gB, gC, cC, mC.shape, thr_layout, val_layout).launch(
        grid=[cute.size(gC, mode=[1]), 1, 1],
        block=[cute.size(tv_layout, mode=[0]), 1, 1],
        stream=stream,
    )


def setup(M: int, N: int) -> dict[str, Any]:
    a = torch.randn(M, N, dtype=torch.float16)
    b = torch.randn(M, N, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16)
    return {"inputs": {"a": a, "b": b, "c": c}, "outputs": ["c"]}


def _key(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> tuple[Any, ...]:
    return tuple((tuple(t.shape), tuple(t.stride()), t.dtype) for t in (a, b, c))


def _cute_tensors(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor
) -> tuple[cute.Tensor, cute.Tensor, cute.Tensor]:
    for name, t in (("a", a), ("b", b), ("c", c)):
        if t.data_ptr() % _ALIGN_BYTES:
            raise ValueError(f"{name} is not {_ALIGN_BYTES}-byte aligned")
    # Static layouts (no mark_layout_dynamic): the shape is compiled in, hence one compile
    # per shape, and the tile loop bounds are constants.
    a_, b_, c_ = (from_dlpack(t, assumed_align=_ALIGN_BYTES) for t in (a, b, c))
    return a_, b_, c_


# Host cost per call matters: a timed loop calls run_kernel back to back, and if the host
# takes longer than the kernel the GPU idles between launches and the timing measures
# Python. Measured on an H200 with DSL 4.3.5: from_dlpack ~11 us per tensor, wrapping the
# stream ~10 us, the compiled call itself ~30 us. So the last call's converted tensors are
# reused when the same tensors come back (the timing loop), and stream wrappers are kept:
# ~30 us per call instead of ~120 us, under the ~56 us the kernel takes at 4096 x 4096.
_LastCall = tuple[tuple[torch.Tensor, ...], tuple[int, ...], Any, tuple[cute.Tensor, ...]]
_last_call: _LastCall | None = None
_STREAMS: dict[int, cuda.CUstream] = {}


def _torch_stream() -> cuda.CUstream:
    """torch's current stream as the driver handle the DSL launches on (0 without a GPU)."""
    handle = torch.cuda.current_stream().cuda_stream if torch.cuda.is_available() else 0
    stream = _STREAMS.get(handle)
    if stream is None:
        stream = _STREAMS[handle] = cuda.CUstream(handle)
    return stream


def compile_kernel(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **_dims: Any
) -> None:
    key = _key(a, b, c)
    if key not in _COMPILED:
        _COMPILED[key] = cute.compile(_add, *_cute_tensors(a, b, c), _torch_stream())


def run_kernel(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **_dims: Any) -> None:
    global _last_call
    tensors = (a, b, c)
    pointers = (a.data_ptr(), b.data_ptr(), c.data_ptr())
    last = _last_call
    # The same tensor objects at the same addresses: shape, strides and dtype are unchanged
    # too, so the compiled function and the converted tensors still fit.
    if last is not None and all(x is y for x, y in zip(last[0], tensors)) and last[1] == pointers:
        _, _, compiled, converted = last
    else:
        key = _key(a, b, c)
        if key not in _COMPILED:
            compile_kernel(a, b, c)  # called directly, not through the harness: compile once
        compiled = _COMPILED[key]
        converted = _cute_tensors(a, b, c)
        # Holds one set of tensors alive at most, so their addresses cannot be reused.
        _last_call = (tensors, pointers, compiled, converted)
    compiled(*converted, _torch_stream())
