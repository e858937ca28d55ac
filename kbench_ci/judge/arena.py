"""Buffers the judge lends a side: one arena per side and placement, views into it by argument.

An arena is memory of its own, shared with exactly one side's worker and holding nothing else
of the judge's: on the CPU a file in shared memory that both map; on a GPU an allocation from a
memory pool of its own, lent through CUDA IPC. torch's IPC maps the whole allocator segment a
tensor lies in, so an arena from the judge's ordinary allocator could let a side read the
expected outputs beside it; a private pool per arena gives each a segment of its own. No arena
is ever lent to two sides (an IPC mapping cannot be taken back).

The views keep the sizes, strides and storage offset of the trusted setup()'s tensors: a kernel
given a strided output must write through those strides, where the judge reads.
"""

from __future__ import annotations

import base64
import io
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401  (registers torch's IPC reductions with ForkingPickler)

from kbench_ci.measure.lending import ALIGN, lent_view
from kbench_ci.measure.sideproto import DONE_OFFSET, LendRequest, LentTensor
from kbench_ci.scratch import create_new


def extent(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements from a view's first element to one past its last."""
    if any(n == 0 for n in size):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True))


@dataclass(slots=True)
class Arena:
    slot: int
    storage: torch.Tensor
    views: dict[str, torch.Tensor]
    request: LendRequest
    #: the CUDA memory pool the storage came from (kept alive with it)
    pool: Any = None
    path: Path | None = None
    extra: list[Any] = field(default_factory=list)

    @property
    def go_address(self) -> int:
        """The device address of the judge's "go" word (GPU arenas only)."""
        assert self.request.mailbox_byte_offset >= 0
        return int(self.storage.data_ptr()) + self.request.mailbox_byte_offset

    @property
    def done_address(self) -> int:
        return self.go_address + DONE_OFFSET

    def release(self) -> None:
        self.views.clear()
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def make_arena(
    template: Mapping[str, Any], output_names: tuple[str, ...], device: torch.device, *, slot: int, folder: Path
) -> Arena:
    """An arena holding a view for every tensor of ``template`` (same dtype, sizes, strides,
    storage offset); the other arguments travel as scalars."""
    layout: list[LentTensor] = []
    scalars: dict[str, Any] = {}
    offset = 0
    for name, value in template.items():
        if not isinstance(value, torch.Tensor):
            scalars[name] = value
            continue
        count = value.storage_offset() + extent(tuple(value.shape), tuple(value.stride()))
        layout.append(LentTensor(
            name=name, dtype=str(value.dtype).removeprefix("torch."), size=tuple(value.shape), stride=tuple(value.stride()),
            byte_offset=offset, storage_offset=int(value.storage_offset()),
        ))
        offset += -(-max(count, 1) * value.element_size() // ALIGN) * ALIGN
    # On a GPU the arena ends in a mailbox: the judge's "go" word and the side's "done" word
    # (kbench_ci.judge.clock), in memory the side maps anyway and no other side does.
    mailbox = offset if device.type == "cuda" else -1
    if mailbox >= 0:
        offset += ALIGN
    nbytes = max(offset, ALIGN)
    pool = None
    path = None
    if device.type == "cuda":
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            storage = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        buffer = io.BytesIO()
        ForkingPickler(buffer).dump(storage)
        handle, kind = base64.b64encode(buffer.getvalue()).decode("ascii"), "cuda"
    else:
        # In the side's own folder (it maps the file for writing, which its sandbox allows only
        # there), so never through a link it made (scratch.create_new), under a name nobody
        # can guess.
        folder.mkdir(parents=True, exist_ok=True)
        name = f"arena-{slot}-{secrets.token_hex(8)}"
        path = folder / name
        with open(create_new(folder, name, flags=os.O_RDWR), "wb") as file:
            # Its blocks taken now, not at the first write: a sparse file on a disk a side can
            # fill (its own folder is on it) made the judge's first staging into the base's
            # arena a SIGBUS, in the base's turn (red team, 2026-12-05). A full disk fails here,
            # in the judge, where no side is blamed for it.
            os.posix_fallocate(file.fileno(), 0, nbytes)
        storage = torch.from_file(str(path), shared=True, size=nbytes, dtype=torch.uint8)
        handle, kind = str(path), "file"
    views = {lent.name: lent_view(storage, lent) for lent in layout}
    request = LendRequest(
        slot=slot, arena_kind=kind, arena=handle, arena_bytes=nbytes, tensors=tuple(layout), scalars=scalars,
        output_names=output_names, mailbox_byte_offset=mailbox,
    )
    return Arena(slot=slot, storage=storage, views=views, request=request, pool=pool, path=path)
