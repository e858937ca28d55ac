"""The entry points: run the pipeline over source text or a file and return its signature.

strip comments and strings → preprocess → tokenize → find and choose the declaration → bind
its parameters. When no declaration can be chosen, the error says why the ones found do not
qualify (C++ linkage, a kernel, a device function, a template, static).
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from kbench_ci.cuda.signature.declarations import Candidate, choose, find_candidates
from kbench_ci.cuda.signature.lexer import Token, tokenize
from kbench_ci.cuda.signature.model import SolveSignature
from kbench_ci.cuda.signature.params import EXPECTED_FORM, Context, parse_params
from kbench_ci.cuda.signature.preprocess import preprocess, strip_comments_and_strings
from kbench_ci.errors import SignatureError, UserFileError

__all__ = ["parse_solve_signature", "read_solve_signature"]


def parse_solve_signature(
    source: str, *, function_name: str = "solve", source_name: str = "<source>"
) -> SolveSignature:
    """Read the parameters of ``extern "C" <function_name>(...)`` from CUDA C++ source text.

    Of several declarations, the first definition wins (its parameter names are the ones the
    user reads), else the first declaration. Raises :class:`SignatureError` when there is no
    such function, when it would be name-mangled, or when a parameter cannot be bound.
    """
    stripped = strip_comments_and_strings(source)
    cleaned, events, function_macros = preprocess(stripped)
    tokens = tokenize(cleaned, events)
    ctx = Context(source, source_name, function_name, function_macros)
    candidates = find_candidates(tokens, function_name)
    chosen = choose(tokens, candidates)
    if chosen is None:
        raise _no_entry_point(ctx, tokens, candidates)
    if chosen.close_index >= len(tokens):
        raise SignatureError(
            f"{ctx.where(tokens[chosen.name_index])}: the parameter list of {function_name} "
            "is never closed",
            hint=f"expected: {EXPECTED_FORM}",
        )
    return SolveSignature(parse_params(ctx, tokens, chosen))


def _no_entry_point(
    ctx: Context, tokens: Sequence[Token], candidates: Sequence[Candidate]
) -> SignatureError:
    fn = ctx.function_name
    expected = f"expected: {EXPECTED_FORM}".replace("solve", fn)
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
