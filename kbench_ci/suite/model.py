"""A loaded suite as frozen values (Suite, KernelSpec, Case) and the name tables a config may use.

The tables are plain names, not imported from ``measure``, so that loading a config never
imports torch, triton or a DSL."""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kbench_ci.suite.settings import DEFAULT_THRESHOLD, DEFAULT_TIMEOUT_S, SuiteSettings

#: implementation kinds a kernel may name; ``auto`` lets the registry pick by file type.
#: Kept here as plain names (not imported from ``impls``) so that loading a config never imports
#: torch, triton or a DSL, and a typo is reported before any of them is needed.
IMPLEMENTATIONS: tuple[str, ...] = ("auto", "cuda-cpp", "cutlass", "triton", "cute-dsl", "pytorch")


BASELINES: tuple[str, ...] = ("pytorch-eager", "torch-compile", "flashinfer")


TIMING_METHODS: tuple[str, ...] = ("cuda_event", "host_time")


CONFIG_FILENAME = "kbench.toml"


PYPROJECT_FILENAME = "pyproject.toml"


_V = TypeVar("_V")


class FrozenMapping(Mapping[str, _V]):
    """A read-only, hashable mapping that keeps insertion (file) order.

    ``types.MappingProxyType`` would be read-only too, but it is not hashable, and then neither
    would be a frozen dataclass holding one; ``Case`` is meant to be usable as a dict key.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, _V] | None = None) -> None:
        self._data: dict[str, _V] = dict(data or {})

    def __getitem__(self, key: str) -> _V:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        # Mapping equality ignores order, so the hash must too.
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenMapping({self._data!r})"


def _freeze(data: Mapping[str, _V]) -> FrozenMapping[_V]:
    return data if isinstance(data, FrozenMapping) else FrozenMapping(data)


@dataclass(frozen=True, slots=True)
class KernelSpec:
    """One ``[[kernels]]`` entry with the suite defaults already applied.

    ``solution`` and ``ref`` are the config's paths joined to the suite root. ``__post_init__``
    only freezes containers (so code and tests may pass plain dicts and lists); the values
    themselves are validated by :func:`load_suite`, where an error can name the file and line.
    """

    name: str
    solution: Path
    ref: Path
    implementation: str
    shapes: tuple[Mapping[str, int], ...]
    baselines: tuple[str, ...] = ()
    atol: float | None = None
    rtol: float | None = None
    ptr_sizes: Mapping[str, str] = field(default_factory=FrozenMapping)
    ptr_size: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    build: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: the work one call must do, as expressions over the dims (``bytes = "3*N*4"``): the speed
    #: of light's figures, and a floor below which a time is impossible (measure/speed_of_light.py)
    bytes_expr: str | None = None
    flops_expr: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "solution", Path(self.solution))
        object.__setattr__(self, "ref", Path(self.ref))
        object.__setattr__(self, "shapes", tuple(_freeze(s) for s in self.shapes))
        object.__setattr__(self, "baselines", tuple(self.baselines))
        object.__setattr__(self, "ptr_sizes", _freeze(self.ptr_sizes))

    def build_command(self, src: Path, out: Path) -> str | None:
        """The ``build`` command with ``{src}`` and ``{out}`` replaced by shell-quoted paths.

        Plain replacement rather than ``str.format`` so that other braces in a shell command
        (``${CUDA_HOME}``, ``{a,b}``) reach the shell unchanged.
        """
        if self.build is None:
            return None
        return self.build.replace("{src}", shlex.quote(str(src))).replace(
            "{out}", shlex.quote(str(out))
        )


@dataclass(frozen=True, slots=True)
class Case:
    """One kernel at one shape: the unit that is built, checked and timed."""

    kernel: KernelSpec
    dims: Mapping[str, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", _freeze(self.dims))

    @property
    def case_id(self) -> str:
        """``name[dim=value,...]`` with the dims in file order, e.g. ``saxpy[N=2048]``."""
        dims = ",".join(f"{k}={v}" for k, v in self.dims.items())
        return f"{self.kernel.name}[{dims}]"


@dataclass(frozen=True, slots=True)
class Suite:
    """A loaded suite. ``root`` is the directory the kernel paths are relative to."""

    root: Path
    source: Path
    settings: SuiteSettings
    kernels: tuple[KernelSpec, ...]

    def cases(self) -> tuple[Case, ...]:
        """Every kernel × shape, in file order."""
        return tuple(Case(kernel, dims) for kernel in self.kernels for dims in kernel.shapes)
