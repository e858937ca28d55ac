"""One case, in the process that owns the device: load, check correctness, then time.

Order matters. Every variant is checked on ``correctness_trials`` seeds (fresh inputs, outputs
poisoned, inputs snapshot) before anything is timed; a variant that fails is never timed, so it
can never look fast. Timing runs in rounds; with several variants (base and head of a compare)
the order alternates A B, B A, A B ... so clock and thermal drift hit all alike, and past the
minimum rounds a stopping rule adds batches while the verdict is undecided
(:mod:`kbench_ci.measure.schedule` plans them).

Progress and results leave through ``emit`` as typed events (:mod:`kbench_ci.measure.protocol`;
the worker appends them to a file the parent reads), each variant's result as soon as it is
final. :func:`serve` at the end is the worker's loop: one case after another in one process.
"""

from __future__ import annotations

import copy
import functools
import gc
import importlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import torch

from kbench_ci.errors import EnvironmentProblem, KbenchError, UserFileError
from kbench_ci.measure import baselines as baseline_registry
from kbench_ci.measure.correctness import compare_outputs, resolve_tolerance
from kbench_ci.measure.cupti import first_line
from kbench_ci.measure.escape import (
    AuditedCallFailed,
    apply_event_residual,
    audit_together,
    describe_residual,
    residual_applies,
)
from kbench_ci.measure.gpu_info import capture_environment, read_gpu_state
from kbench_ci.measure.impls import COMPILED_KINDS, Kernel, Solution
from kbench_ci.measure.impls.cuda_solution import load_cuda_solution
from kbench_ci.measure.impls.python_solution import load_python_solution
from kbench_ci.measure.inputs import InputSet, changed_inputs, poison_outputs_, same_inputs, still_poisoned
from kbench_ci.measure.isolation import ProcessBaseline, private_libraries
from kbench_ci.measure.protocol import (
    CONTEXT_LOST_EXIT,
    Begin,
    CaseFinished,
    CaseJob,
    CaseStarted,
    EnvironmentReport,
    GpuStateReport,
    JobTicket,
    LoadError,
    Progress,
    SideSpec,
    StoppingRule,
    TimingDescription,
    VariantDone,
    WorkerEvent,
    encode_event,
)
from kbench_ci.measure.replay import AuditMaterial, AuditRecord, RoundAudit, audited_position
from kbench_ci.measure.schedule import RoundPlan
from kbench_ci.measure.timing import CudaEventTimer, Timer, make_timer
from kbench_ci.measure.torch_state import TorchGlobals
from kbench_ci.measure.usercode import Problem, accepted_kwargs, collect_outputs, load_problem
from kbench_ci.results.model import CorrectnessResult, Tolerance, TrialCheck, VariantResult, VariantStatus
from kbench_ci.results.schema import to_jsonable
from kbench_ci.stats import Verdict, classify, compare_rounds

Emit = Callable[[WorkerEvent], None]


class CudaContextLost(Exception):
    """A kernel left the CUDA context unusable (illegal address, trap); this process must end."""


@dataclass(slots=True)
class _Variant:
    label: str
    kind: str
    role: str
    side: SideSpec
    problem: Problem
    solution: Solution  # the side's input factory; for a baseline, its side's solution
    kernel: Kernel
    tolerance_for: Callable[[torch.dtype], Tolerance]
    result: VariantResult
    torch_globals: TorchGlobals  # torch's settings before any user code: put back after its calls
    #: compare's head: its own tolerance, where ``tolerance_for`` is the base's (one tolerance
    #: for both versions); used only to say that it would pass at its own, looser one
    own_tolerance_for: Callable[[torch.dtype], Tolerance] | None = None

    def settle(self) -> None:
        """Put torch's global settings back after this variant's code ran (outside any timed
        region), and note what it had changed: no other variant may inherit it."""
        _note_changes(self, self.torch_globals.restore())


