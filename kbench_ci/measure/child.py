"""One case, in the process that owns the device: load, check correctness, then time.

Order matters. Every variant is checked on ``correctness_trials`` seeds (fresh inputs, outputs
poisoned, inputs snapshot) before anything is timed; a variant that fails is never timed, so it
can never look fast. Timing runs in rounds; with several variants (base and head of a compare)
the order alternates A B, B A, A B ... so clock and thermal drift hit all alike, and past the
minimum rounds a stopping rule adds batches while the verdict is undecided
(:mod:`kbench_ci.measure.schedule` plans them).

Progress and results leave through ``emit`` as typed events (:mod:`kbench_ci.wire.protocol`;
the worker appends them to a file the parent reads), each variant's result as soon as it is
final. :func:`serve` at the end is the worker's loop: one case after another in one process.
"""

from __future__ import annotations

import copy
import functools
import gc
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import torch

from kbench_ci.errors import EnvironmentProblem, ExitCode, KbenchError
from kbench_ci.measure import baselines as baseline_registry
from kbench_ci.measure.correctness import changed_reference_ruling, compare_outputs, tolerance_function
from kbench_ci.measure.cupti import first_line
from kbench_ci.measure.gpu_info import capture_environment, read_gpu_state
from kbench_ci.measure.impls import COMPILED_KINDS, Solution
from kbench_ci.measure.impls.cuda_solution import load_cuda_solution
from kbench_ci.measure.impls.python_solution import SetupFailed, load_python_solution
from kbench_ci.measure.inputs import InputSet, changed_inputs
from kbench_ci.measure.isolation import ProcessBaseline, private_libraries
from kbench_ci.measure.rounds import time_in_rounds
from kbench_ci.measure.torch_state import TorchGlobals
from kbench_ci.measure.usercode import Problem, import_quietly, load_problem
from kbench_ci.measure.variant import (
    CudaContextLost,
    Emit,
    Variant,
    call_on_poisoned_outputs,
    describe_error,
    emit_load_error,
    expected_outputs,
    fail,
    note_changes,
    raise_if_context_lost,
    setup_failure,
    sync,
    usage_failure,
)
from kbench_ci.results.model import CorrectnessResult, Tolerance, TrialCheck, VariantResult, VariantStatus
from kbench_ci.results.schema import to_jsonable
from kbench_ci.wire.protocol import (
    CONTEXT_LOST_EXIT,
    Begin,
    CaseFinished,
    CaseJob,
    CaseStarted,
    EnvironmentReport,
    GpuStateReport,
    JobTicket,
    Progress,
    SideSpec,
    VariantDone,
    WorkerEvent,
    encode_event,
)


def warm_up(device_name: str, preload: Sequence[str] = ()) -> None:
    """What every case would do first, done while the parent still sets up (git worktrees,
    builds): the CUDA context on ``device_name``, the environment report, NVML, and the modules
    in ``preload`` (``triton``: ~0.5 s to import). Nothing here may fail the worker: a broken
    device or package is reported by the case that needs it, with its own message (a module
    that fails to import is taken out of ``sys.modules`` again, so the case imports it afresh)."""
    try:
        device = torch.device(device_name)
        if device.type == "cuda":
            torch.cuda.set_device(device)
            torch.empty(1, device=device)  # creates the context
        _environment(device)  # starts NVML too (the driver version)
    except Exception:  # noqa: BLE001, S110  (see above: the case reports it)
        pass
    import_quietly(preload)


def _environment(device: torch.device) -> dict[str, Any]:
    """The machine as results.json records it, a copy of its own for each caller: the same for
    every case of this worker, so read once (the driver and package versions cost tens of ms
    each to look up)."""
    return copy.deepcopy(_environment_once(device))


@functools.cache
def _environment_once(device: torch.device) -> dict[str, Any]:
    return to_jsonable(capture_environment(device))  # type: ignore[no-any-return]


