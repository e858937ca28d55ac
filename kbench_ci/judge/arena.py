"""Buffers the judge lends a side: one arena per side and placement, views into it by argument.

An arena is memory of its own, shared with exactly one side's worker and holding nothing else
of the judge's: on the CPU a memfd that both map, which has no name in any folder and whose
descriptor the judge hands to that side alone, over its socket (as a file in the side's folder,
the other side, the same user, could open it and copy the base's answers); on a GPU an allocation from a
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401  (registers torch's IPC reductions with ForkingPickler)

from kbench_ci.wire.lending import ALIGN, lent_view, map_shared
from kbench_ci.wire.sideproto import ARENA_FD, DONE_OFFSET, LendRequest, LentTensor


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
    #: a CPU arena's memfd, handed to its side with :attr:`request` (-1: none, or closed)
    fd: int = -1
    extra: list[Any] = field(default_factory=list)

    @property
    def go_address(self) -> int:
        """The device address of the judge's "go" word (GPU arenas only)."""
        assert self.request.mailbox_byte_offset >= 0
        return int(self.storage.data_ptr()) + self.request.mailbox_byte_offset

    @property
    def done_address(self) -> int:
        return self.go_address + DONE_OFFSET

    @property
    def fds(self) -> tuple[int, ...]:
        """The descriptors that travel with :attr:`request` (a CPU arena's memfd)."""
        return (self.fd,) if self.fd >= 0 else ()

    def release(self) -> None:
        self.views.clear()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def make_arena(template: Mapping[str, Any], output_names: tuple[str, ...], device: torch.device, *, slot: int) -> Arena:
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
    fd = -1
    if device.type == "cuda":
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            storage = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        buffer = io.BytesIO()
        ForkingPickler(buffer).dump(storage)
        handle, kind = base64.b64encode(buffer.getvalue()).decode("ascii"), "cuda"
    else:
        # Close-on-exec: no worker the judge starts inherits it; each side gets its own over its
        # socket (sides.SideWorker.send). Its pages taken now, not at the first write: a sparse
        # arena raised SIGBUS in the judge's first staging into the base's once a side had
        # filled the memory behind it, in the base's turn. Short of
        # memory, it fails here, where no side is blamed for it.
        fd = os.memfd_create(f"kbench-arena-{slot}", os.MFD_CLOEXEC)
        try:
            os.posix_fallocate(fd, 0, nbytes)
            storage = map_shared(fd, nbytes)
        except BaseException:
            os.close(fd)
            raise
        handle, kind = "", ARENA_FD
    views = {lent.name: lent_view(storage, lent) for lent in layout}
    request = LendRequest(
        slot=slot, arena_kind=kind, arena=handle, arena_bytes=nbytes, tensors=tuple(layout), scalars=scalars,
        output_names=output_names, mailbox_byte_offset=mailbox,
    )
    return Arena(slot=slot, storage=storage, views=views, request=request, pool=pool, fd=fd)
