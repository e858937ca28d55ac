"""Read the ``extern "C" solve(...)`` signature of a CUDA C++ solution from its source text.

A pre-built ``.so`` is loaded with ctypes, and ctypes knows nothing about parameter names or
types. The source does, and users write the entry point LeetGPU style::

    extern "C" void solve(const float* input, float* output, int N) { ... }

so this module reads that one declaration and turns it into a :class:`SolveSignature`: each
pointer with its torch dtype and whether it is an input (``const T*``) or an output, each scalar
with the ctypes type to pass it as. The caller then binds arguments *by name* (``N`` from the
shape, ``output`` from the reference's outputs) instead of by position.

This is not a C++ parser. It does what the compiler's first phases do that matters here:
comments and string literals go, ``#if 0`` blocks go, object-like ``#define`` macros defined in
the file are expanded, and braces are tracked so that only namespace-scope (or
``extern "C" { }``-block) declarations count. Anything it cannot read with certainty becomes a
:class:`SignatureError` naming the text, never a guess: a wrong guess would bind a buffer to the
wrong argument and report a correct kernel as incorrect, or worse, the reverse.

It also evaluates the ``--ptr-size`` expressions (``"M*N"``, ``"B*(V+1)"``) that size each
pointer, with :mod:`ast` and a whitelist, never ``eval``.
"""

from __future__ import annotations

import ast
import ctypes
import operator
import pathlib
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import torch

from kbench_ci.errors import SignatureError, UsageError, UserFileError

__all__ = [
    "Param",
    "PointerParam",
    "ScalarParam",
    "SolveSignature",
    "evaluate_size_expression",
    "parse_ptr_size_options",
    "parse_solve_signature",
    "read_solve_signature",
    "supported_types",
]


# --------------------------------------------------------------------------------------------
# Value objects
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Type table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TypeInfo:
    c_type: str
    #: None: cannot be a buffer element here
    torch_dtype: torch.dtype | None
    #: None: cannot be passed by value through ctypes (fp16/bf16/fp8 are structs in CUDA)
    ctype: type | None
    is_integer: bool


_SIGNED_DTYPES = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_UNSIGNED_DTYPES = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}


def _integer(c_type: str, ctype: type, *, signed: bool) -> _TypeInfo:
    # The dtype follows the ctypes size, so `long` is int64 on Linux (LP64) and int32 on Windows
    # (LLP64), exactly as the compiler that built the .so saw it.
    table = _SIGNED_DTYPES if signed else _UNSIGNED_DTYPES
    return _TypeInfo(c_type, table[ctypes.sizeof(ctype)], ctype, True)


