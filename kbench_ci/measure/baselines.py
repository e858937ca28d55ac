"""Baselines a solution is compared with: the eager reference, torch.compile and flashinfer.

Each is the user's ``reference()`` run differently; all of them are checked against the eager
reference like the solution, and a baseline that cannot run here is reported as unavailable
for its column instead of stopping the run.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from typing import Any

import torch

from kbench_ci.errors import UsageError
from kbench_ci.measure.impls import Kernel
from kbench_ci.measure.usercode import Problem, collect_outputs, kwargs_filter

BASELINES = ("pytorch-eager", "torch-compile", "flashinfer")
_BASELINE_ALIASES = {"eager": "pytorch-eager", "pytorch": "pytorch-eager", "compile": "torch-compile", "torch.compile": "torch-compile"}


class BaselineUnavailable(Exception):
    """This baseline cannot run here; the message says why and goes in its report column."""


def parse_baselines(text: str | None) -> tuple[str, ...]:
    """``--baselines`` value: a comma list, ``all`` or ``none``; unknown names are errors."""
    if text is None or text.strip().lower() in ("", "none"):
        return ()
    if text.strip().lower() == "all":
        return BASELINES
    names: list[str] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if not name:
            continue
        name = _BASELINE_ALIASES.get(name, name)
        if name not in BASELINES:
            raise UsageError(f"unknown baseline '{raw.strip()}'", hint=f"use a comma list of {', '.join(BASELINES)}, 'all' or 'none'")
        if name in names:
            raise UsageError(f'--baselines lists "{name}" twice', hint="name each baseline once")
        names.append(name)
    return tuple(names)


def _reference_call(problem: Problem, extra: dict[str, Any] | None = None) -> Callable[[dict[str, Any]], Any]:
    reference = problem.reference
    accepted = kwargs_filter(reference)  # read once: this runs on every timed call

    def call(kwargs: dict[str, Any]) -> Any:
        arguments = accepted(kwargs)
        if extra:
            arguments.update(extra)
        return reference(**arguments)

    return call


def _collect(problem: Problem, label: str) -> Callable[[Any, Any, tuple[str, ...]], dict[str, Any]]:
    def collect(result: Any, kwargs: Any, names: tuple[str, ...]) -> dict[str, Any]:
        return collect_outputs(result, kwargs, names, what=f"{label} ({problem.path.name} reference())")

    return collect


def load_baseline(name: str, problem: Problem, device: torch.device) -> Kernel:
    if name == "pytorch-eager":
        return Kernel(label=name, kind=name, call=_reference_call(problem), collect=_collect(problem, name))
    if name == "torch-compile":
        # dynamic=False: one graph specialised to this shape, compiled on the first call, which
        # the harness times separately and keeps out of the samples.
        compiled = torch.compile(problem.reference, dynamic=False)
        accepted = kwargs_filter(problem.reference)

        def call(kwargs: dict[str, Any]) -> Any:
            return compiled(**accepted(kwargs))

        return Kernel(label=name, kind=name, call=call, collect=_collect(problem, name))
    if name == "flashinfer":
        if importlib.util.find_spec("flashinfer") is None:
            raise BaselineUnavailable("flashinfer is not installed (pip install 'kbench-ci[flashinfer]')")
        if device.type != "cuda":
            raise BaselineUnavailable("flashinfer needs a CUDA GPU")
        if not _accepts_keyword(problem.reference, "baseline"):
            raise BaselineUnavailable(
                f"{problem.path.name} reference() takes no 'baseline' argument; add baseline=None and a flashinfer branch"
            )
        return Kernel(
            label=name, kind=name, call=_reference_call(problem, {"baseline": "flashinfer"}), collect=_collect(problem, name)
        )
    raise UsageError(f"unknown baseline '{name}'", hint=f"use one of {', '.join(BASELINES)}")


def _accepts_keyword(function: Any, keyword: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == keyword or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
