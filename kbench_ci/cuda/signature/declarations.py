"""Find the declarations of the entry point in a token stream and choose the one to bind.

Only namespace-scope (or ``extern "C" { }``-block) declarations define the exported symbol;
each one found becomes a :class:`Candidate` recording its linkage and, if it cannot be the
host entry point ctypes calls, why not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from kbench_ci.cuda.signature.lexer import (
    Token,
    is_identifier_text,
    match_backward,
    match_forward,
    top_level_split,
)

__all__ = ["Candidate", "choose", "find_candidates"]

_NAMESPACE_SCOPES = frozenset({"namespace", "extern-C", "extern-C++"})


def _classify_brace(tokens: Sequence[Token], i: int) -> str:
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
class Candidate:
    name_index: int
    open_index: int
    close_index: int
    prefix: tuple[str, ...]
    #: "C" / "C++" when written on the declaration or its enclosing linkage block, else None
    linkage: str | None
    is_definition: bool
    #: why this is not a host entry point ctypes can call, or None
    problem: str | None


def _declaration_prefix(tokens: Sequence[Token], i: int) -> tuple[str, ...] | None:
    """Tokens of the declaration before ``tokens[i]``, or None if ``i`` sits in an expression."""
    out: list[str] = []
    j = i - 1
    while j >= 0:
        t = tokens[j].text
        if t in (";", "{", "}"):
            break
        if t in (")", "]"):
            j = match_backward(tokens, j)
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
    if not any(is_identifier_text(t) for t in out):
        return None  # a bare `solve(...)` at namespace scope is a call or a macro use
    return tuple(out)


def _explicit_linkage(prefix: Sequence[str]) -> str | None:
    for a, b in pairwise(prefix):
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


def find_candidates(tokens: Sequence[Token], function_name: str) -> list[Candidate]:
    """Every namespace-scope declaration or definition of ``function_name``, in source order."""
    scopes: list[str] = []
    found: list[Candidate] = []
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
        close = match_forward(tokens, i + 1)
        linkage = _explicit_linkage(prefix)
        if linkage is None:
            for scope in reversed(scopes):
                if scope.startswith("extern-"):
                    linkage = scope.removeprefix("extern-")
                    break
        found.append(
            Candidate(
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


def _is_definition(tokens: Sequence[Token], j: int) -> bool:
    # Past the parameter list: skip `noexcept`, `__attribute__((...))`, `-> void` up to the
    # token that decides between a body and the end of a declaration.
    while j < len(tokens):
        t = tokens[j].text
        if t == "{":
            return True
        if t in (";", ",", "="):
            return False
        j = match_forward(tokens, j) + 1 if t in ("(", "[") else j + 1
    return False


def _param_count(tokens: Sequence[Token], c: Candidate) -> int:
    parts = top_level_split(tokens[c.open_index + 1 : c.close_index], ",")
    if len(parts) == 1 and [t.text for t in parts[0]] in ([], ["void"]):
        return 0
    return len(parts)


def choose(tokens: Sequence[Token], candidates: Sequence[Candidate]) -> Candidate | None:
    """The first C-linkage host definition, else the first C-linkage host declaration."""
    host = [c for c in candidates if c.problem is None]
    c_linkage: list[Candidate] = []
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
