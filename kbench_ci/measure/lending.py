"""How a lent buffer's views are laid out on its arena: one rule for the judge that lends it and
the side's worker that maps it (:mod:`kbench_ci.judge.arena`, :mod:`kbench_ci.side.serve`)."""

from __future__ import annotations

import torch

from kbench_ci.measure.sideproto import LentTensor

#: every view starts on this byte boundary (vector loads, and TMA wants 16 bytes)
ALIGN = 256


def lent_view(arena: torch.Tensor, lent: LentTensor) -> torch.Tensor:
    """The view ``lent`` describes, on the arena's bytes (the judge's mapping or a side's).

    ``as_strided`` counts its offset from the start of the storage, in elements of the view's
    dtype: every view starts on :data:`ALIGN` bytes, a multiple of any element size, and the
    arena's length is a multiple of it too, so the arena reads whole elements of any dtype."""
    dtype = getattr(torch, lent.dtype)
    typed = arena.view(dtype)
    return typed.as_strided(lent.size, lent.stride, lent.byte_offset // typed.element_size() + lent.storage_offset)
