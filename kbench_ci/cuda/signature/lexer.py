"""Split cleaned source into tokens, expanding object-like macros, and walk brackets in them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kbench_ci.cuda.signature.preprocess import MacroEvent

__all__ = [
    "Token",
    "is_identifier_text",
    "match_backward",
    "match_forward",
    "tokenize",
    "top_level_split",
]


@dataclass(frozen=True, slots=True)
class Token:
    text: str
    #: span in the source; tokens from a macro expansion carry the span of the macro's name
    start: int
    end: int

    @property
    def is_identifier(self) -> bool:
        return self.text[0].isalpha() or self.text[0] == "_"


def is_identifier_text(text: str) -> bool:
    return text[0].isalpha() or text[0] == "_"


_TOKEN = re.compile(
    r'"[^"]*"'  # string literal (contents already blanked unless "C"/"C++")
    r"|[A-Za-z_$][\w$]*"  # identifier / keyword
    r"|\.?\d(?:[eEpP][+-]|[\w.'])*"  # number
    r"|::|->|\.\.\.|\S"  # punctuation, one char unless it matters here
)
_MAX_MACRO_DEPTH = 32


def tokenize(text: str, events: Sequence[MacroEvent]) -> list[Token]:
    """Tokens of preprocessed ``text``, each macro expanded as defined at its position."""
    macros: dict[str, list[str]] = {}
    tokens: list[Token] = []
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
    out: list[Token],
    depth: int,
) -> None:
    body = macros.get(text)
    # `hidden` is the C preprocessor's rule that a macro is not re-expanded inside itself.
    if body is None or text in hidden or depth > _MAX_MACRO_DEPTH:
        out.append(Token(text, start, end))
        return
    for piece in body:
        _expand(piece, start, end, macros, hidden | {text}, out, depth + 1)


_CLOSERS = {")": "(", "]": "[", "}": "{"}
_OPENERS = {"(": ")", "[": "]", "{": "}"}


def match_forward(tokens: Sequence[Token], i: int) -> int:
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


def match_backward(tokens: Sequence[Token], i: int) -> int:
    """Index of the bracket opening ``tokens[i]``, or -1 if it is never opened."""
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


def top_level_split(tokens: Sequence[Token], separator: str) -> list[list[Token]]:
    """Split at each ``separator`` not nested in brackets (``<>`` counts as brackets)."""
    parts: list[list[Token]] = [[]]
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