def _build_type_table() -> dict[str, _TypeInfo]:
    table: dict[str, _TypeInfo] = {
        "float": _TypeInfo("float", torch.float32, ctypes.c_float, False),
        "double": _TypeInfo("double", torch.float64, ctypes.c_double, False),
        "bool": _TypeInfo("bool", torch.bool, ctypes.c_bool, False),
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
        table[name] = _TypeInfo(name, dtype, None, False)
    return table


_TYPES = _build_type_table()


def supported_types() -> dict[str, tuple[torch.dtype | None, type | None]]:
    """Each type name this module binds: (dtype as a pointer element, ctypes type by value)."""
    return {name: (info.torch_dtype, info.ctype) for name, info in _TYPES.items()}


_INTEGER_WORDS = frozenset({"signed", "unsigned", "short", "long", "int", "char"})
_QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict"})
# Ignorable decorations of a parameter: they change nothing about what is passed.
_IGNORED_WORDS = frozenset({"__grid_constant__", "register"})
_GROUP_ATTRIBUTES = frozenset({"__attribute__", "__declspec", "alignas", "__align__"})
_TYPE_WORDS = _INTEGER_WORDS | {"float", "double", "bool", "void"} | set(_TYPES)
_VECTOR_TYPE = re.compile(
    r"(?:u?char|u?short|u?int|u?long|u?longlong|float|double|half|__half|bfloat16|"
    r"__nv_bfloat16|nv_bfloat16|__nv_fp8x?\d?_e\dm\d)[1-4]"
    r"|__nv_fp8x[24]_e\dm\d|__nv_fp4\w*"
)


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


# --------------------------------------------------------------------------------------------
# Source cleaning: comments, strings, preprocessor
# --------------------------------------------------------------------------------------------

_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_RAW_STRING_OPEN = re.compile(r'"([^()\\\s]{0,16})\(')
# Linkage names are the only string literals a signature needs; every other literal is blanked
# so that a `"//"`, `"{"` or `"solve("` inside one cannot confuse what follows.
_KEPT_STRINGS = frozenset({"C", "C++"})


def _blank(chars: list[str], start: int, end: int) -> None:
    # Same length, newlines kept: every offset still maps to the user's line numbers.
    for k in range(start, min(end, len(chars))):
        if chars[k] != "\n":
            chars[k] = " "


def _strip_comments_and_strings(source: str) -> str:
    chars = list(source)
    n = len(source)
    i = 0
    while i < n:
        c = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            end = source.find("\n", i)
            end = n if end < 0 else end
            _blank(chars, i, end)
            i = end
        elif c == "/" and nxt == "*":
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
            _blank(chars, i, end)
            i = end
        elif c == '"':
            i = _strip_string(source, chars, i)
        elif c == "'":
            i = _strip_char_literal(source, chars, i)
        else:
            i += 1
    return "".join(chars)


def _identifier_before(source: str, i: int) -> str:
    j = i
    while j > 0 and (source[j - 1] in _IDENT_CHARS or source[j - 1] == "'"):
        j -= 1
    return source[j:i]


def _strip_string(source: str, chars: list[str], i: int) -> int:
    n = len(source)
    if _identifier_before(source, i) in ("R", "LR", "uR", "UR", "u8R"):
        m = _RAW_STRING_OPEN.match(source, i)
        if m:
            close = ")" + m.group(1) + '"'
            end = source.find(close, m.end())
            end = n if end < 0 else end + len(close)
            _blank(chars, i + 1, end - 1)
            return end
    j = i + 1
    while j < n and source[j] != '"' and source[j] != "\n":
        j += 2 if source[j] == "\\" else 1
    if source[i + 1 : j] not in _KEPT_STRINGS:
        _blank(chars, i + 1, j)
    return j + 1


def _strip_char_literal(source: str, chars: list[str], i: int) -> int:
    # C++14 digit separators (1'000'000) are not character literals.
    before = _identifier_before(source, i)
    if before[:1].isdigit():
        return i + 1
    n = len(source)
    j = i + 1
    while j < n and source[j] != "'" and source[j] != "\n":
        j += 2 if source[j] == "\\" else 1
    _blank(chars, i, j + 1)
    return j + 1


@dataclass(frozen=True, slots=True)
class _MacroEvent:
    offset: int
    name: str
    #: None for #undef
    body: str | None


_DIRECTIVE = re.compile(r"\s*#\s*(\w*)(.*)", re.S)
_DEFINE = re.compile(r"\s*([A-Za-z_]\w*)(\(?)(.*)", re.S)


def _preprocess(text: str) -> tuple[str, list[_MacroEvent], frozenset[str]]:
    """Blank directives and ``#if 0`` regions; collect object-like ``#define``/``#undef``.

    Conditions other than a literal 0/1 are unknown here, so both branches stay: a solve
    inside ``#ifdef __cplusplus extern "C" { #endif`` must still be seen.
    """
    chars = list(text)
    events: list[_MacroEvent] = []
    function_macros: set[str] = set()
    # Each frame: (branch is active, condition was known, a known branch was already taken)
    frames: list[list[bool]] = []
    lines = text.splitlines(keepends=True)
    offset = 0
    k = 0
    while k < len(lines):
        start = offset
        logical = lines[k]
        offset += len(lines[k])
        k += 1
        if _DIRECTIVE.match(logical) is None:
            if not all(f[0] for f in frames):
                _blank(chars, start, offset)
            continue
        while logical.rstrip("\r\n").endswith("\\") and k < len(lines):
            logical = logical.rstrip("\r\n")[:-1] + " " + lines[k]
            offset += len(lines[k])
            k += 1
        _blank(chars, start, offset)
        directive, rest = _DIRECTIVE.match(logical).groups()  # type: ignore[union-attr]
        _track_conditional(frames, directive, rest.strip())
        if directive in ("define", "undef") and all(f[0] for f in frames):
            d = _DEFINE.match(rest)
            if d is None:
                continue
            name, paren, body = d.groups()
            if directive == "undef":
                events.append(_MacroEvent(start, name, None))
                function_macros.discard(name)
            elif paren:
                function_macros.add(name)
                events.append(_MacroEvent(start, name, None))
            else:
                events.append(_MacroEvent(start, name, body.strip()))
    return "".join(chars), events, frozenset(function_macros)


def _literal_condition(expr: str) -> bool | None:
    expr = expr.strip().strip("()").strip()
    if expr in ("0", "false"):
        return False
    if expr in ("1", "true"):
        return True
    return None


def _track_conditional(frames: list[list[bool]], directive: str, expr: str) -> None:
    if directive in ("if", "ifdef", "ifndef"):
        known = _literal_condition(expr) if directive == "if" else None
        active = known is not False
        frames.append([active, known is not None, known is True])
    elif directive in ("elif", "elifdef", "elifndef") and frames:
        frame = frames[-1]
        known = _literal_condition(expr) if directive == "elif" else None
        if frame[1] and frame[2]:
            frame[0] = False
        else:
            frame[0] = known is not False
            frame[1] = frame[1] and known is not None
            frame[2] = frame[2] or known is True
    elif directive == "else" and frames:
        frame = frames[-1]
        frame[0] = not (frame[1] and frame[2]) if frame[1] else True
    elif directive == "endif" and frames:
        frames.pop()


# --------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    #: span in the source; tokens from a macro expansion carry the span of the macro's name
    start: int
    end: int

    @property
    def is_identifier(self) -> bool:
        return self.text[0].isalpha() or self.text[0] == "_"


_TOKEN = re.compile(
    r'"[^"]*"'  # string literal (contents already blanked unless "C"/"C++")
    r"|[A-Za-z_$][\w$]*"  # identifier / keyword
    r"|\.?\d(?:[eEpP][+-]|[\w.'])*"  # number
    r"|::|->|\.\.\.|\S"  # punctuation, one char unless it matters here
)
_MAX_MACRO_DEPTH = 32


def _tokenize(text: str, events: Sequence[_MacroEvent]) -> list[_Token]:
    macros: dict[str, list[str]] = {}
    tokens: list[_Token] = []
    e = 0
    for m in _TOKEN.finditer(text):
        while e < len(events) and events[e].offset < m.start():
            event = events[e]
            if event.body is None:
                macros.pop(event.name, None)
            else:
                macros[event.name] = _TOKEN.findall(event.body)
            e += 1
        if m.group() == "\\":
            continue  # a backslash-newline splice outside a directive joins lines: whitespace
        _expand(m.group(), m.start(), m.end(), macros, frozenset(), tokens, 0)
    return tokens


def _expand(
    text: str,
    start: int,
    end: int,
    macros: Mapping[str, list[str]],
    hidden: frozenset[str],
    out: list[_Token],
    depth: int,
) -> None:
    body = macros.get(text)
    # `hidden` is the C preprocessor's rule that a macro is not re-expanded inside itself.
    if body is None or text in hidden or depth > _MAX_MACRO_DEPTH:
        out.append(_Token(text, start, end))
        return
    for piece in body:
        _expand(piece, start, end, macros, hidden | {text}, out, depth + 1)


_CLOSERS = {")": "(", "]": "[", "}": "{"}
_OPENERS = {"(": ")", "[": "]", "{": "}"}


def _match_forward(tokens: Sequence[_Token], i: int) -> int:
    """Index of the bracket closing ``tokens[i]``, or ``len(tokens)`` if it is never closed."""
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j].text
        if t in _OPENERS:
            depth += 1
        elif t in _CLOSERS:
            depth -= 1
            if depth == 0:
                return j
    return len(tokens)


