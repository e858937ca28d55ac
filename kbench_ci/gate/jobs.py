"""Suite settings into worker jobs, and the checks of which kernels a suite run takes: the part
of a suite run that needs no build, no worker and no thread."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from kbench_ci.basefiles import GuardedFile
from kbench_ci.errors import EnvironmentProblem, UsageError
from kbench_ci.measure.impls import COMPILED_KINDS, resolve_implementation
from kbench_ci.results.model import MeasureSettings
from kbench_ci.suite.model import Case, KernelSpec
from kbench_ci.suite.userfiles import check_kernel_files
from kbench_ci.wire.protocol import CaseJob, SideSpec, StoppingRule


def job_timeout_s(case_timeout_s: float, job: CaseJob) -> float:
    """The time a worker job may take: the case timeout is for a case of two timed variants (a
    compare's base and head; a run's solution with one baseline, or alone), and each further
    variant (a suite baseline: torch.compile's first call alone can take a minute) adds half of it."""
    variants = len(job.sides) + len(job.baselines)
    return case_timeout_s * max(1.0, variants / 2)


def make_job(
    case: Case,
    sides: Sequence[SideSpec],
    settings: MeasureSettings,
    *,
    rounds: int | None = None,
    stopping: StoppingRule | None = None,
    accept_changed_reference: bool = False,
    placement_pad_bytes: int = 0,
    base_files: tuple[GuardedFile, ...] = (),
) -> CaseJob:
    """One worker job: the same seed and dimensions for every side, and the kernel's baselines,
    which the worker times with the first side (the base of a compare)."""
    return CaseJob(
        case_id=case.case_id,
        dims=dict(case.dims),
        sides=tuple(sides),
        baselines=tuple(case.kernel.baselines),
        settings=settings if rounds is None else replace(settings, rounds=rounds),
        stopping=stopping,
        accept_changed_reference=accept_changed_reference,
        head_reference_changed=reference_changed(sides),
        placement_pad_bytes=placement_pad_bytes,
        base_files=base_files,
    )


def reference_changed(sides: Sequence[SideSpec]) -> bool:
    """Two sides (a compare) whose ref.py files differ: the head changed what it is checked
    against (the workers read it from the job: CaseJob.head_reference_changed)."""
    return len(sides) == 2 and files_differ(sides[0].ref, sides[1].ref)


def files_differ(first: str | Path, second: str | Path) -> bool:
    """Two files whose contents differ; False where either cannot be read."""
    try:
        return Path(first).read_bytes() != Path(second).read_bytes()
    except OSError:
        return False


def select_kernels(
    kernels: Sequence[KernelSpec], names: Sequence[str], *, also_known: Sequence[str] = ()
) -> tuple[KernelSpec, ...]:
    """The kernels named by ``--kernel`` (all when none is named), in file order.

    A name that no side knows is bad usage; ``also_known`` are names that exist elsewhere (the
    base side of a compare), which select nothing here but are not an error.
    """
    if not names:
        return tuple(kernels)
    known = [k.name for k in kernels] + [n for n in also_known if n not in {k.name for k in kernels}]
    for name in names:
        if name not in known:

            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"kernels: {', '.join(known) or 'none'}"
            raise UsageError(f"--kernel {name}: no kernel of that name in the suite", hint=hint)
    wanted = set(names)
    return tuple(k for k in kernels if k.name in wanted)


def implementation_of(kernel: KernelSpec) -> str:
    """The kernel's implementation kind with ``auto`` resolved by file type."""
    return resolve_implementation(kernel.implementation, kernel.solution)


def check_runnable(kernels: Sequence[KernelSpec], device: str) -> None:
    """CUDA C++ kernels need a GPU: say so before anything is built or run."""
    if device.startswith("cuda"):
        return
    compiled = [k.name for k in kernels if implementation_of(k) in COMPILED_KINDS]
    if compiled:
        raise EnvironmentProblem(
            f"kernel(s) {', '.join(compiled)} are CUDA C++ and need a CUDA GPU; this run is on the CPU",
            hint="run on a GPU machine, or pick Triton/PyTorch kernels with --kernel NAME",
        )



def check_user_files(kernels: Sequence[KernelSpec]) -> None:
    """Each selected kernel's ref.py and Python solution read from their syntax (never imported:
    this is the parent), so that a missing ``reference()`` / ``setup()`` / ``run_kernel()`` or a
    dimension ``setup()`` needs that a shape lacks is one line per kernel and exit 2 before
    anything is built or measured, not a failure repeated for every shape."""
    check_kernel_files([
        (k.name, k.solution, k.ref, implementation_of(k) not in COMPILED_KINDS, k.shapes) for k in kernels
    ])