def _device_problem(device: torch.device) -> EnvironmentProblem | None:
    """A CUDA device this torch cannot use: a CPU-only build the parent could not tell from its
    files, a driver too old for the CUDA torch was built with, an index past the last GPU. The
    machine's problem (exit 3), not the kernel's: it must not read as a crash of the case."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.init()  # type: ignore[no-untyped-call]
        count = torch.cuda.device_count()
    except Exception as exc:  # noqa: BLE001  (torch's words are the message)
        reason = first_line(exc)
    else:
        if (device.index or 0) < count:
            return None
        reason = f"it sees {count} CUDA device(s)"
    return EnvironmentProblem(
        f"torch {torch.__version__} in the worker cannot use {device}: {reason}",
        hint="install a CUDA build of torch that this machine's driver supports, or use --device cpu",
    )


#: intra-op threads of a CPU-mode worker (see run_case)
CPU_THREADS = 1


def run_case(job: CaseJob, emit: Emit) -> None:
    device = torch.device(job.settings.device)
    problem = _device_problem(device)
    if problem is not None:
        emit_load_error(job.sides[0].label, problem, emit)
        for label in job.variant_labels():
            emit(VariantDone(job.failed_result(label, problem.one_line())))
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    else:
        # One intra-op thread on the CPU: torch's threads spin-wait for each other, so one busy
        # process elsewhere on a 2-core machine made a 768^3 matmul 8-10x slower and its times
        # swing 2x from call to call (16-38 ms against 2.7 ms), which hid replayed results from
        # the memoisation probe. One thread keeps a free core to itself.
        torch.set_num_threads(CPU_THREADS)
    emit(EnvironmentReport(_environment(device)))
    if device.type == "cuda":
        emit(GpuStateReport("before", to_jsonable(read_gpu_state(device))))
    # Held until the case ends, so every buffer of this case lies elsewhere than last time.
    placement_pad = torch.empty(job.placement_pad_bytes, dtype=torch.uint8, device=device) if job.placement_pad_bytes else None

    variants = _load_variants(job, device, emit)
    for variant in variants:
        if variant.result.status == "ok":
            _first_call(variant, job, device, emit)
    for variant in variants:
        if variant.result.status == "ok":
            _check_correctness(variant, job, device, emit)
    _check_head_against_base_reference(variants, job, device, emit)
    timed = _to_time(variants, job)
    # Variants that will not be timed are final now: report them before timing starts.
    for variant in variants:
        if not any(variant is chosen for chosen in timed):
            emit(VariantDone(variant.result))
    if timed:
        time_in_rounds(timed, job, device, emit)
        for variant in timed:
            emit(VariantDone(variant.result))
    if device.type == "cuda":
        emit(GpuStateReport("after", to_jsonable(read_gpu_state(device))))
    del placement_pad


def _load_variants(job: CaseJob, device: torch.device, emit: Emit) -> list[Variant]:
    variants: list[Variant] = []
    torch_globals = TorchGlobals.capture()
    base_tolerance_for: Callable[[torch.dtype], Tolerance] | None = None
    # Baselines are timed with the first side that loads: the solution of bench and run, the
    # base of a compare (sides are (base, head)), so a pull request that changes ref.py cannot
    # change what its speed-ups are measured against.
    host = 0
    for index, side in enumerate(job.sides):
        # A skipped side (it crashed an earlier worker) is still loaded when baselines need its
        # inputs; only its own kernel is left out.
        if side.label in job.skip and (index != host or not job.baselines):
            continue
        if side.label not in job.skip:
            emit(Begin(side.label, "load"))
        ref_loaded = False
        try:
            problem = load_problem(Path(side.ref))
            ref_loaded = True
            solution = load_solution(side, problem, job, device)
        except KbenchError as exc:
            torch_globals.restore()
            # A side that cannot load is an error of that side only (a compare reports it).
            emit(VariantDone(job.failed_result(side.label, exc.one_line())))
            # A ref.py that cannot load is the user's (run and compare exit 2 for it, on either
            # side); a solution that cannot load is its kernel's.
            broken_ref = not ref_loaded and exc.exit_code == ExitCode.USAGE
            if index == 0 or broken_ref:
                emit_load_error(side.label, exc, emit, blame="user" if broken_ref else "kernel")
            if index == host:
                host += 1  # the next side times the baselines
            continue
        tolerance_for = own_tolerance_for = tolerance_function(side, problem)
        if index == 0 and len(job.sides) == 2:
            base_tolerance_for = tolerance_for
        elif index == 1 and base_tolerance_for is not None:
            # Comparing versions means one tolerance: the head is checked at the base's (its
            # ref.py or config), so a looser atol in the head's ref.py cannot let it pass.
            tolerance_for = _as_base_tolerance(base_tolerance_for)
        changed_at_import = torch_globals.restore()
        if side.label not in job.skip:
            variants.append(Variant(
                side.label, side.implementation, "solution", side, problem, solution, solution.kernel, tolerance_for,
                VariantResult(label=side.label, kind=side.implementation, role="solution", status="ok", notes=solution.notes),
                torch_globals, own_tolerance_for if tolerance_for is not own_tolerance_for else None,
            ))
            note_changes(variants[-1], changed_at_import)
        if index != host:
            continue
        for name in job.baselines:
            if name in job.skip:
                continue
            emit(Begin(name, "load"))
            try:
                kernel = baseline_registry.load_baseline(name, problem, device)
                result = VariantResult(label=name, kind=name, role="baseline", status="ok")
            except baseline_registry.BaselineUnavailable as exc:
                kernel = None
                result = VariantResult(label=name, kind=name, role="baseline", status="unavailable", message=str(exc))
            except Exception as exc:  # a user's reference that breaks torch.compile, say
                kernel = None
                result = VariantResult(label=name, kind=name, role="baseline", status="error", message=describe_error(exc))
            variants.append(Variant(
                name, name, "baseline", side, problem, solution, kernel, tolerance_for, result, torch_globals,  # type: ignore[arg-type]
            ))
            variants[-1].settle()
    return variants


def load_solution(side: SideSpec, problem: Problem, job: CaseJob, device: torch.device) -> Solution:
    """One side's solution, loaded as the worker loads it (also measure/profile_call.py)."""
    path = Path(side.solution)
    if side.implementation in COMPILED_KINDS:

        return load_cuda_solution(
            path, kind=side.implementation, label=side.label, problem=problem, dims=job.dims, device=device,
            ptr_sizes=side.ptr_sizes, ptr_size=side.ptr_size,
        )

    return load_python_solution(path, kind=side.implementation, label=side.label, dims=job.dims, device=device)