def _match_backward(tokens: Sequence[_Token], i: int) -> int:
    depth = 0
    for j in range(i, -1, -1):
        t = tokens[j].text
        if t in _CLOSERS:
            depth += 1
        elif t in _OPENERS:
            depth -= 1
            if depth == 0:
                return j
    return -1


# --------------------------------------------------------------------------------------------
# Finding the declaration
# --------------------------------------------------------------------------------------------

_NAMESPACE_SCOPES = frozenset({"namespace", "extern-C", "extern-C++"})


def _classify_brace(tokens: Sequence[_Token], i: int) -> str:
    """What the ``{`` at ``tokens[i]`` opens: a linkage block, a namespace, or anything else."""
    if i >= 2 and tokens[i - 2].text == "extern" and tokens[i - 1].text in ('"C"', '"C++"'):
        return "extern-C" if tokens[i - 1].text == '"C"' else "extern-C++"
    j = i - 1
    while j >= 0 and (tokens[j].is_identifier or tokens[j].text == "::"):
        if tokens[j].text == "namespace":
            return "namespace"
        j -= 1
    return "other"


@dataclass(frozen=True, slots=True)
class _Candidate:
    name_index: int
    open_index: int
    close_index: int
    prefix: tuple[str, ...]
    #: "C" / "C++" when written on the declaration or its enclosing linkage block, else None
    linkage: str | None
    is_definition: bool
    #: why this is not a host entry point ctypes can call, or None
    problem: str | None


def _declaration_prefix(tokens: Sequence[_Token], i: int) -> tuple[str, ...] | None:
    """Tokens of the declaration before ``tokens[i]``, or None if ``i`` sits in an expression."""
    out: list[str] = []
    j = i - 1
    while j >= 0:
        t = tokens[j].text
        if t in (";", "{", "}"):
            break
        if t in (")", "]"):
            j = _match_backward(tokens, j)
            if j < 0:
                return None
            out.append("(...)")
            j -= 1
            continue
        if t in ("(", "[", "=", ",", ".", "->", "return", "?", ":"):
            # inside a call's arguments, an initializer or an expression: a use, not a declaration
            return None
        out.append(t)
        j -= 1
    out.reverse()
    if not any(_is_identifier_text(t) for t in out):
        return None  # a bare `solve(...)` at namespace scope is a call or a macro use
    return tuple(out)


