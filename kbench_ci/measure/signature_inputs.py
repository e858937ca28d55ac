"""A compiled solution's inputs: from ref.py's setup() when it has one, else from the ``solve()``
signature in the .cu source (pointers by type and size, scalars from the dimensions). Its own
module so that the judge (kbench_ci/judge), which never loads a kernel's library, makes a
CUDA case's inputs by the same rule as the worker that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from kbench_ci.cuda.signature import (
    PointerParam,
    SolveSignature,
    evaluate_size_expression,
)
from kbench_ci.errors import SignatureError
from kbench_ci.measure.inputs import InputSet, random_tensor, seed_everything
from kbench_ci.measure.setup_inputs import inputs_from_setup
from kbench_ci.measure.usercode import Problem


def signature_inputs(
    signature: SolveSignature, problem: Problem, dims: Mapping[str, Any], device: torch.device,
    ptr_sizes: Mapping[str, str], ptr_size: str | None,
) -> tuple[Callable[[int], InputSet], tuple[str, ...]]:
    """``make_inputs(seed)`` for a compiled solution, and the notes on the pointer sizes chosen."""
    notes: tuple[str, ...] = ()
    if problem.setup is None:
        sizes = pointer_sizes(signature, dims, ptr_sizes, ptr_size)
        notes = tuple(f"pointer {name}: {count} elements ({how})" for name, (count, how) in sizes.items())
    else:
        sizes = {}

    def make_inputs(seed: int) -> InputSet:
        if problem.setup is not None:
            inputs = inputs_from_setup(
                problem.setup, dims, seed=seed, device=device, where=f"{problem.path.name} setup()", in_ref=True
            )
            _check_setup_against_signature(inputs, signature, problem.path.name)
            return inputs
        seed_everything(seed)
        kwargs: dict[str, Any] = {}
        for param in signature.params:
            if isinstance(param, PointerParam):
                count = sizes[param.name][0]
                if param.is_output:
                    kwargs[param.name] = torch.empty(count, dtype=param.torch_dtype, device=device)
                else:
                    kwargs[param.name] = random_tensor(count, param.torch_dtype, device)
            else:
                kwargs[param.name] = _scalar_value(param.name, dims)
        extra = {k: v for k, v in dims.items() if k not in kwargs}
        return InputSet(kwargs={**kwargs, **extra}, output_names=tuple(p.name for p in signature.outputs), seed=seed)

    return make_inputs, notes


def pointer_sizes(
    signature: SolveSignature,
    dims: Mapping[str, Any],
    ptr_sizes: Mapping[str, str],
    ptr_size: str | None,
) -> dict[str, tuple[int, str]]:
    """Element count of every pointer, and how it was chosen.

    Per-pointer ``--ptr-size name=EXPR`` first, then one ``--ptr-size=EXPR`` for all, else the
    default rule: the product of every integer scalar parameter of ``solve`` (M*N for
    ``solve(in, out, M, N)``), which never under-sizes a buffer indexed by those dimensions.
    """
    unknown = set(ptr_sizes) - {p.name for p in signature.pointers}
    if unknown:
        raise SignatureError(
            f"--ptr-size names {', '.join(sorted(unknown))}, which solve() has no pointer called",
            hint=f"pointers are: {', '.join(p.name for p in signature.pointers)}",
        )
    integer_dims = {k: v for k, v in dims.items() if isinstance(v, int)}
    sizes: dict[str, tuple[int, str]] = {}
    for param in signature.pointers:
        if param.name in ptr_sizes:
            expression = ptr_sizes[param.name]
            sizes[param.name] = (evaluate_size_expression(expression, integer_dims), f"--ptr-size {param.name}={expression}")
        elif ptr_size is not None:
            sizes[param.name] = (evaluate_size_expression(ptr_size, integer_dims), f"--ptr-size={ptr_size}")
        else:
            factors = [p.name for p in signature.scalars if p.is_integer]
            if not factors:
                raise SignatureError(
                    f"cannot size pointer '{param.name}': solve() has no integer parameters",
                    hint=f"pass --ptr-size {param.name}=EXPR or define setup() in ref.py",
                )
            for name in factors:
                _scalar_value(name, dims)
            expression = "*".join(factors)
            sizes[param.name] = (evaluate_size_expression(expression, integer_dims), f"default rule: {expression}")
    return sizes


def _scalar_value(name: str, dims: Mapping[str, Any]) -> Any:
    if name not in dims:
        raise SignatureError(
            f"solve() parameter '{name}' has no value",
            hint=f"pass --{name}=VALUE (or return it from setup() in ref.py)",
        )
    return dims[name]


def _check_setup_against_signature(inputs: InputSet, signature: SolveSignature, ref_name: str) -> None:
    for param in signature.params:
        value = inputs.kwargs.get(param.name)
        if value is None:
            raise SignatureError(
                f"solve() parameter '{param.name}' has no value: {ref_name} setup() does not return it",
                hint=f"add '{param.name}' to setup()['inputs'] or pass --{param.name}=VALUE",
            )
        if isinstance(param, PointerParam):
            if not isinstance(value, torch.Tensor):
                raise SignatureError(f"solve() takes a pointer for '{param.name}' but setup() gives {type(value).__name__}")
            if value.dtype != param.torch_dtype:
                raise SignatureError(
                    f"solve() takes {param.c_type}* for '{param.name}' but setup() gives a "
                    f"{str(value.dtype).removeprefix('torch.')} tensor"
                )
            if not value.is_contiguous():
                raise SignatureError(f"setup() input '{param.name}' is not contiguous; solve() needs a flat buffer")
