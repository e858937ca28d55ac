"""torch's process-wide settings, saved before user code runs and put back after it.

Base, head and the baselines run in one worker. A solution that calls
``torch.set_default_dtype(torch.float64)`` would otherwise make every later reference call (the
eager baseline's included) run in float64: slower, and an inflated speedup for the solution.
The worker saves these settings once and restores them after every stretch of user code,
outside the timed region, and notes which variant changed what.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch


@dataclass(frozen=True, slots=True)
class _Setting:
    name: str
    read: Callable[[], object]
    write: Callable[[object], None]


def _set_default_device(device: object) -> None:
    # The CPU is torch's default without any device context; setting it explicitly would
    # install a TorchFunctionMode that slows every later torch call.
    torch.set_default_device(None if device == torch.device("cpu") else device)  # type: ignore[arg-type]


def _set_deterministic(value: object) -> None:
    enabled, warn_only = cast(tuple[bool, bool], value)
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _set_grad_mode(value: object) -> None:
    torch.set_grad_enabled(bool(value))


def _attribute(owner: object, attribute: str) -> tuple[Callable[[], object], Callable[[object], None]]:
    return (lambda: getattr(owner, attribute)), (lambda value: setattr(owner, attribute, value))


# The order is the restore order: the matmul precision sets allow_tf32 as a side effect, so the
# flag comes after it.
_SETTINGS: tuple[_Setting, ...] = (
    _Setting("default dtype", torch.get_default_dtype, lambda value: torch.set_default_dtype(value)),  # type: ignore[arg-type]
    _Setting("default device", torch.get_default_device, _set_default_device),
    _Setting("grad mode", torch.is_grad_enabled, _set_grad_mode),
    _Setting("float32 matmul precision", torch.get_float32_matmul_precision,
             lambda value: torch.set_float32_matmul_precision(str(value))),
    _Setting("deterministic algorithms",
             lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
             _set_deterministic),
    _Setting("cuda.matmul.allow_tf32", *_attribute(torch.backends.cuda.matmul, "allow_tf32")),
    _Setting("cuda.matmul.allow_fp16_reduced_precision_reduction",
             *_attribute(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction")),
    _Setting("cuda.matmul.allow_bf16_reduced_precision_reduction",
             *_attribute(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction")),
    _Setting("cudnn.enabled", *_attribute(torch.backends.cudnn, "enabled")),
    _Setting("cudnn.allow_tf32", *_attribute(torch.backends.cudnn, "allow_tf32")),
    _Setting("cudnn.benchmark", *_attribute(torch.backends.cudnn, "benchmark")),
    _Setting("cudnn.deterministic", *_attribute(torch.backends.cudnn, "deterministic")),
)


@dataclass(frozen=True, slots=True)
class TorchGlobals:
    """The values of every setting above, in their order."""

    values: tuple[object, ...]

    @staticmethod
    def capture() -> TorchGlobals:
        return TorchGlobals(tuple(setting.read() for setting in _SETTINGS))

    def restore(self) -> tuple[str, ...]:
        """Put every setting back; return what had changed, as "name: saved -> found"."""
        changed = []
        for setting, saved in zip(_SETTINGS, self.values, strict=True):
            found = setting.read()
            if found != saved:
                changed.append(f"{setting.name}: {_show(saved)} -> {_show(found)}")
                setting.write(saved)
        return tuple(changed)


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return "/".join(_show(v) for v in value)
    return str(value).removeprefix("torch.")