def _is_identifier_text(text: str) -> bool:
    return text[0].isalpha() or text[0] == "_"


def _explicit_linkage(prefix: Sequence[str]) -> str | None:
    for a, b in zip(prefix, prefix[1:]):
        if a == "extern" and b == '"C"':
            return "C"
        if a == "extern" and b == '"C++"':
            return "C++"
    return None


def _prefix_problem(prefix: Sequence[str]) -> str | None:
    words = set(prefix)
    if "template" in words:
        return "template"
    if "__global__" in words:
        return "kernel"
    if "__device__" in words and "__host__" not in words:
        return "device"
    if "static" in words:
        return "static"
    return None


def _find_candidates(tokens: Sequence[_Token], function_name: str) -> list[_Candidate]:
    scopes: list[str] = []
    found: list[_Candidate] = []
    for i, tok in enumerate(tokens):
        if tok.text == "{":
            scopes.append(_classify_brace(tokens, i))
            continue
        if tok.text == "}":
            if scopes:
                scopes.pop()
            continue
        if tok.text != function_name or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        # Only declarations at namespace scope define the exported symbol; anything inside a
        # function body, class or lambda is a call or a member.
        if any(s not in _NAMESPACE_SCOPES for s in scopes):
            continue
        prefix = _declaration_prefix(tokens, i)
        if prefix is None:
            continue
        close = _match_forward(tokens, i + 1)
        linkage = _explicit_linkage(prefix)
        if linkage is None:
            for scope in reversed(scopes):
                if scope.startswith("extern-"):
                    linkage = scope.removeprefix("extern-")
                    break
        found.append(
            _Candidate(
                name_index=i,
                open_index=i + 1,
                close_index=close,
                prefix=prefix,
                linkage=linkage,
                is_definition=_is_definition(tokens, close + 1),
                problem=_prefix_problem(prefix),
            )
        )
    return found


def _is_definition(tokens: Sequence[_Token], j: int) -> bool:
    # Past the parameter list: skip `noexcept`, `__attribute__((...))`, `-> void` up to the
    # token that decides between a body and the end of a declaration.
    while j < len(tokens):
        t = tokens[j].text
        if t == "{":
            return True
        if t in (";", ",", "="):
            return False
        j = _match_forward(tokens, j) + 1 if t in ("(", "[") else j + 1
    return False


def _top_level_split(tokens: Sequence[_Token], separator: str) -> list[list[_Token]]:
    parts: list[list[_Token]] = [[]]
    depth = 0
    for tok in tokens:
        t = tok.text
        if t in ("(", "[", "{", "<"):
            depth += 1
        elif t in (")", "]", "}", ">"):
            depth = max(depth - 1, 0)
        if t == separator and depth == 0:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def _param_count(tokens: Sequence[_Token], c: _Candidate) -> int:
    parts = _top_level_split(tokens[c.open_index + 1 : c.close_index], ",")
    if len(parts) == 1 and [t.text for t in parts[0]] in ([], ["void"]):
        return 0
    return len(parts)


def _choose(tokens: Sequence[_Token], candidates: Sequence[_Candidate]) -> _Candidate | None:
    """The first C-linkage host definition, else the first C-linkage host declaration."""
    host = [c for c in candidates if c.problem is None]
    c_linkage: list[_Candidate] = []
    for c in host:
        if c.linkage == "C":
            c_linkage.append(c)
        elif c.linkage is None and any(
            _param_count(tokens, d) == _param_count(tokens, c) for d in c_linkage
        ):
            # C++ rule: a redeclaration without a linkage spec keeps the earlier extern "C"
            # (header declares, .cu defines); a different arity would be a C++ overload.
            c_linkage.append(c)
    for c in c_linkage:
        if c.is_definition:
            return c
    return c_linkage[0] if c_linkage else None


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------

_EXPECTED_FORM = 'extern "C" void solve(const float* input, float* output, int N) { ... }'
_SUPPORTED_HINT = (
    "supported: pointers to float, double, half/__half, __nv_bfloat16, __nv_fp8_e4m3/e5m2, "
    "bool and (u)int8/16/32/64 types; scalars of integer types, size_t, float, double, bool"
)


