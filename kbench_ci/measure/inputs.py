"""Seeded inputs, output poisoning and input snapshots.

Outputs are poisoned (NaN for floating point, a sentinel bit pattern for integers) before every
correctness call, so an element the kernel never writes can not pass by luck; an output the
kernel also reads (``inplace`` in setup()) keeps its contents instead. Inputs are snapshot
before the call, so a kernel that scribbles over its inputs is caught. Every copy keeps the
layout setup() gave (sizes, strides, storage offset): a kernel that ignores strides must meet
them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy
import torch

# 0xA5 repeated: unlikely to be a kernel's true result, and obviously wrong in a hex dump.
_INTEGER_SENTINEL_BYTE = 0xA5
# 0x7F is NaN in both float8 formats (e4m3fn: S.1111.111, e5m2: S.11111.11).
_FLOAT8_NAN_BYTE = 0x7F
_FLOAT8_DTYPES = tuple(
    getattr(torch, name)
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)
)


@dataclass(frozen=True, slots=True)
class InputSet:
    """Everything passed to a kernel and its reference, by name, and which of it is output."""

    kwargs: Mapping[str, Any]
    output_names: tuple[str, ...]
    seed: int
    #: outputs the kernel also reads (updated in place): staged like inputs, never poisoned
    inplace_names: tuple[str, ...] = ()

    @property
    def poisoned_names(self) -> tuple[str, ...]:
        """The outputs poisoned before a call: those the kernel only writes."""
        return tuple(name for name in self.output_names if name not in self.inplace_names)

    def fresh_copy(self) -> dict[str, Any]:
        """A deep copy of the kwargs: every tensor copied with its layout, scalars as they are."""
        return {k: (same_layout_copy(v) if isinstance(v, torch.Tensor) else v) for k, v in self.kwargs.items()}


def same_layout_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of ``tensor`` in storage of its own, with its sizes, strides and storage offset.

    ``clone()`` makes a strided view (stride (2,), an offset into a larger buffer) contiguous, so
    a kernel that ignores strides and writes a contiguous block would pass on the copy and fail on
    the user's real tensors. The bytes of the storage up to the view's last element are copied,
    gaps included, and the copy is viewed as setup() laid the original out.
    """
    if (tensor.layout != torch.strided or tensor.is_quantized or tensor.is_nested or tensor.is_conj()
            or tensor.is_neg() or type(tensor) is not torch.Tensor):
        # Layouts whose bytes are not the values alone: their own clone() is the copy.
        return tensor.clone()
    extent = tensor.storage_offset() + _span(tensor)
    source = torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(
        tensor.untyped_storage(), 0, (extent * tensor.element_size(),), (1,)
    )
    copy = torch.empty(0, dtype=tensor.dtype, device=tensor.device).set_(
        source.clone().untyped_storage(), tensor.storage_offset(), tensor.shape, tensor.stride()
    )
    return copy.requires_grad_() if tensor.requires_grad else copy


def _span(tensor: torch.Tensor) -> int:
    """Elements of storage from the view's first element to one past its last."""
    if tensor.numel() == 0:
        return 0
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(tensor.shape, tensor.stride(), strict=True))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
    numpy.random.seed(seed % (2**32))


def same_inputs(first: InputSet, second: InputSet) -> bool:
    """Do two input sets hold the same names, outputs, dtypes, shapes and values?

    Then both sides of a comparison can be timed on the very same tensors: whatever the memory
    placement of a buffer does to a kernel's speed, it does to both sides alike.
    """
    if (first.output_names, first.inplace_names) != (second.output_names, second.inplace_names) or list(
        first.kwargs
    ) != list(second.kwargs):
        return False
    for name, value in first.kwargs.items():
        other = second.kwargs[name]
        if isinstance(value, torch.Tensor) or isinstance(other, torch.Tensor):
            if not (isinstance(value, torch.Tensor) and isinstance(other, torch.Tensor)):
                return False
            layout = (value.dtype, value.shape, value.device, value.stride(), value.storage_offset())
            if layout != (other.dtype, other.shape, other.device, other.stride(), other.storage_offset()):
                return False
            if name in first.poisoned_names:
                continue  # every call overwrites it: its contents do not matter
            if not torch.equal(value, other):
                return False
        elif type(value) is not type(other) or value != other:
            return False
    return True


def poison_(tensor: torch.Tensor) -> torch.Tensor:
    """Fill ``tensor`` in place with a value no correct kernel leaves there."""
    if tensor.dtype in _FLOAT8_DTYPES:
        _element_bytes(tensor).fill_(_FLOAT8_NAN_BYTE)
    elif tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))
    else:
        # Integers get the byte 0xA5 everywhere; bool has no spare bit pattern, and 0xA5 is a
        # byte no kernel writes as a bool.
        _element_bytes(tensor).fill_(_INTEGER_SENTINEL_BYTE)
    return tensor


def still_poisoned(tensor: torch.Tensor) -> bool:
    """Does every element of ``tensor`` still hold what :func:`poison_` wrote (nothing wrote it)?"""
    if tensor.numel() == 0:
        return False
    if tensor.dtype in _FLOAT8_DTYPES:
        return bool((_element_bytes(tensor) == _FLOAT8_NAN_BYTE).all())
    if tensor.is_floating_point() or tensor.is_complex():
        return bool(torch.isnan(tensor).all())
    return bool((_element_bytes(tensor) == _INTEGER_SENTINEL_BYTE).all())


def _element_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The bytes of ``tensor``'s elements, in its own storage, for any strides: shape
    ``(*tensor.shape, element_size)``. (``view(torch.uint8)`` needs a last stride of 1.)"""
    element = tensor.element_size()
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(
        tensor.untyped_storage(), tensor.storage_offset() * element,
        (*tensor.shape, element), (*(stride * element for stride in tensor.stride()), 1),
    )


def poison_outputs_(kwargs: Mapping[str, Any], output_names: tuple[str, ...]) -> None:
    """Poison the named outputs: pass :attr:`InputSet.poisoned_names`, never an in-place one."""
    for name in output_names:
        value = kwargs.get(name)
        if isinstance(value, torch.Tensor):
            poison_(value)


def random_tensor(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Random contents for a buffer the user described only by type and size.

    Floating point: standard normal. Integers: uniform in [0, 64) so they stay valid as small
    indices or counts. Bool: fair coin. Draws come from torch's global generator (seeded).
    """
    if dtype.is_floating_point:
        if dtype in _FLOAT8_DTYPES:
            return torch.randn(numel, device=device).to(dtype)
        return torch.randn(numel, device=device, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (numel,), device=device).bool()
    if dtype in (torch.uint16, torch.uint32, torch.uint64):
        return torch.randint(0, 64, (numel,), device=device, dtype=torch.int64).to(dtype)
    return torch.randint(0, 64, (numel,), device=device, dtype=dtype)


def changed_inputs(
    pristine: Mapping[str, Any], after: Mapping[str, Any], output_names: tuple[str, ...]
) -> tuple[str, ...]:
    """Names of input tensors (not outputs) whose bytes differ from the snapshot."""
    changed = []
    for name, before in pristine.items():
        if name in output_names or not isinstance(before, torch.Tensor):
            continue
        now = after.get(name)
        if not isinstance(now, torch.Tensor) or now.shape != before.shape:
            changed.append(name)
            continue
        # Compare bytes, not values: NaN != NaN would flag untouched inputs holding NaN.
        if not torch.equal(_as_bytes(now), _as_bytes(before)):
            changed.append(name)
    return tuple(changed)


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    flat = tensor.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8)
