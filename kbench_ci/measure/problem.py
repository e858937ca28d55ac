"""ref.py: ``reference(**kwargs)``, an optional ``setup(**dims)``, optional ``atol`` / ``rtol``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kbench_ci.errors import UserFileError
from kbench_ci.measure.usercode import load_module, require_function


@dataclass(frozen=True, slots=True)
class Problem:
    path: Path
    reference: Callable[..., Any]
    setup: Callable[..., Any] | None
    atol: float | None
    rtol: float | None


def load_problem(path: Path) -> Problem:
    module = load_module(path, role="ref")
    reference = require_function(module, "reference", role="ref", path=path)
    setup = getattr(module, "setup", None)
    return Problem(
        path=path,
        reference=reference,
        setup=setup if callable(setup) else None,
        atol=_tolerance(module, "atol", path),
        rtol=_tolerance(module, "rtol", path),
    )


def _tolerance(module: object, name: str, path: Path) -> float | None:
    value = getattr(module, name, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise UserFileError(f"{path.name}: {name} must be a non-negative number, got {value!r}")
    return float(value)


def collect_outputs(
    result: Any, kwargs: Mapping[str, Any], output_names: Sequence[str], *, what: str
) -> dict[str, torch.Tensor]:
    """Map what a reference (or baseline) returned onto the output names.

    None: outputs were updated in place. A tensor: the only output. A tuple/list: outputs in
    order. A dict: by name.
    """
    names = tuple(output_names)
    if result is None:
        return {name: kwargs[name] for name in names}
    if isinstance(result, torch.Tensor):
        if len(names) != 1:
            raise UserFileError(
                f"{what} returned one tensor but there are {len(names)} outputs ({', '.join(names)})",
                hint="return a tuple in output order or a dict keyed by output name",
            )
        return {names[0]: result}
    if isinstance(result, Mapping):
        missing = [name for name in names if name not in result]
        if missing:
            raise UserFileError(f"{what} returned a dict without output(s) {', '.join(missing)}")
        return {name: result[name] for name in names}
    if isinstance(result, (tuple, list)):
        if len(result) != len(names):
            raise UserFileError(
                f"{what} returned {len(result)} values but there are {len(names)} outputs ({', '.join(names)})"
            )
        return dict(zip(names, result))
    raise UserFileError(
        f"{what} returned {type(result).__name__}; expected None (in place), a tensor, a tuple or a dict"
    )