@dataclass(frozen=True, slots=True)
class _Context:
    source: str
    source_name: str
    function_name: str
    function_macros: frozenset[str]

    def where(self, tok: _Token) -> str:
        return f"{self.source_name}:{self.source.count(chr(10), 0, tok.start) + 1}"

    def text_of(self, tokens: Sequence[_Token]) -> str:
        if not tokens:
            return ""
        return " ".join(self.source[tokens[0].start : tokens[-1].end].split())


def _render(words: Sequence[str]) -> str:
    """Tokens back to C spelling: ``const float * *`` → "const float**"."""
    out = ""
    for w in words:
        if w in ("*", "&", "&&", "::") or out.endswith("::") or not out:
            out += w
        else:
            out += " " + w
    return out.replace(" *", "*").replace(" &", "&")


def _drop_attributes(tokens: Sequence[_Token]) -> list[_Token]:
    out: list[_Token] = []
    i = 0
    while i < len(tokens):
        t = tokens[i].text
        if t in _GROUP_ATTRIBUTES and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            i = _match_forward(tokens, i + 1) + 1
        elif t == "[" and i + 1 < len(tokens) and tokens[i + 1].text == "[":
            i = _match_forward(tokens, i) + 1  # [[maybe_unused]]
        elif t in _IGNORED_WORDS:
            i += 1
        else:
            out.append(tokens[i])
            i += 1
    return out


def _parse_params(ctx: _Context, tokens: Sequence[_Token], c: _Candidate) -> tuple[Param, ...]:
    inner = tokens[c.open_index + 1 : c.close_index]
    parts = _top_level_split(inner, ",")
    if len(parts) == 1 and [t.text for t in _drop_attributes(parts[0])] in ([], ["void"]):
        return ()
    params: list[Param] = []
    seen: dict[str, int] = {}
    for index, part in enumerate(parts, start=1):
        param = _parse_param(ctx, part, index, tokens[c.name_index])
        if param.name in seen:
            raise SignatureError(
                f"{ctx.where(part[0])}: parameters {seen[param.name]} and {index} of "
                f"{ctx.function_name} are both named '{param.name}'",
                hint="give each parameter its own name; arguments are bound by name",
            )
        seen[param.name] = index
        params.append(param)
    return tuple(params)


def _parse_param(ctx: _Context, part: Sequence[_Token], index: int, name_tok: _Token) -> Param:
    fn = ctx.function_name
    where = ctx.where(part[0]) if part else ctx.where(name_tok)
    original = ctx.text_of(part)
    what = f"parameter {index} of {fn}"
    if not part:
        raise SignatureError(f"{where}: {what} is empty", hint=f"expected: {_EXPECTED_FORM}")
    # A default argument (`int n = 0`) changes nothing about what is passed.
    tokens = _drop_attributes(_top_level_split(part, "=")[0])
    texts = [t.text for t in tokens]
    if "..." in texts:
        raise SignatureError(
            f"{where}: {fn} is variadic ('...'); ctypes cannot bind arguments to it by name",
            hint=f"declare every parameter with a type and a name: {_EXPECTED_FORM}",
        )
    _reject_unparsable(ctx, tokens, what, original, where)
    texts, is_array = _strip_array_suffix(ctx, texts, what, original, where)
    name, type_words = _split_name(texts)
    if name is None and texts:
        last = tokens[len(texts) - 1]
        written = ctx.source[last.start : last.end]
        if written != last.text:
            # The compiler would fail here too; say why, since the source looks fine.
            raise SignatureError(
                f"{where}: {what} ('{original}') has no name once '{written}' is expanded: "
                f"'{written}' is a #define in this file",
                hint=f"rename the parameter or the macro '{written}'",
            )
    if name is None and len(texts) == 1 and texts[0] not in _TYPE_WORDS:
        raise SignatureError(
            f"{where}: {what} ('{original}') is a single word; it needs a type and a name",
            hint=f"write it as plain C, e.g. 'int {texts[0]}' or 'const float* {texts[0]}'",
        )
    if name is None:
        raise SignatureError(
            f"{where}: {what} has no name; bind-by-name needs one (it reads '{original}')",
            hint=f"name it, e.g. '{_render(texts)} x'",
        )
    if "&" in type_words or "&&" in type_words:
        raise SignatureError(
            f"{where}: parameter '{name}' of {fn} is a reference ('{_render(type_words)}'); "
            "an extern \"C\" entry point called through ctypes cannot take references",
            hint=f"take a pointer for a buffer ({_base_hint(type_words)}* {name}) "
            f"or a value for a scalar ({_base_hint(type_words)} {name})",
        )
    stars = type_words.count("*") + (1 if is_array else 0)
    if stars > 1:
        raise SignatureError(
            f"{where}: parameter '{name}' of {fn} has type '{_render(type_words)}"
            f"{'[]' if is_array else ''}', a pointer to pointers; kbench-ci binds one flat "
            "buffer per pointer parameter",
            hint=f"pass one flat buffer and index it, "
            f"e.g. 'const {_base_hint(type_words)}* {name}'",
        )
    first_star = type_words.index("*") if "*" in type_words else len(type_words)
    base = type_words[:first_star]
    after = type_words[first_star + 1 :]
    if any(w not in _QUALIFIERS for w in after):
        raise SignatureError(
            f"{where}: cannot read the type of parameter '{name}' of {fn}: '{original}'",
            hint=_SUPPORTED_HINT,
        )
    is_const = "const" in base
    base_words = [w for w in base if w not in _QUALIFIERS]
    info = _resolve_type(base_words)
    type_text = _render(type_words) + ("[]" if is_array else "")
    if info is None:
        raise _unsupported(ctx, where, name, type_text, base_words)
    if stars == 1:
        if info.torch_dtype is None:
            raise _unsupported(ctx, where, name, type_text, base_words)
        return PointerParam(name, info.c_type, info.torch_dtype, is_const)
    if info.ctype is None:
        raise SignatureError(
            f"{where}: parameter '{name}' of {fn} passes '{info.c_type}' by value, which ctypes "
            "cannot do (it is a struct in CUDA's headers)",
            hint=f"take 'float {name}' and convert inside {fn}",
        )
    return ScalarParam(name, info.c_type, info.ctype, info.is_integer)