def _as_base_tolerance(base_tolerance_for: Callable[[torch.dtype], Tolerance]) -> Callable[[torch.dtype], Tolerance]:
    def tolerance_for(dtype: torch.dtype) -> Tolerance:
        tolerance = base_tolerance_for(dtype)
        return replace(tolerance, source=f"the base's: {tolerance.source}")

    return tolerance_for


def _make_inputs(variant: Variant, seed: int, job: CaseJob, device: torch.device, emit: Emit) -> InputSet | None:
    """The variant's inputs at ``seed``; None when they could not be made (the variant then
    failed, with setup() named and blamed where it belongs: :func:`setup_failure`)."""
    try:
        return variant.solution.make_inputs(seed)
    except SetupFailed as exc:
        raise_if_context_lost(exc.cause, device)
        setup_failure(variant, exc, job.dims, emit)
    except KbenchError as exc:
        usage_failure(variant, exc, emit)
    except Exception as exc:
        raise_if_context_lost(exc, device)
        fail(variant, "error", f"preparing the inputs failed (seed {seed}): {describe_error(exc)}")
    finally:
        variant.settle()
    return None


def _first_call(variant: Variant, job: CaseJob, device: torch.device, emit: Emit) -> None:
    """Run compile steps and one untimed call, timing each apart from the samples."""
    emit(Begin(variant.label, "compile"))
    inputs = _make_inputs(variant, job.settings.seed, job, device, emit)
    if inputs is None:
        return
    try:
        kwargs = inputs.fresh_copy()
        compile_ms = None
        sync(device)
        if variant.kernel.compile is not None:
            t0 = time.perf_counter()
            variant.kernel.compile(kwargs)
            sync(device)
            compile_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        variant.kernel.call(kwargs)
        sync(device)
        first_call_ms = (time.perf_counter() - t0) * 1e3
    except KbenchError as exc:
        usage_failure(variant, exc, emit)
        return
    except Exception as exc:
        raise_if_context_lost(exc, device)
        fail(variant, "error", f"first call failed: {describe_error(exc)}")
        return
    finally:
        variant.settle()
    variant.result = replace(variant.result, first_call_ms=first_call_ms, compile_ms=compile_ms)


