"""The Triton kernels a solution's module holds, read by their attributes
(Triton 3's JITFunction.device_caches, Triton 2's cache, an Autotuner's best_config and fn, a
Heuristics wrapper's fn) — fakes with those attributes, since a compiled kernel needs a GPU."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

from kbench_ci.measure.compiled import triton_kernels

Metadata = namedtuple("Metadata", "shared num_warps num_stages name")


@dataclass
class FakeCompiled:
    name: str
    n_regs: int
    n_spills: int
    metadata: Any


@dataclass
class FakeJit:
    __name__: str
    device_caches: dict = field(default_factory=dict)

    def run(self) -> None: ...


@dataclass
class FakeConfig:
    kwargs: dict
    num_warps: int
    num_stages: int

    def __str__(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in self.kwargs.items()) + f", num_warps: {self.num_warps}, num_stages: {self.num_stages}"


@dataclass
class FakeAutotuner:
    fn: Any
    best_config: Any

    def run(self) -> None: ...


@dataclass
class FakeHeuristics:
    fn: Any

    def run(self) -> None: ...


def compiled(name: str, regs: int, spills: int, shared: int, warps: int, stages: int) -> FakeCompiled:
    return FakeCompiled(name, regs, spills, Metadata(shared, warps, stages, name))


def test_an_autotuned_kernel_reports_the_compiled_version_of_its_pick() -> None:
    jit = FakeJit("matmul_kernel", {0: ({
        "k1": compiled("matmul_kernel", 128, 0, 65536, 4, 3),
        "k2": compiled("matmul_kernel", 207, 12, 147456, 8, 4),
        "k3": compiled("matmul_kernel", 96, 0, 32768, 4, 5),
    }, "target", "backend", "binder")})
    pick = FakeConfig({"BLOCK_M": 128, "BLOCK_N": 256}, num_warps=8, num_stages=4)
    namespace = {"matmul_kernel": FakeAutotuner(FakeHeuristics(jit), pick), "torch": object(), "N": 3}
    (kernel,) = triton_kernels(namespace)
    assert (kernel.name, kernel.registers, kernel.spill_stores, kernel.shared_bytes, kernel.num_warps,
            kernel.num_stages, kernel.versions) == ("matmul_kernel", 207, 12, 147456, 8, 4, 3)
    assert kernel.autotune_pick == "BLOCK_M: 128, BLOCK_N: 256, num_warps: 8, num_stages: 4"


def test_a_plain_jit_kernel_and_triton_2_caches_are_read_once_each() -> None:
    jit = FakeJit("softmax_kernel", {0: ({"k": compiled("softmax_kernel", 40, 0, 2048, 4, 2)}, None)})
    old = type("OldJit", (), {"cache": {0: {"k": compiled("add_kernel", 16, 0, 0, 4, 3)}}, "src": "...",
                               "run": lambda self: None, "__name__": "add_kernel"})()
    namespace = {"softmax_kernel": jit, "alias": jit, "add_kernel": old}
    kernels = {kernel.name: kernel for kernel in triton_kernels(namespace)}
    assert set(kernels) == {"softmax_kernel", "add_kernel"}
    assert kernels["softmax_kernel"].autotune_pick is None and kernels["softmax_kernel"].registers == 40
    assert kernels["add_kernel"].registers == 16 and kernels["add_kernel"].versions == 1


def test_kernels_never_compiled_and_unrelated_objects_give_nothing() -> None:
    assert triton_kernels({"k": FakeJit("never_run"), "x": 1, "cls": FakeJit, "s": "text"}) == ()


def test_a_pick_its_warps_and_stages_cannot_single_out_reports_no_figures_rather_than_anothers() -> None:
    """Found in review: configs differing only in block sizes share warps and stages."""
    jit = FakeJit("matmul_kernel", {0: ({
        "k1": compiled("matmul_kernel", 128, 0, 65536, 8, 3),
        "k2": compiled("matmul_kernel", 207, 12, 147456, 8, 3),
    }, "target")})
    pick = FakeConfig({"BLOCK_M": 128}, num_warps=8, num_stages=3)
    (kernel,) = triton_kernels({"matmul_kernel": FakeAutotuner(jit, pick)})
    assert kernel.registers is None and kernel.shared_bytes is None and kernel.spill_stores is None
    assert (kernel.num_warps, kernel.num_stages, kernel.versions) == (8, 3, 2) and kernel.autotune_pick