def _reject_unparsable(
    ctx: _Context, tokens: Sequence[_Token], what: str, original: str, where: str
) -> None:
    texts = [t.text for t in tokens]
    if "<" in texts or "template" in texts:
        raise SignatureError(
            f"{where}: {what} uses a template ('{original}'); an extern \"C\" entry point "
            "bound through ctypes needs plain C types",
            hint=_SUPPORTED_HINT,
        )
    if "(" in texts:
        macro = next(
            (t for t, nxt in zip(texts, texts[1:]) if nxt == "(" and t in ctx.function_macros),
            None,
        )
        kind = f"the function-like macro {macro}()" if macro else "a function pointer or macro"
        raise SignatureError(
            f"{where}: cannot read {what}: '{original}' looks like {kind}",
            hint="write the parameter as plain C (e.g. 'const float* x', 'int n'); "
            "kbench-ci expands only object-like macros defined in the same file",
        )
    allowed = {"*", "&", "&&", "::", "[", "]"}
    for t in texts:
        if not (_is_identifier_text(t) or t in allowed or t[0].isdigit()):
            raise SignatureError(
                f"{where}: cannot read {what}: '{original}' (unexpected '{t}')",
                hint="write the parameter as plain C, e.g. 'const float* x' or 'int n'",
            )


def _strip_array_suffix(
    ctx: _Context, texts: list[str], what: str, original: str, where: str
) -> tuple[list[str], bool]:
    # A parameter `float x[]` or `float x[N]` is a pointer (C's array-to-pointer adjustment).
    if "[" not in texts:
        return texts, False
    first = texts.index("[")
    rest = texts[first:]
    if rest.count("[") > 1 or rest[-1] != "]":
        raise SignatureError(
            f"{where}: cannot read {what}: '{original}' (multi-dimensional array parameter)",
            hint="take a flat pointer, e.g. 'const float* x', and index it",
        )
    return texts[:first], True


def _split_name(texts: Sequence[str]) -> tuple[str | None, list[str]]:
    if len(texts) < 2:
        return None, list(texts)
    last = texts[-1]
    if (
        not _is_identifier_text(last)
        or last in _TYPE_WORDS
        or last in _QUALIFIERS
        or texts[-2] == "::"
    ):
        return None, list(texts)
    return last, list(texts[:-1])


def _resolve_type(words: Sequence[str]) -> _TypeInfo | None:
    joined = _render(words)
    # `std::int64_t`, `::size_t`: the same types under their namespace-qualified spelling
    for prefix in ("::", "std::", "cuda::std::"):
        if joined.startswith(prefix) and joined.count("::") == prefix.count("::"):
            joined = joined.removeprefix(prefix)
    if joined in _TYPES:
        return _TYPES[joined]
    canonical = _builtin_integer(words)
    return _TYPES.get(canonical) if canonical else None


def _base_hint(type_words: Sequence[str]) -> str:
    base = [w for w in type_words if w not in _QUALIFIERS and w not in ("*", "&", "&&")]
    return _render(base) or "float"