def _note_changes(variant: _Variant, changes: tuple[str, ...]) -> None:
    notes = variant.result.notes
    for change in changes:
        note = f"changed torch's {change} (put back after its code, so no other variant inherits it)"
        if note not in notes:
            notes = (*notes, note)
    if notes != variant.result.notes:
        variant.result = replace(variant.result, notes=notes)


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
    for name in preload:
        before = frozenset(sys.modules)
        try:
            importlib.import_module(name)
        except (Exception, SystemExit):  # noqa: BLE001  (a package's import that exits, too)
            for module in set(sys.modules) - before:
                if module == name or module.startswith(f"{name}."):
                    del sys.modules[module]


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


def run_case(job: CaseJob, emit: Emit) -> None:
    device = torch.device(job.settings.device)
    problem = _device_problem(device)
    if problem is not None:
        _emit_load_error(job.sides[0].label, problem, emit)
        for label in job.variant_labels():
            emit(VariantDone(job.failed_result(label, problem.one_line())))
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    emit(EnvironmentReport(_environment(device)))
    if device.type == "cuda":
        emit(GpuStateReport("before", to_jsonable(read_gpu_state(device))))

    variants = _load_variants(job, device, emit)
    for variant in variants:
        if variant.result.status == "ok":
            _first_call(variant, job, device, emit)
    for variant in variants:
        if variant.result.status == "ok":
            _check_correctness(variant, job, device, emit)
    # Variants that cannot be timed are final now: report them before timing starts.
    for variant in variants:
        if variant.result.status != "ok":
            emit(VariantDone(variant.result))
    timed = [v for v in variants if v.result.status == "ok"]
    if timed:
        _time_in_rounds(timed, job, device, emit)
        for variant in timed:
            emit(VariantDone(variant.result))
    if device.type == "cuda":
        emit(GpuStateReport("after", to_jsonable(read_gpu_state(device))))


def _load_variants(job: CaseJob, device: torch.device, emit: Emit) -> list[_Variant]:
    variants: list[_Variant] = []
    torch_globals = TorchGlobals.capture()
    base_tolerance_for: Callable[[torch.dtype], Tolerance] | None = None
    # Baselines are timed against the last side: the solution of bench and run, the head of a
    # compare (sides are (base, head)); the head is the version a reviewer is asked to accept.
    host = len(job.sides) - 1
    for index, side in enumerate(job.sides):
        # A skipped side (it crashed an earlier worker) is still loaded when baselines need its
        # inputs; only its own kernel is left out.
        if side.label in job.skip and (index != host or not job.baselines):
            continue
        if side.label not in job.skip:
            emit(Begin(side.label, "load"))
        try:
            problem = load_problem(Path(side.ref))
            solution = _load_solution(side, problem, job, device)
        except KbenchError as exc:
            torch_globals.restore()
            # A side that cannot load is an error of that side only (a compare reports it).
            emit(VariantDone(job.failed_result(side.label, exc.one_line())))
            if index == 0:
                _emit_load_error(side.label, exc, emit)
            continue
        tolerance_for = own_tolerance_for = _tolerance_function(side, problem)
        if index == 0 and len(job.sides) == 2:
            base_tolerance_for = tolerance_for
        elif index == 1 and base_tolerance_for is not None:
            # Comparing versions means one tolerance: the head is checked at the base's (its
            # ref.py or config), so a looser atol in the head's ref.py cannot let it pass.
            tolerance_for = _as_base_tolerance(base_tolerance_for)
        changed_at_import = torch_globals.restore()
        if side.label not in job.skip:
            variants.append(_Variant(
                side.label, side.implementation, "solution", side, problem, solution, solution.kernel, tolerance_for,
                VariantResult(label=side.label, kind=side.implementation, role="solution", status="ok", notes=solution.notes),
                torch_globals, own_tolerance_for if tolerance_for is not own_tolerance_for else None,
            ))
            _note_changes(variants[-1], changed_at_import)
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
                result = VariantResult(label=name, kind=name, role="baseline", status="error", message=_describe(exc))
            variants.append(_Variant(
                name, name, "baseline", side, problem, solution, kernel, tolerance_for, result, torch_globals,  # type: ignore[arg-type]
            ))
            variants[-1].settle()
    return variants


