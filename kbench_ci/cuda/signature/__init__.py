"""Read the ``extern "C" solve(...)`` signature of a CUDA C++ solution from its source text.

A pre-built ``.so`` is loaded with ctypes, and ctypes knows nothing about parameter names or
types. The source does, and users write the entry point LeetGPU style::

    extern "C" void solve(const float* input, float* output, int N) { ... }

so this package reads that one declaration and turns it into a :class:`SolveSignature`: each
pointer with its torch dtype and whether it is an input (``const T*``) or an output, each scalar
with the ctypes type to pass it as. The caller then binds arguments *by name* (``N`` from the
shape, ``output`` from the reference's outputs) instead of by position.

This is not a C++ parser. It does what the compiler's first phases do that matters here:
comments and string literals go, ``#if 0`` blocks go, object-like ``#define`` macros defined in
the file are expanded, and braces are tracked so that only namespace-scope (or
``extern "C" { }``-block) declarations count. Anything it cannot read with certainty becomes a
:class:`SignatureError` naming the text, never a guess: a wrong guess would bind a buffer to the
wrong argument and report a correct kernel as incorrect, or worse, the reverse.

The stages, one module each: :mod:`.preprocess` (comments, strings, directives),
:mod:`.lexer` (tokens, macro expansion), :mod:`.declarations` (which declaration is the entry
point), :mod:`.params` (binding each parameter), with :mod:`.model` (the value objects) and
:mod:`.type_table` (the C types understood). :mod:`.reader` runs them.

The ``--ptr-size`` expressions that size each pointer live in :mod:`kbench_ci.suite.size_expr`;
they are re-exported here because callers have always imported them from this name.
"""

from __future__ import annotations

from kbench_ci.cuda.signature.model import Param, PointerParam, ScalarParam, SolveSignature
from kbench_ci.cuda.signature.reader import parse_solve_signature, read_solve_signature
from kbench_ci.cuda.signature.type_table import supported_types
from kbench_ci.suite.size_expr import evaluate_size_expression, parse_ptr_size_options

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
