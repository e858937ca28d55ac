"""Clean CUDA C++ source before lexing: comments, string literals and the preprocessor.

Every function here keeps the text's length and its newlines (removed text becomes spaces),
so that an offset into the cleaned text is an offset into the user's source and error
messages can name the user's line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MacroEvent", "preprocess", "strip_comments_and_strings"]

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


def strip_comments_and_strings(source: str) -> str:
    """Blank comments, character literals and string literals other than ``"C"``/``"C++"``."""
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
class MacroEvent:
    """A ``#define`` or ``#undef`` at ``offset``: from there on, ``name`` expands to ``body``."""

    offset: int
    name: str
    #: None for #undef
    body: str | None


_DIRECTIVE = re.compile(r"\s*#\s*(\w*)(.*)", re.S)
_DEFINE = re.compile(r"\s*([A-Za-z_]\w*)(\(?)(.*)", re.S)


def preprocess(text: str) -> tuple[str, list[MacroEvent], frozenset[str]]:
    """Blank directives and ``#if 0`` regions; collect object-like ``#define``/``#undef``.

    Conditions other than a literal 0/1 are unknown here, so both branches stay: a solve
    inside ``#ifdef __cplusplus extern "C" { #endif`` must still be seen.

    Returns the cleaned text, the macro events in source order (a function-like ``#define``
    is recorded as an ``#undef``: only object-like macros are expanded), and the names of the
    function-like macros, which serve only to explain an unreadable parameter.
    """
    chars = list(text)
    events: list[MacroEvent] = []
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
        directive_match = _DIRECTIVE.match(logical)
        # Joining continuation lines keeps the first line's leading '#', which matched above.
        assert directive_match is not None
        directive, rest = directive_match.groups()
        _track_conditional(frames, directive, rest.strip())
        if directive in ("define", "undef") and all(f[0] for f in frames):
            d = _DEFINE.match(rest)
            if d is None:
                continue
            name, paren, body = d.groups()
            if directive == "undef":
                events.append(MacroEvent(start, name, None))
                function_macros.discard(name)
            elif paren:
                function_macros.add(name)
                events.append(MacroEvent(start, name, None))
            else:
                events.append(MacroEvent(start, name, body.strip()))
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