def _load_solution(side: SideSpec, problem: Problem, job: CaseJob, device: torch.device) -> Solution:
    path = Path(side.solution)
    if side.implementation in COMPILED_KINDS:

        return load_cuda_solution(
            path, kind=side.implementation, label=side.label, problem=problem, dims=job.dims, device=device,
            ptr_sizes=side.ptr_sizes, ptr_size=side.ptr_size,
        )

    return load_python_solution(path, kind=side.implementation, label=side.label, dims=job.dims, device=device)


def _tolerance_function(side: SideSpec, problem: Problem) -> Callable[[torch.dtype], Tolerance]:
    def tolerance_for(dtype: torch.dtype) -> Tolerance:
        return resolve_tolerance(
            dtype, cli_atol=side.atol, cli_rtol=side.rtol, ref_atol=problem.atol, ref_rtol=problem.rtol,
            precision=side.precision,
        )

    return tolerance_for


def _as_base_tolerance(base_tolerance_for: Callable[[torch.dtype], Tolerance]) -> Callable[[torch.dtype], Tolerance]:
    def tolerance_for(dtype: torch.dtype) -> Tolerance:
        tolerance = base_tolerance_for(dtype)
        return replace(tolerance, source=f"the base's: {tolerance.source}")

    return tolerance_for


def _fail(variant: _Variant, status: str, message: str) -> None:
    variant.result = replace(variant.result, status=status, message=message)  # type: ignore[arg-type]


def _usage_failure(variant: _Variant, exc: KbenchError, emit: Emit) -> None:
    """A broken contract in the user's setup()/reference() is bad usage, not a slow kernel."""
    _fail(variant, "error", exc.one_line())
    if variant.role == "solution":
        _emit_load_error(variant.label, exc, emit)


def _emit_load_error(label: str, exc: KbenchError, emit: Emit) -> None:
    """The solution's usage error, for the CLI to turn into its message and exit code."""
    emit(LoadError(label, type(exc).__name__, int(exc.exit_code), exc.message, exc.hint))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _first_call(variant: _Variant, job: CaseJob, device: torch.device, emit: Emit) -> None:
    """Run compile steps and one untimed call, timing each apart from the samples."""
    emit(Begin(variant.label, "compile"))
    try:
        inputs = variant.solution.make_inputs(job.settings.seed)
        kwargs = inputs.fresh_copy()
        compile_ms = None
        _sync(device)
        if variant.kernel.compile is not None:
            t0 = time.perf_counter()
            variant.kernel.compile(kwargs)
            _sync(device)
            compile_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        variant.kernel.call(kwargs)
        _sync(device)
        first_call_ms = (time.perf_counter() - t0) * 1e3
    except KbenchError as exc:
        _usage_failure(variant, exc, emit)
        return
    except Exception as exc:
        _raise_if_context_lost(exc, device)
        _fail(variant, "error", f"first call failed: {_describe(exc)}")
        return
    finally:
        variant.settle()
    variant.result = replace(variant.result, first_call_ms=first_call_ms, compile_ms=compile_ms)


def _expected_outputs(variant: _Variant, inputs: InputSet, device: torch.device) -> dict[str, torch.Tensor]:
    """The eager reference's outputs on a private copy of the inputs.

    The outputs are poisoned first, as before a solution's call: an output the reference
    neither returns nor writes is the reference's fault (exit 2), not the solution's."""
    kwargs = inputs.fresh_copy()
    poison_outputs_(kwargs, inputs.output_names)
    result = variant.problem.reference(**accepted_kwargs(variant.problem.reference, kwargs))
    what = f"{variant.problem.path.name} reference()"
    outputs = collect_outputs(result, kwargs, inputs.output_names, what=what)
    _sync(device)
    for name, value in outputs.items():
        if isinstance(value, torch.Tensor) and value is kwargs.get(name) and still_poisoned(value):
            raise UserFileError(
                f"{what} produced no output for '{name}': it returned nothing for it and did not write it",
                hint=f"return {name} (or a tuple or dict of all outputs), or write it in place with {name}.copy_(...)",
            )
    return _snapshot(outputs)


