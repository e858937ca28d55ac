"""How a lent buffer's views are laid out on its arena: one rule for the judge that lends it and
the side's worker that maps it (:mod:`kbench_ci.judge.arena`, :mod:`kbench_ci.side.serve`)."""

from __future__ import annotations

import mmap

import torch

from kbench_ci.wire.sideproto import LentTensor

#: every view starts on this byte boundary (vector loads, and TMA wants 16 bytes)
ALIGN = 256


def map_shared(fd: int, nbytes: int) -> torch.Tensor:
    """The ``nbytes`` bytes of the shared memory behind descriptor ``fd`` (a CPU arena: a memfd
    the judge made and handed to one side over its socket), mapped for reading and writing, as
    one uint8 tensor that keeps the mapping alive. The descriptor may be closed afterwards."""
    mapping = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return torch.frombuffer(mapping, dtype=torch.uint8)


def lent_view(arena: torch.Tensor, lent: LentTensor) -> torch.Tensor:
    """The view ``lent`` describes, on the arena's bytes (the judge's mapping or a side's).

    ``as_strided`` counts its offset from the start of the storage, in elements of the view's
    dtype: every view starts on :data:`ALIGN` bytes, a multiple of any element size, and the
    arena's length is a multiple of it too, so the arena reads whole elements of any dtype."""
    dtype = getattr(torch, lent.dtype)
    typed = arena.view(dtype)
    return typed.as_strided(lent.size, lent.stride, lent.byte_offset // typed.element_size() + lent.storage_offset)
