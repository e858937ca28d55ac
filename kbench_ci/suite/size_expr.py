"""Size expressions (``"M*N"``, ``"B*(V+1)"``): ``--ptr-size`` and kbench.toml's ``ptr_size`` /
``ptr_sizes`` (the elements behind each pointer of a CUDA ``solve``), ``bytes`` and ``flops``
(the work of one call).

A CUDA ``solve`` receives bare pointers, so the number of elements behind each one comes from
an expression over the problem's integer dimensions. The grammar lives with the suite because
the loader checks every expression of kbench.toml with it before anything runs; cuda/ sizes
pointers with it. Expressions are read with :mod:`ast` and a
whitelist of node types, never ``eval``: only integer literals, dimension names,
``+ - * / // % **`` and parentheses are accepted.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from kbench_ci.errors import SignatureError, UsageError

__all__ = ["check_size_expression", "evaluate_size_expression", "parse_ptr_size_options"]

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
    # b >= 0 is checked above, so the power is an int (typeshed types int**int as Any, since a
    # negative exponent would give a float).
    return cast(int, a**b)


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


def check_size_expression(expression: str) -> None:
    """UsageError when ``expression`` is no size expression (syntax, or what it uses): the same
    check and words for kbench.toml's ``ptr_size`` / ``ptr_sizes`` as for ``--ptr-size``."""
    _parse_expression(expression, UsageError)


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
            # the whitelist in _parse_expression admits only constants whose type is exactly int
            return cast(int, node.value)
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