def _snapshot(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Private copies of the tensors among ``outputs`` (later calls may overwrite the originals)."""
    return {name: value.detach().clone() if isinstance(value, torch.Tensor) else value for name, value in outputs.items()}


def _call_on_poisoned_outputs(
    variant: _Variant, kwargs: dict[str, Any], output_names: tuple[str, ...], device: torch.device
) -> dict[str, Any]:
    """Poison the outputs, call once, and snapshot what the call produced on the current stream.

    Only the current stream is waited for before the snapshot: work a kernel left running on
    another stream is not finished yet and shows up as poisoned output.
    """
    poison_outputs_(kwargs, output_names)
    _sync(device)
    returned = variant.kernel.call(kwargs)
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    outputs = variant.kernel.collect(returned, kwargs, output_names)
    snapshot = _snapshot(outputs)
    _sync(device)  # the whole device: a side stream's late writes must not reach the next call
    return snapshot


def _check_once(
    variant: _Variant, inputs: InputSet, expected: Mapping[str, torch.Tensor], device: torch.device
) -> tuple[TrialCheck, dict[str, Any] | None]:
    """The trial's check, and the outputs it checked (None when the call raised)."""
    kwargs = inputs.fresh_copy()
    try:
        snapshot = _call_on_poisoned_outputs(variant, kwargs, inputs.output_names, device)
    except Exception as exc:
        _raise_if_context_lost(exc, device)
        return TrialCheck(seed=inputs.seed, outputs=(), error=f"raised {_describe(exc)}"), None
    modified = changed_inputs(inputs.kwargs, kwargs, inputs.output_names)
    checks = compare_outputs(snapshot, expected, variant.tolerance_for)
    return TrialCheck(seed=inputs.seed, outputs=checks, modified_inputs=modified), snapshot


def _check_correctness(variant: _Variant, job: CaseJob, device: torch.device, emit: Emit) -> None:
    trials: list[TrialCheck] = []
    checked: list[tuple[dict[str, Any] | None, Mapping[str, torch.Tensor]]] = []  # (outputs, expected) per trial
    for trial in range(job.settings.correctness_trials):
        emit(Progress(variant.label, "correctness", trial, job.settings.correctness_trials))
        emit(Begin(variant.label, "correctness"))
        seed = job.settings.seed + trial
        try:
            inputs = variant.solution.make_inputs(seed)
            expected = _expected_outputs(variant, inputs, device)
        except KbenchError as exc:
            _usage_failure(variant, exc, emit)
            return
        except Exception as exc:
            _raise_if_context_lost(exc, device)
            _fail(variant, "error", f"preparing inputs/reference failed (seed {seed}): {_describe(exc)}")
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
    variant: _Variant, trials: list[TrialCheck], checked: list[tuple[dict[str, Any] | None, Mapping[str, torch.Tensor]]]
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


def _time_in_rounds(variants: list[_Variant], job: CaseJob, device: torch.device, emit: Emit) -> None:
    timer: Timer = make_timer(
        job.settings.timing_method, device, flush_l2=job.settings.flush_l2, event_overhead_ms=job.event_overhead_ms  # type: ignore[arg-type]
    )
    # Inputs are made once, so input generation stays out of the rounds. Variants whose inputs
    # are identical (base and head with the same setup, a solution and its baselines) share one
    # set of tensors: a buffer's placement in memory can change a kernel's time by a few
    # percent (measured on an H200: 0.976x between two allocations at N = 2^20), and with
    # separate buffers that would read as a fixed difference between the sides.
    prepared: dict[str, tuple[InputSet, dict[str, Any]]] = {}
    for variant in variants:
        inputs = variant.solution.make_inputs(job.settings.seed)
        twin = next((ready for ready in prepared.values() if same_inputs(ready[0], inputs)), None)
        prepared[variant.label] = twin if twin is not None else (inputs, inputs.fresh_copy())
    # Other versions of each timed input set, for the replay audit of the solutions timed on it.
    material: dict[int, AuditMaterial] = {}
    for variant in variants:
        inputs, kwargs = prepared[variant.label]
        if variant.role == "solution" and id(kwargs) not in material:
            material[id(kwargs)] = AuditMaterial.prepare(inputs, variant.solution.make_inputs)
    audits: dict[str, list[AuditRecord]] = {v.label: [] for v in variants}
    calls_per_round = job.settings.trials_per_round + job.settings.discard_first
    rounds: dict[str, list[tuple[float, ...]]] = {v.label: [] for v in variants}
    discarded: dict[str, list[float]] = {v.label: [] for v in variants}
    timing_started = time.perf_counter()
    plan = RoundPlan(job.settings.rounds, job.stopping)
    # The full warm-up of every variant comes before the first round, in the reverse of that
    # round's order, so that round 0 is like every later one: its first variant follows its
    # own calls, the second follows the other's, each after a short re-warm-up. (Warmed up
    # inside round 0, the head read 0.3-1% slower than the base there in A/A on an H200.)
    for variant in reversed(variants):
        emit(Begin(variant.label, "timing"))
        try:
            timer.warm_up(partial(variant.kernel.call, prepared[variant.label][1]), job.settings.num_warmup)
        except Exception as exc:
            _raise_if_context_lost(exc, device)
            _fail(variant, "error", f"failed while timing: {_describe(exc)}")
        variant.settle()
    variants = [v for v in variants if v.result.status == "ok"]
    round_index = 0
    while batch := plan.next_batch(round_index, time.perf_counter() - timing_started):
        for _ in range(batch):
            order = list(reversed(variants)) if plan.reversed_order(round_index) else variants
            total = max(job.settings.rounds, round_index + 1)
            for variant in order:
                emit(Begin(variant.label, "timing"))
                emit(Progress(variant.label, "timing", round_index, total))
                inputs, kwargs = prepared[variant.label]
                call = variant.kernel.call
                returned: list[object] = [None]  # the last call's return value, for the audit's snapshot

                def fn(
                    call: Callable[[dict[str, Any]], object] = call, kwargs: dict[str, Any] = kwargs,
                    returned: list[object] = returned,
                ) -> object:
                    returned[0] = call(kwargs)
                    return returned[0]

                audit = None
                if id(kwargs) in material and variant.role == "solution":
                    audit = RoundAudit(
                        material[id(kwargs)], kwargs,
                        audited_position(job.settings.seed, round_index, calls_per_round, job.settings.discard_first),
                        round_index,
                        collect=partial(_collect_last, variant.kernel, returned, kwargs, inputs.output_names),
                    )
                try:
                    # A short re-warm-up after another variant ran (the full one came before round 0).
                    timer.warm_up(fn, max(1, min(3, job.settings.num_warmup)))
                    samples = timer.measure(fn, calls_per_round, audit)
                except Exception as exc:
                    _raise_if_context_lost(exc, device)
                    _fail(variant, "error", f"failed while timing: {_describe(exc)}")
                    variants = [v for v in variants if v is not variant]
                    continue
                finally:
                    variant.settle()  # after the batch's end event: outside the timed calls
                rounds[variant.label].append(tuple(samples[job.settings.discard_first:]))
                discarded[variant.label].extend(samples[: job.settings.discard_first])
                if audit is not None:
                    audits[variant.label].extend(audit.records)
            round_index += 1
        if not plan.may_continue(round_index, time.perf_counter() - timing_started):
            break
        # The host computes the interim verdict now: keep the GPU at its clocks meanwhile.
        timer.keep_busy(plan.expected_check_s(round_index))
        check_started = time.perf_counter()
        decided = _verdict_decided(variants, rounds, job.stopping)  # type: ignore[arg-type]
        if decided:
            break
        plan.checked(round_index, time.perf_counter() - check_started)
    for variant in variants:  # only variants still "ok": one that failed while timing was dropped
        post_timing_check = _post_timing_check(variant, prepared[variant.label], device)  # may add a note: first
        variant.result = replace(
            variant.result,
            rounds_ms=tuple(rounds[variant.label]),
            discarded_ms=tuple(discarded[variant.label]),
            post_timing_check=post_timing_check,
        )
        if variant.result.post_timing_check is False:
            variant.result = replace(
                variant.result, status="incorrect",
                message="outputs were wrong after the timing runs (correct only when checked?)",
            )
    residual_ms: float | None = None
    if isinstance(timer, CudaEventTimer):
        # After every round of every variant: tracing cannot slow a sample that is still to come.
        _audit_escapes([v for v in variants if v.result.status == "ok"], timer, prepared, device, emit)
        residual_ms = _apply_event_residual(variants)
    # Judged after the escape audit: work that starts before the stream reaches it also reads
    # inputs before the audit's other version is copied in, and is better named as such.
    for variant in variants:
        if variant.result.status == "ok" and variant.role == "solution":
            emit(Begin(variant.label, "timing"))  # a post-timing check, as the re-check above: not the audit's time
            _check_replay_audit(variant, audits[variant.label], material[id(prepared[variant.label][1])], job, device)
    description = timer.describe()
    if isinstance(timer, CudaEventTimer):
        description += "; " + describe_residual(residual_ms)
    # results.json records the residual only where the samples were moved by it
    applied = residual_ms if residual_ms is not None and residual_applies(residual_ms) else None
    emit(TimingDescription(description, timer.event_overhead_ms, applied))


def _audit_escapes(
    variants: list[_Variant], timer: CudaEventTimer, prepared: Mapping[str, tuple[InputSet, dict[str, Any]]],
    device: torch.device, emit: Emit,
) -> None:
    """Trace the variants' timed calls under CUPTI, all in one trace: GPU work outside the
    timer makes a variant incorrect. A call that raises fails its variant, and the others are
    audited again without it."""
    by_label = {v.label: v for v in variants}

    def begin(label: str) -> None:
        emit(Begin(label, "audit"))  # a crash from here on is this variant's

    def settle(label: str) -> None:
        by_label[label].settle()  # its torch settings put back before the next variant's calls

    pending = list(variants)
    while pending:
        calls = {v.label: partial(v.kernel.call, prepared[v.label][1]) for v in pending}
        outcome = audit_together(timer, calls, before=begin, after=settle)
        if isinstance(outcome, AuditedCallFailed):
            failed = by_label[outcome.label]
            _raise_if_context_lost(outcome.error, device)
            _fail(failed, "error", f"failed while audited under CUPTI: {_describe(outcome.error)}")
            pending.remove(failed)
            continue
        for variant in pending:
            audit = outcome[variant.label]
            variant.result = replace(variant.result, escape_audit=audit)
            if audit.status == "escaped":
                _fail(variant, "incorrect", f"GPU work escaped the timer: {audit.detail}")
        return


def _apply_event_residual(variants: list[_Variant]) -> float | None:
    """Move every sample of the case to CUPTI's time of its own kernels (escape.apply_event_residual)."""
    results, residual = apply_event_residual([v.result for v in variants])
    for variant, result in zip(variants, results, strict=True):
        variant.result = result
    return residual


def _collect_last(kernel: Kernel, returned: list[object], kwargs: dict[str, Any], names: tuple[str, ...]) -> Mapping[str, Any]:
    """The outputs of the last timed call: its return value or, in place, its output tensors."""
    return kernel.collect(returned[0], kwargs, names)


def _check_replay_audit(
    variant: _Variant, records: list[AuditRecord], material: AuditMaterial, job: CaseJob, device: torch.device
) -> None:
    """Did the audited timed calls compute the outputs of the inputs they were given?"""
    if not material.versions:
        variant.result = replace(variant.result, replay_audit=f"skipped: {material.reason}")
        return
    expected_by_version: dict[int, dict[str, torch.Tensor]] = {}
    calls_per_round = job.settings.trials_per_round + job.settings.discard_first
    for record in records:
        if record.version not in expected_by_version:
            try:
                expected_by_version[record.version] = _expected_outputs(variant, material.versions[record.version], device)
            finally:
                variant.settle()
        checks = compare_outputs(record.outputs, expected_by_version[record.version], variant.tolerance_for)
        failed = next((check for check in checks if not check.passed), None)
        if failed is not None:
            call = record.round_index * calls_per_round + record.call_index
            detail = failed.problem or f"{failed.mismatched} of {failed.numel} elements differ from the reference"
            _fail(variant, "incorrect", (
                f"outputs of timed call {call} (round {record.round_index + 1}) belong to other inputs: results "
                f"replayed? (or inputs read before the stream reached the call) Its inputs were changed before the "
                f"call and output '{failed.name}' does not match "
                f"them ({detail}); compute from the inputs on every call"
            ))
            return
    variant.result = replace(variant.result, replay_audit=f"{len(records)} timed calls given other inputs: all matched")


def _verdict_decided(variants: list[_Variant], rounds: Mapping[str, list[tuple[float, ...]]], rule: StoppingRule) -> bool:
    """Is the head/base verdict at the rule's threshold decided (not inconclusive) already?"""
    sides = [v for v in variants if v.role == "solution"]
    if len(sides) != 2:  # one side failed while timing: nothing left to compare
        return True
    base, head = (rounds[v.label] for v in sides)
    quick = compare_rounds(base, head, confidence=rule.confidence, n_bootstrap=rule.check_bootstrap)
    if classify(quick, rule.threshold, alpha=rule.alpha) is Verdict.INCONCLUSIVE:
        return False
    # Decided on the cheap estimate: confirm with the one the report will compute (stats'
    # default replicates), or a borderline interval stops the rounds and is then reported
    # `inconclusive` (5 of 8 such verdicts in 10 A/A runs on an H200).
    final = compare_rounds(base, head, confidence=rule.confidence)
    return classify(final, rule.threshold, alpha=rule.alpha) is not Verdict.INCONCLUSIVE


def _post_timing_check(variant: _Variant, prepared: tuple[InputSet, dict[str, Any]], device: torch.device) -> bool | None:
    """Did the timed calls still compute the right outputs? Catches kernels that do the work only
    for the first calls and then skip it."""
    if variant.role != "solution":
        return None
    inputs, kwargs = prepared
    _sync(device)
    try:
        expected = _expected_outputs(variant, inputs, device)
        # Poisoned again, so outputs left over from earlier calls cannot pass for this one.
        outputs = _call_on_poisoned_outputs(variant, kwargs, inputs.output_names, device)
    except Exception as exc:
        _raise_if_context_lost(exc, device)
        return False
    finally:
        variant.settle()
    checks = compare_outputs(outputs, expected, variant.tolerance_for)
    return all(check.passed for check in checks)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    # Point at the user's frame, not ours: the innermost frame outside kbench_ci.
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if "kbench_ci" not in frame.filename:
            where = f" at {Path(frame.filename).name}:{frame.lineno}"
            break
    return f"{type(exc).__name__}: {first}{where}"


def _raise_if_context_lost(exc: BaseException, device: torch.device) -> None:
    """After an illegal address or a trap every later CUDA call fails; stop this worker so the
    parent can blame this variant and rerun the others in a fresh process."""
    if device.type != "cuda":
        return
    text = str(exc)
    sticky = ("illegal memory access", "illegal address", "unspecified launch failure", "device-side assert",
              "misaligned address", "illegal instruction", "CUDA error")
    if any(marker in text for marker in sticky):
        try:
            torch.cuda.synchronize(device)
            torch.zeros(1, device=device).add_(1).item()
        except Exception:
            raise CudaContextLost(_describe(exc)) from exc



def serve(next_ticket: Callable[[], JobTicket]) -> int:
    """The worker process: case after case, each from a :class:`JobTicket`, until the parent
    closes the pipe (the lifeline then ends this process) or a case leaves it unfit to serve
    another (:class:`CaseFinished` with ``retire``; the parent starts a fresh worker).

    Every job's events go to its own file, framed by :class:`CaseStarted` and
    :class:`CaseFinished`: the parent reads the case as done at ``CaseFinished``, not when the
    process ends. Between cases, :meth:`ProcessBaseline.after_case` takes away what the case
    left (:mod:`kbench_ci.measure.isolation`).
    """
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