def _check_once(
    variant: Variant, inputs: InputSet, expected: Mapping[str, torch.Tensor], device: torch.device
) -> tuple[TrialCheck, dict[str, Any] | None]:
    """The trial's check, and the outputs it checked (None when the call raised)."""
    kwargs = inputs.fresh_copy()
    try:
        snapshot = call_on_poisoned_outputs(variant, kwargs, inputs, device)
    except Exception as exc:
        raise_if_context_lost(exc, device)
        return TrialCheck(seed=inputs.seed, outputs=(), error=f"raised {describe_error(exc)}"), None
    modified = changed_inputs(inputs.kwargs, kwargs, inputs.output_names)
    checks = compare_outputs(snapshot, expected, variant.tolerance_for)
    return TrialCheck(seed=inputs.seed, outputs=checks, modified_inputs=modified), snapshot


def _check_correctness(variant: Variant, job: CaseJob, device: torch.device, emit: Emit) -> None:
    trials: list[TrialCheck] = []
    checked: list[tuple[dict[str, Any] | None, Mapping[str, torch.Tensor]]] = []  # (outputs, expected) per trial
    for trial in range(job.settings.correctness_trials):
        emit(Progress(variant.label, "correctness", trial, job.settings.correctness_trials))
        emit(Begin(variant.label, "correctness"))
        seed = job.settings.trial_seeds[trial]
        inputs = _make_inputs(variant, seed, job, device, emit)
        if inputs is None:
            return
        try:
            # The reference is what every kernel is checked against: its failure is the ref.py's
            # (exit 2), not the solution's (expected_outputs says which).
            expected = expected_outputs(variant, inputs, device, emit=emit)
        except KbenchError as exc:
            usage_failure(variant, exc, emit)
            return
        finally:
            variant.settle()
        check, outputs = _check_once(variant, inputs, expected, device)
        trials.append(check)
        checked.append((outputs, expected))
        variant.settle()
    result = CorrectnessResult(trials=tuple(trials))
    status: VariantStatus = "ok" if result.passed else "incorrect"
    message = result.first_failure()
    if not result.passed and variant.own_tolerance_for is not None and _passes_at(variant.own_tolerance_for, trials, checked):
        message = f"passes only with the head's looser tolerance ({_looser(variant, trials, checked)}): {message}"
    variant.result = replace(variant.result, status=status, correctness=result, message=message)


def _check_head_against_base_reference(variants: list[Variant], job: CaseJob, device: torch.device, emit: Emit) -> None:
    """A compare whose head changed ref.py (its reference or setup): the head's solution is also
    checked on the base's inputs against the base's reference, so a pull request cannot pass by
    moving the goalposts. A head that passes only its own new reference is ``incorrect`` unless
    the case is accepted (``job.accept_changed_reference``); a base reference that cannot take
    the head's solution (another interface) is said, not failed."""
    solutions = [v for v in variants if v.role == "solution"]
    if len(job.sides) != 2 or len(solutions) != 2 or solutions[1].result.status != "ok":
        return
    base, head = solutions
    if base.side.label != job.sides[0].label or not job.head_reference_changed:
        return
    probe = replace(head, role="cross-check", problem=base.problem, solution=base.solution, result=head.result)
    _check_correctness(probe, job, device, emit)
    head.settle()
    checked = probe.result
    fails, words = changed_reference_ruling(checked.status, checked.message, accepted=job.accept_changed_reference)
    if fails:
        fail(head, "incorrect", words)
    else:
        _add_note(head, words)


def _to_time(variants: list[Variant], job: CaseJob) -> list[Variant]:
    """The variants to time: each that passed its checks, unless :meth:`CaseJob.why_not_timed`
    says why not. Those stay ``ok``, with ``not_timed`` saying why."""
    passed = [variant for variant in variants if variant.result.status == "ok"]
    reason = job.why_not_timed({variant.label: variant.result.status for variant in variants})
    if reason is None:
        return passed
    for variant in passed:
        variant.result = replace(variant.result, not_timed=reason)
    return []


