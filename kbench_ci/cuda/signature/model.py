"""The value objects a parsed ``solve`` signature is made of: pointer and scalar parameters."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Param", "PointerParam", "ScalarParam", "SolveSignature"]


@dataclass(frozen=True, slots=True)
class PointerParam:
    """A ``T*`` parameter: one device buffer of ``torch_dtype`` elements."""

    name: str
    #: the element type, normalised: qualifiers and ``std::`` dropped, builtin integer spellings
    #: put in one order ("unsigned long long"), typedef names as written ("half", "__half")
    c_type: str
    torch_dtype: torch.dtype
    #: ``const T*`` / ``T const*``: the kernel promises not to write it, so it is an input
    is_const: bool

    @property
    def is_output(self) -> bool:
        return not self.is_const


@dataclass(frozen=True, slots=True)
class ScalarParam:
    """A by-value parameter (``int N``, ``float eps``)."""

    name: str
    c_type: str
    #: the ctypes type to pass the value as (``ctypes.c_int``, ``ctypes.c_float``, ...)
    ctype: type
    #: an integer type, so it can carry a dimension; ``bool`` and floating types are not
    is_integer: bool


Param = PointerParam | ScalarParam


@dataclass(frozen=True, slots=True)
class SolveSignature:
    """The parameters of ``solve`` in declaration order (the order ctypes must pass them in)."""

    params: tuple[Param, ...]

    @property
    def pointers(self) -> tuple[PointerParam, ...]:
        return tuple(p for p in self.params if isinstance(p, PointerParam))

    @property
    def scalars(self) -> tuple[ScalarParam, ...]:
        return tuple(p for p in self.params if isinstance(p, ScalarParam))

    @property
    def outputs(self) -> tuple[PointerParam, ...]:
        return tuple(p for p in self.pointers if p.is_output)