def _unsupported(
    ctx: _Context, where: str, name: str, type_text: str, base_words: Sequence[str]
) -> SignatureError:
    base = _render(base_words)
    message = (
        f"{where}: parameter '{name}' of {ctx.function_name} has type '{type_text}', "
        "which kbench-ci cannot bind"
    )
    if _VECTOR_TYPE.fullmatch(base):
        return SignatureError(
            message + f" ('{base}' is a vector or packed type)",
            hint=f"take a pointer to the scalar element (e.g. 'float* {name}' for float4) and "
            "reinterpret_cast it inside solve",
        )
    if base == "void":
        return SignatureError(
            message + " (a void pointer has no element type to size or compare)",
            hint=f"give the pointer its element type, e.g. 'const float* {name}'",
        )
    return SignatureError(message, hint=_SUPPORTED_HINT)


# --------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------


def parse_solve_signature(
    source: str, *, function_name: str = "solve", source_name: str = "<source>"
) -> SolveSignature:
    """Read the parameters of ``extern "C" <function_name>(...)`` from CUDA C++ source text.

    Of several declarations, the first definition wins (its parameter names are the ones the
    user reads), else the first declaration. Raises :class:`SignatureError` when there is no
    such function, when it would be name-mangled, or when a parameter cannot be bound.
    """
    stripped = _strip_comments_and_strings(source)
    cleaned, events, function_macros = _preprocess(stripped)
    tokens = _tokenize(cleaned, events)
    ctx = _Context(source, source_name, function_name, function_macros)
    candidates = _find_candidates(tokens, function_name)
    chosen = _choose(tokens, candidates)
    if chosen is None:
        raise _no_entry_point(ctx, tokens, candidates)
    if chosen.close_index >= len(tokens):
        raise SignatureError(
            f"{ctx.where(tokens[chosen.name_index])}: the parameter list of {function_name} "
            "is never closed",
            hint=f"expected: {_EXPECTED_FORM}",
        )
    return SolveSignature(_parse_params(ctx, tokens, chosen))


def _no_entry_point(
    ctx: _Context, tokens: Sequence[_Token], candidates: Sequence[_Candidate]
) -> SignatureError:
    fn = ctx.function_name
    expected = f"expected: {_EXPECTED_FORM}".replace("solve", fn)
    by_problem = {c.problem: c for c in reversed(candidates)}
    mangled = next((c for c in candidates if c.problem is None), None)
    if mangled is not None:
        return SignatureError(
            f"{ctx.where(tokens[mangled.name_index])}: {fn} has C++ linkage (no extern \"C\"), "
            "so its symbol is mangled and ctypes cannot find it in the shared library",
            hint=f'add extern "C" (write it literally; macros from headers are not read): '
            f"{expected}",
        )
    explanations = {
        "kernel": f"{fn} is a __global__ kernel; the entry point must be a host function "
        "that launches it",
        "device": f"{fn} is a __device__ function; the entry point must be a host function",
        "template": f"{fn} is a template, which cannot have C linkage or an exported symbol",
        "static": f"{fn} is static, so it has internal linkage and is not exported",
    }
    for problem, explanation in explanations.items():
        if problem in by_problem:
            where = ctx.where(tokens[by_problem[problem].name_index])
            return SignatureError(f"{where}: {explanation}", hint=expected)
    return SignatureError(
        f'{ctx.source_name}: no extern "C" function named {fn} found', hint=expected
    )


def read_solve_signature(path: pathlib.Path, *, function_name: str = "solve") -> SolveSignature:
    """:func:`parse_solve_signature` on a file; a missing or unreadable file is a UserFileError."""
    path = pathlib.Path(path)
    try:
        # Identifiers are ASCII; a stray byte in a comment must not stop the run.
        source = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise UserFileError(
            f"CUDA source {path} does not exist",
            hint="point the kernel's source at the .cu file that defines extern \"C\" solve",
        ) from None
    except IsADirectoryError:
        raise UserFileError(f"CUDA source {path} is a directory, not a .cu file") from None
    except OSError as exc:
        raise UserFileError(f"cannot read CUDA source {path}: {exc.strerror or exc}") from None
    return parse_solve_signature(source, function_name=function_name, source_name=str(path))


# --------------------------------------------------------------------------------------------
# Size expressions
# --------------------------------------------------------------------------------------------

_ALLOWED_SYNTAX = "integers, dimension names, + - * / // % ** and parentheses"
# Sizes beyond int64 are typos; the bound also stops `10**10**10` from hanging the process.
_MAX_MAGNITUDE = 2**63


def _exact_div(a: int, b: int) -> int:
    if a % b:
        raise _NotExact(f"{a}/{b} is not a whole number")
    return a // b


class _NotExact(ArithmeticError):
    pass


def _bounded_pow(a: int, b: int) -> int:
    if b < 0:
        raise _NotExact(f"{a}**{b} has a negative exponent")
    if abs(a) > 1 and b > 64:
        raise OverflowError
    return a**b


