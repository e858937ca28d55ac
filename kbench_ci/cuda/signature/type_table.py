"""The C type names a ``solve`` parameter may use, and what each binds to (torch dtype, ctypes).

Besides the table itself this module knows how type words are spelled: builtin integer types
in any word order (``long unsigned int``), namespace-qualified typedefs (``std::int64_t``), and
how to write a word list back as C (:func:`render`).
"""

from __future__ import annotations

import ctypes
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "QUALIFIERS",
    "TYPES",
    "TYPE_WORDS",
    "TypeInfo",
    "render",
    "resolve_type",
    "supported_types",
]


@dataclass(frozen=True, slots=True)
class TypeInfo:
    c_type: str
    #: None: cannot be a buffer element here
    torch_dtype: torch.dtype | None
    #: None: cannot be passed by value through ctypes (fp16/bf16/fp8 are structs in CUDA)
    ctype: type | None
    is_integer: bool


_SIGNED_DTYPES = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_UNSIGNED_DTYPES = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}


def _integer(c_type: str, ctype: type, *, signed: bool) -> TypeInfo:
    # The dtype follows the ctypes size, so `long` is int64 on Linux (LP64) and int32 on Windows
    # (LLP64), exactly as the compiler that built the .so saw it.
    table = _SIGNED_DTYPES if signed else _UNSIGNED_DTYPES
    return TypeInfo(c_type, table[ctypes.sizeof(ctype)], ctype, True)


def _build_type_table() -> dict[str, TypeInfo]:
    table: dict[str, TypeInfo] = {
        "float": TypeInfo("float", torch.float32, ctypes.c_float, False),
        "double": TypeInfo("double", torch.float64, ctypes.c_double, False),
        "bool": TypeInfo("bool", torch.bool, ctypes.c_bool, False),
    }
    # `char` is signed on x86-64 and unsigned on aarch64 (Grace); as a buffer element it is a
    # byte either way, and int8 is what the common x86 CI runner sees.
    signed = {
        "char": ctypes.c_byte, "signed char": ctypes.c_byte, "short": ctypes.c_short,
        "int": ctypes.c_int, "long": ctypes.c_long, "long long": ctypes.c_longlong,
        "int8_t": ctypes.c_int8, "int16_t": ctypes.c_int16, "int32_t": ctypes.c_int32,
        "int64_t": ctypes.c_int64, "ptrdiff_t": ctypes.c_ssize_t, "ssize_t": ctypes.c_ssize_t,
        "intptr_t": ctypes.c_ssize_t,
    }  # fmt: skip
    unsigned = {
        "unsigned char": ctypes.c_ubyte, "unsigned short": ctypes.c_ushort,
        "unsigned int": ctypes.c_uint, "unsigned long": ctypes.c_ulong,
        "unsigned long long": ctypes.c_ulonglong, "uint8_t": ctypes.c_uint8,
        "uint16_t": ctypes.c_uint16, "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
        "size_t": ctypes.c_size_t, "uintptr_t": ctypes.c_size_t,
        # cuda_fp8.h: `typedef unsigned char __nv_fp8_storage_t` (raw bits, format unknown here)
        "__nv_fp8_storage_t": ctypes.c_ubyte,
    }  # fmt: skip
    for name, ctype in signed.items():
        table[name] = _integer(name, ctype, signed=True)
    for name, ctype in unsigned.items():
        table[name] = _integer(name, ctype, signed=False)
    # CUDA's 16- and 8-bit float types: buffers only. By value they are structs, which ctypes
    # would pass by a different ABI rule than the compiler expects.
    reduced = {
        "half": torch.float16, "__half": torch.float16, "__nv_half": torch.float16,
        "__nv_bfloat16": torch.bfloat16, "nv_bfloat16": torch.bfloat16,
        # CUDA's e4m3 has no infinities (all-ones mantissa is NaN): torch's "fn" variant
        "__nv_fp8_e4m3": torch.float8_e4m3fn, "__nv_fp8_e5m2": torch.float8_e5m2,
    }  # fmt: skip
    e8m0 = getattr(torch, "float8_e8m0fnu", None)  # torch >= 2.7; CUDA >= 12.8
    if e8m0 is not None:
        reduced["__nv_fp8_e8m0"] = e8m0
    for name, dtype in reduced.items():
        table[name] = TypeInfo(name, dtype, None, False)
    return table


TYPES = _build_type_table()


def supported_types() -> dict[str, tuple[torch.dtype | None, type | None]]:
    """Each type name this module binds: (dtype as a pointer element, ctypes type by value)."""
    return {name: (info.torch_dtype, info.ctype) for name, info in TYPES.items()}


_INTEGER_WORDS = frozenset({"signed", "unsigned", "short", "long", "int", "char"})
QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict"})
TYPE_WORDS = _INTEGER_WORDS | {"float", "double", "bool", "void"} | set(TYPES)


def _builtin_integer(words: Sequence[str]) -> str | None:
    """Canonical spelling of a builtin integer type (``long unsigned int`` → "unsigned long")."""
    if not words or any(w not in _INTEGER_WORDS for w in words):
        return None
    n = Counter(words)
    if n["signed"] + n["unsigned"] > 1 or n["int"] > 1 or n["char"] > 1 or n["short"] > 1:
        return None
    if n["long"] > 2 or (n["short"] and n["long"]):
        return None
    if n["char"] and (n["int"] or n["short"] or n["long"]):
        return None
    prefix = "unsigned " if n["unsigned"] else ""
    if n["char"]:
        return "signed char" if n["signed"] else prefix + "char"
    if n["short"]:
        return prefix + "short"
    return prefix + {0: "int", 1: "long", 2: "long long"}[n["long"]]


def render(words: Sequence[str]) -> str:
    """Tokens back to C spelling: ``const float * *`` → "const float**"."""
    out = ""
    for w in words:
        if w in ("*", "&", "&&", "::") or out.endswith("::") or not out:
            out += w
        else:
            out += " " + w
    return out.replace(" *", "*").replace(" &", "&")


def resolve_type(words: Sequence[str]) -> TypeInfo | None:
    """The table entry for a base type's words (qualifiers already dropped), or None."""
    joined = render(words)
    # `std::int64_t`, `::size_t`: the same types under their namespace-qualified spelling
    for prefix in ("::", "std::", "cuda::std::"):
        if joined.startswith(prefix) and joined.count("::") == prefix.count("::"):
            joined = joined.removeprefix(prefix)
    if joined in TYPES:
        return TYPES[joined]
    canonical = _builtin_integer(words)
    return TYPES.get(canonical) if canonical else None