def _add_note(variant: Variant, note: str) -> None:
    variant.result = replace(variant.result, notes=(*variant.result.notes, note))


def _passes_at(
    tolerance_for: Callable[[torch.dtype], Tolerance],
    trials: list[TrialCheck],
    checked: list[tuple[dict[str, Any] | None, Mapping[str, torch.Tensor]]],
) -> bool:
    """Would every trial have passed at ``tolerance_for`` (the same outputs, the same inputs)?"""
    for trial, (outputs, expected) in zip(trials, checked, strict=True):
        if outputs is None or trial.modified_inputs:
            return False
        if not all(check.passed for check in compare_outputs(outputs, expected, tolerance_for)):
            return False
    return True


def _looser(
    variant: Variant, trials: list[TrialCheck], checked: list[tuple[dict[str, Any] | None, Mapping[str, torch.Tensor]]]
) -> str:
    """"atol 0.01 vs 0.0001" for the first failed output: the head's own tolerance vs the base's."""
    assert variant.own_tolerance_for is not None
    trial, (outputs, _) = next(
        (t, pair) for t, pair in zip(trials, checked, strict=True) if any(not c.passed for c in t.outputs)
    )
    name = next(check.name for check in trial.outputs if not check.passed)
    value = (outputs or {}).get(name)
    dtype = value.dtype if isinstance(value, torch.Tensor) else torch.float32
    own, base = variant.own_tolerance_for(dtype), variant.tolerance_for(dtype)
    return ", ".join(
        f"{what} {mine:g} vs {theirs:g}"
        for what, mine, theirs in (("atol", own.atol, base.atol), ("rtol", own.rtol, base.rtol))
        if mine != theirs
    )




def serve(next_ticket: Callable[[], JobTicket]) -> int:
    """The worker process: case after case, each from a :class:`JobTicket`, until the parent
    closes the pipe (the lifeline then ends this process) or a case leaves it unfit to serve
    another (:class:`CaseFinished` with ``retire``; the parent starts a fresh worker).

    Every job's events go to its own file, framed by :class:`CaseStarted` and
    :class:`CaseFinished`: the parent reads the case as done at ``CaseFinished``, not when the
    process ends. Between cases, :meth:`ProcessBaseline.after_case` takes away what the case
    left (:mod:`kbench_ci.measure.isolation`).
    """
    # User code runs from here on: none of it is written as bytecode, whatever the environment
    # says (a warm worker starts before the parent sets PYTHONDONTWRITEBYTECODE, and none may
    # appear beside a kernel), nor into a cache folder's prefix, where a kernel rewritten to the
    # same size within the same second would pass for current. torch and the preloaded modules
    # are imported by now; their bytecode is the environment's business.
    sys.dont_write_bytecode = True
    baseline = ProcessBaseline.capture()
    gc.collect()  # the imports' and the warm-up's garbage goes now, not into the frozen set
    # Everything alive now (torch, triton, the warm-up's objects) is the worker's own and lives
    # as long as it: out of the collector's sight, so the full collection after each case
    # (ProcessBaseline.after_case) scans only what the case made: ~0.1 ms, not ~100 ms.
    gc.freeze()
    served = 0
    while True:
        ticket = next_ticket()
        job = CaseJob.from_json(Path(ticket.job_path).read_text(encoding="utf-8"))
        # Each side's .so from a path of this case's own: a loaded library keeps its statics.
        job = private_libraries(job, Path(ticket.events_path).parent / "libraries")
        modules_before = frozenset(sys.modules)
        with open(ticket.events_path, "a", encoding="utf-8") as events:

            def emit(event: WorkerEvent, events: TextIO = events) -> None:
                events.write(encode_event(event) + "\n")
                events.flush()

            emit(CaseStarted(os.getpid(), served))
            try:
                run_case(job, emit)
            except CudaContextLost as exc:
                # The parent reads the last stderr line into the incident it reports.
                sys.stderr.write(f"CUDA context lost: {exc}\n")
                sys.stderr.flush()
                return CONTEXT_LOST_EXIT
            reason = baseline.after_case(modules_before, torch.device(job.settings.device))
            served += 1
            emit(CaseFinished(retire=reason is not None, reason=reason))
        if reason is not None:
            return 0