_BINARY: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: _exact_div,
    ast.Mod: operator.mod,
    ast.Pow: _bounded_pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[int], int]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _parse_expression(expression: str, error: type[UsageError]) -> ast.expr:
    text = expression.strip()
    if not text:
        raise error("empty size expression", hint=f"write e.g. 'M*N' ({_ALLOWED_SYNTAX})")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise error(
            f"size expression '{expression}' is not valid syntax", hint=_ALLOWED_SYNTAX
        ) from None
    for node in ast.walk(tree.body):
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            continue
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int:
            continue
        if isinstance(node, (ast.operator, ast.unaryop, ast.expr_context)):
            continue
        raise error(
            f"size expression '{expression}' uses {_describe(node)}, which is not allowed",
            hint=f"use only {_ALLOWED_SYNTAX}",
        )
    return tree.body


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        return "a function call"
    if isinstance(node, ast.Attribute):
        return f"attribute access ('.{node.attr}')"
    if isinstance(node, ast.Constant):
        return f"the literal {node.value!r}"
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return f"the operator {type(node.op).__name__}"
    return f"{type(node).__name__} syntax"


def evaluate_size_expression(expression: str, dims: Mapping[str, int]) -> int:
    """Evaluate a pointer-size expression such as ``"B*(V+1)"`` over integer dimensions.

    Only integer literals, dimension names and ``+ - * / // % **`` with parentheses are
    accepted; ``/`` must divide exactly. The result must be a positive int.
    """
    body = _parse_expression(expression, SignatureError)
    values: dict[str, int] = {}
    for name, value in dims.items():
        try:
            values[name] = operator.index(value)
        except TypeError:
            raise SignatureError(
                f"dimension '{name}' is {value!r}, not an integer",
                hint="dimensions used in pointer sizes must be integers",
            ) from None

    def evaluate(node: ast.expr) -> int:
        if isinstance(node, ast.Constant):
            return int(node.value)
        if isinstance(node, ast.Name):
            if node.id not in values:
                known = ", ".join(sorted(values)) or "none"
                raise SignatureError(
                    f"size expression '{expression}' uses unknown name '{node.id}'",
                    hint=f"known dims: {known}",
                )
            return values[node.id]
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](evaluate(node.operand))
        node = cast(ast.BinOp, node)  # the whitelist in _parse_expression leaves only BinOp
        result = _BINARY[type(node.op)](evaluate(node.left), evaluate(node.right))
        if abs(result) >= _MAX_MAGNITUDE:
            raise OverflowError
        return result

    try:
        result = evaluate(body)
    except ZeroDivisionError:
        raise SignatureError(
            f"size expression '{expression}' divides by zero with dims {dict(values)}"
        ) from None
    except _NotExact as exc:
        raise SignatureError(
            f"size expression '{expression}': {exc}",
            hint="use // to round down, or write the size so that it divides exactly",
        ) from None
    except OverflowError:
        raise SignatureError(
            f"size expression '{expression}' is too large (beyond 2**63) with dims {dict(values)}"
        ) from None
    if result <= 0:
        raise SignatureError(
            f"size expression '{expression}' evaluates to {result} with dims {dict(values)}; "
            "a pointer size must be a positive number of elements"
        )
    return result


def parse_ptr_size_options(values: Sequence[str]) -> tuple[dict[str, str], str | None]:
    """Split repeated ``--ptr-size`` values into per-pointer expressions and one default.

    ``name=EXPR`` sizes one pointer; a bare ``EXPR`` sizes every pointer not named (at most
    one). Expressions are checked for syntax here, and evaluated later, once dims are known.
    """
    per_pointer: dict[str, str] = {}
    default: str | None = None
    for raw in values:
        text = raw.strip()
        if "=" in text and not _is_bare_expression(text):
            name, _, expr = text.partition("=")
            name, expr = name.strip(), expr.strip()
            if not name.isidentifier():
                raise UsageError(
                    f"--ptr-size '{raw}': '{name}' is not a parameter name",
                    hint="write --ptr-size NAME=EXPR, e.g. --ptr-size output=M*N",
                )
            if name in per_pointer:
                raise UsageError(
                    f"--ptr-size gives '{name}' twice ('{per_pointer[name]}' and '{expr}')",
                    hint="give each pointer one size",
                )
            _parse_expression(expr, UsageError)
            per_pointer[name] = expr
        else:
            if default is not None:
                raise UsageError(
                    f"--ptr-size has two sizes for all pointers ('{default}' and '{text}')",
                    hint="give one bare EXPR, and NAME=EXPR for the pointers that differ",
                )
            _parse_expression(text, UsageError)
            default = text
    return per_pointer, default


def _is_bare_expression(text: str) -> bool:
    # `==`, `<=`, `>=`, `!=` are comparisons, not NAME=EXPR; they are rejected as expressions.
    return any(op in text for op in ("==", "<=", ">=", "!="))
