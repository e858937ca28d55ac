"""Bind each parameter of the chosen declaration: its name, and a pointer or scalar type.

Anything that cannot be read with certainty (templates, references, pointers to pointers,
function pointers, macros that hide the name, struct types passed by value) is a
:class:`SignatureError` that names the parameter and says how to write it instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from kbench_ci.cuda.signature.declarations import Candidate
from kbench_ci.cuda.signature.lexer import Token, is_identifier_text, match_forward, top_level_split
from kbench_ci.cuda.signature.model import Param, PointerParam, ScalarParam
from kbench_ci.cuda.signature.type_table import QUALIFIERS, TYPE_WORDS, render, resolve_type
from kbench_ci.errors import SignatureError

__all__ = ["EXPECTED_FORM", "Context", "parse_params"]

EXPECTED_FORM = 'extern "C" void solve(const float* input, float* output, int N) { ... }'
_SUPPORTED_HINT = (
    "supported: pointers to float, double, half/__half, __nv_bfloat16, __nv_fp8_e4m3/e5m2, "
    "bool and (u)int8/16/32/64 types; scalars of integer types, size_t, float, double, bool"
)
# Ignorable decorations of a parameter: they change nothing about what is passed.
_IGNORED_WORDS = frozenset({"__grid_constant__", "register"})
_GROUP_ATTRIBUTES = frozenset({"__attribute__", "__declspec", "alignas", "__align__"})
_VECTOR_TYPE = re.compile(
    r"(?:u?char|u?short|u?int|u?long|u?longlong|float|double|half|__half|bfloat16|"
    r"__nv_bfloat16|nv_bfloat16|__nv_fp8x?\d?_e\dm\d)[1-4]"
    r"|__nv_fp8x[24]_e\dm\d|__nv_fp4\w*"
)


@dataclass(frozen=True, slots=True)
class Context:
    """The source being read, for error messages: file name, line numbers, original text."""

    source: str
    source_name: str
    function_name: str
    function_macros: frozenset[str]

    def where(self, tok: Token) -> str:
        return f"{self.source_name}:{self.source.count(chr(10), 0, tok.start) + 1}"

    def text_of(self, tokens: Sequence[Token]) -> str:
        if not tokens:
            return ""
        return " ".join(self.source[tokens[0].start : tokens[-1].end].split())


def _drop_attributes(tokens: Sequence[Token]) -> list[Token]:
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        t = tokens[i].text
        if t in _GROUP_ATTRIBUTES and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            i = match_forward(tokens, i + 1) + 1
        elif t == "[" and i + 1 < len(tokens) and tokens[i + 1].text == "[":
            i = match_forward(tokens, i) + 1  # [[maybe_unused]]
        elif t in _IGNORED_WORDS:
            i += 1
        else:
            out.append(tokens[i])
            i += 1
    return out


def parse_params(ctx: Context, tokens: Sequence[Token], c: Candidate) -> tuple[Param, ...]:
    inner = tokens[c.open_index + 1 : c.close_index]
    parts = top_level_split(inner, ",")
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


def _parse_param(ctx: Context, part: Sequence[Token], index: int, name_tok: Token) -> Param:
    fn = ctx.function_name
    where = ctx.where(part[0]) if part else ctx.where(name_tok)
    original = ctx.text_of(part)
    what = f"parameter {index} of {fn}"
    if not part:
        raise SignatureError(f"{where}: {what} is empty", hint=f"expected: {EXPECTED_FORM}")
    # A default argument (`int n = 0`) changes nothing about what is passed.
    tokens = _drop_attributes(top_level_split(part, "=")[0])
    texts = [t.text for t in tokens]
    if "..." in texts:
        raise SignatureError(
            f"{where}: {fn} is variadic ('...'); ctypes cannot bind arguments to it by name",
            hint=f"declare every parameter with a type and a name: {EXPECTED_FORM}",
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
    if name is None and len(texts) == 1 and texts[0] not in TYPE_WORDS:
        raise SignatureError(
            f"{where}: {what} ('{original}') is a single word; it needs a type and a name",
            hint=f"write it as plain C, e.g. 'int {texts[0]}' or 'const float* {texts[0]}'",
        )
    if name is None:
        raise SignatureError(
            f"{where}: {what} has no name; bind-by-name needs one (it reads '{original}')",
            hint=f"name it, e.g. '{render(texts)} x'",
        )
    if "&" in type_words or "&&" in type_words:
        raise SignatureError(
            f"{where}: parameter '{name}' of {fn} is a reference ('{render(type_words)}'); "
            "an extern \"C\" entry point called through ctypes cannot take references",
            hint=f"take a pointer for a buffer ({_base_hint(type_words)}* {name}) "
            f"or a value for a scalar ({_base_hint(type_words)} {name})",
        )
    stars = type_words.count("*") + (1 if is_array else 0)
    if stars > 1:
        raise SignatureError(
            f"{where}: parameter '{name}' of {fn} has type '{render(type_words)}"
            f"{'[]' if is_array else ''}', a pointer to pointers; kbench-ci binds one flat "
            "buffer per pointer parameter",
            hint=f"pass one flat buffer and index it, "
            f"e.g. 'const {_base_hint(type_words)}* {name}'",
        )
    first_star = type_words.index("*") if "*" in type_words else len(type_words)
    base = type_words[:first_star]
    after = type_words[first_star + 1 :]
    if any(w not in QUALIFIERS for w in after):
        raise SignatureError(
            f"{where}: cannot read the type of parameter '{name}' of {fn}: '{original}'",
            hint=_SUPPORTED_HINT,
        )
    is_const = "const" in base
    base_words = [w for w in base if w not in QUALIFIERS]
    info = resolve_type(base_words)
    type_text = render(type_words) + ("[]" if is_array else "")
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
    ctx: Context, tokens: Sequence[Token], what: str, original: str, where: str
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
            (t for t, nxt in pairwise(texts) if nxt == "(" and t in ctx.function_macros),
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
        if not (is_identifier_text(t) or t in allowed or t[0].isdigit()):
            raise SignatureError(
                f"{where}: cannot read {what}: '{original}' (unexpected '{t}')",
                hint="write the parameter as plain C, e.g. 'const float* x' or 'int n'",
            )


def _strip_array_suffix(
    ctx: Context, texts: list[str], what: str, original: str, where: str
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
        not is_identifier_text(last)
        or last in TYPE_WORDS
        or last in QUALIFIERS
        or texts[-2] == "::"
    ):
        return None, list(texts)
    return last, list(texts[:-1])


def _base_hint(type_words: Sequence[str]) -> str:
    base = [w for w in type_words if w not in QUALIFIERS and w not in ("*", "&", "&&")]
    return render(base) or "float"


def _unsupported(
    ctx: Context, where: str, name: str, type_text: str, base_words: Sequence[str]
) -> SignatureError:
    base = render(base_words)
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
