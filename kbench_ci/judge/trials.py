"""The judge's calls: correctness trials and timed rounds, one side's call at a time.

Before every call the judge stages a version (contents from entropy, expected outputs kept in
the judge), poisons the outputs, flushes the cache and waits for the device; the side times one
call; the judge checks that call's outputs. While one side has the turn, every other side's
worker is paused (:func:`turn`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from kbench_ci.errors import KbenchError, UserFileError
from kbench_ci.judge.arena import Arena
from kbench_ci.judge.contents import Maker, entropy_seed
from kbench_ci.judge.sides import SideFailed
from kbench_ci.judge.state import Emit, Side, Version, sync
from kbench_ci.measure.correctness import compare_outputs
from kbench_ci.measure.inputs import InputSet, changed_inputs, poison_, poison_outputs_, still_poisoned
from kbench_ci.measure.protocol import Begin, CaseJob, Progress, StoppingRule
from kbench_ci.measure.schedule import RoundPlan
from kbench_ci.measure.sideproto import Called, CallRequest
from kbench_ci.measure.timing import CacheFlush
from kbench_ci.measure.usercode import Problem, accepted_kwargs, collect_outputs
from kbench_ci.results.model import CorrectnessResult, Tolerance, TrialCheck
from kbench_ci.stats import Verdict, classify, compare_rounds

#: versions of the timed contents (each with its expected outputs kept in the judge)
VERSIONS = 8
#: seconds a side may take to answer one call
CALL_TIMEOUT_S = 120.0


def turn(sides: list[Side], side: Side) -> None:
    """``side`` has the device: every other side's worker (and what runs under it) is paused."""
    for other in sides:
        if other is not side:
            other.worker.pause()
    side.worker.resume()


def make_version(maker: Maker, problem: Problem, device: torch.device) -> Version:
    seed = entropy_seed()
    inputs = maker(seed)
    return Version(inputs, _expected(problem, inputs, device))


def _expected(problem: Problem, inputs: InputSet, device: torch.device) -> dict[str, Any]:
    """The trusted reference's outputs on a private copy: they never leave the judge."""
    kwargs = inputs.fresh_copy()
    poison_outputs_(kwargs, inputs.poisoned_names)
    what = f"{problem.path.name} reference()"
    try:
        result = problem.reference(**accepted_kwargs(problem.reference, kwargs))
        outputs = collect_outputs(result, kwargs, inputs.output_names, what=what)
    except KbenchError:
        raise
    except Exception as exc:
        raise UserFileError(
            f"{what} raised {type(exc).__name__}: {exc}", hint="fix reference(): every variant is checked against it",
        ) from exc
    sync(device)
    for name, value in outputs.items():
        if isinstance(value, torch.Tensor) and value is kwargs.get(name) and still_poisoned(value):
            raise UserFileError(f"{what} produced no output for '{name}'", hint=f"return {name} or write it in place")
    return {name: value.detach().clone() if isinstance(value, torch.Tensor) else value for name, value in outputs.items()}


def _stage(arena: Arena, inputs: InputSet) -> None:
    """The version's contents into the lent inputs and in-place outputs; every other output poisoned."""
    for name, view in arena.views.items():
        if name in inputs.poisoned_names:
            poison_(view)
        else:
            view.copy_(inputs.kwargs[name])


def call_side(side: Side, request: CallRequest) -> Called:
    reply = side.worker.ask(request, Called, timeout_s=CALL_TIMEOUT_S)
    assert isinstance(reply, Called)
    if reply.error is not None:
        raise SideFailed(reply.error)
    if len(reply.samples_ms) != request.count:
        raise SideFailed(f"its worker returned {len(reply.samples_ms)} times for {request.count} calls")
    return reply


def check_correctness(
    side: Side, job: CaseJob, problem: Problem, maker: Maker, tolerance_for: Callable[[torch.dtype], Tolerance],
    device: torch.device, flush: CacheFlush, emit: Emit,
) -> None:
    trials: list[TrialCheck] = []
    arena = side.arenas[0]
    for trial in range(job.settings.correctness_trials):
        emit(Progress(side.label, "correctness", trial, job.settings.correctness_trials))
        emit(Begin(side.label, "correctness"))
        version = make_version(maker, problem, device)
        _stage(arena, version.inputs)
        sync(device)
        try:
            call_side(side, CallRequest(slot=arena.slot, count=1))
        except SideFailed as exc:
            trials.append(TrialCheck(seed=version.inputs.seed, outputs=(), error=f"raised {exc}"))
            if not side.worker.alive():
                side.fail("error", f"its worker ended during the correctness trials: {exc}")
                return
            continue
        outputs = {name: arena.views[name] for name in version.inputs.output_names}
        checks = compare_outputs(outputs, version.expected, tolerance_for)
        modified = changed_inputs(version.inputs.kwargs, arena.views, version.inputs.output_names)
        trials.append(TrialCheck(seed=version.inputs.seed, outputs=checks, modified_inputs=modified))
    result = CorrectnessResult(trials=tuple(trials))
    side.result = replace(side.result, status="ok" if result.passed else "incorrect", correctness=result,
                          message=result.first_failure())


def time_in_rounds(
    live: list[Side], sides: list[Side], versions: list[Version], job: CaseJob,
    tolerance_for: Callable[[torch.dtype], Tolerance], device: torch.device, flush: CacheFlush, emit: Emit,
) -> None:
    calls_per_round = job.settings.trials_per_round + job.settings.discard_first
    plan = RoundPlan(job.settings.rounds, job.stopping)
    picker = random.SystemRandom()
    started = time.perf_counter()
    for side in reversed(live):  # the full warm-up, in the reverse of round 0's order
        emit(Begin(side.label, "timing"))
        turn(sides, side)
        try:
            _stagedcall_side(side, side.arenas[0], versions[0], job.settings.num_warmup, flush, device, count=0)
        except SideFailed as exc:
            side.fail("error", f"failed while warming up: {exc}")
    live = [side for side in live if side.ok]
    round_index = 0
    while batch := plan.next_batch(round_index, time.perf_counter() - started):
        for _ in range(batch):
            order = list(reversed(live)) if plan.reversed_order(round_index) else list(live)
            picks = [picker.randrange(len(versions)) for _ in range(calls_per_round)]
            total = max(job.settings.rounds, round_index + 1)
            for side in order:
                emit(Begin(side.label, "timing"))
                emit(Progress(side.label, "timing", round_index, total))
                turn(sides, side)
                if not _one_round(side, picks, versions, job, tolerance_for, device, flush, picker, round_index):
                    live = [s for s in live if s is not side]
            round_index += 1
        if not plan.may_continue(round_index, time.perf_counter() - started):
            break
        assert job.stopping is not None
        if _decided(live, job.stopping):
            break
        plan.checked(round_index, 0.0)


def _one_round(
    side: Side, picks: list[int], versions: list[Version], job: CaseJob, tolerance_for: Callable[[torch.dtype], Tolerance],
    device: torch.device, flush: CacheFlush, picker: random.SystemRandom, round_index: int,
) -> bool:
    # The round's calls go round the side's placements from a random start: each round's median
    # then averages over them (one placement a round made the rounds' ratios swing with it).
    start = picker.randrange(len(side.arenas))
    samples: list[float] = []
    for call, pick in enumerate(picks):
        version = versions[pick]
        arena = side.arenas[(start + call) % len(side.arenas)]
        try:
            sample = _stagedcall_side(side, arena, version, max(1, min(3, job.settings.num_warmup)) if call == 0 else 0, flush, device)
        except SideFailed as exc:
            side.fail("error", f"failed while timing: {exc}")
            return False
        side.checked += 1
        if side.role == "solution":
            outputs = {name: arena.views[name] for name in version.inputs.output_names}
            failed = [check for check in compare_outputs(outputs, version.expected, tolerance_for) if not check.passed]
            if failed:
                side.fail("incorrect", (
                    f"timed call {side.checked} (round {round_index + 1}, call {call + 1}) was given new input contents by the "
                    f"judge and its output '{failed[0].name}' does not match the reference for them "
                    f"({failed[0].problem or 'mismatch'}); compute from the inputs on every call"
                ))
                return False
        samples.append(sample)
    side.rounds.append(tuple(samples[job.settings.discard_first:]))
    side.round_versions.append(tuple(picks[job.settings.discard_first:]))
    side.discarded.extend(samples[: job.settings.discard_first])
    return True


def _stagedcall_side(
    side: Side, arena: Arena, version: Version, warm_up: int, flush: CacheFlush, device: torch.device, *, count: int = 1
) -> float:
    """Stage ``version`` into ``arena``, flush, wait for the device, then one call timed by the side."""
    _stage(arena, version.inputs)
    flush()
    sync(device)
    reply = call_side(side, CallRequest(slot=arena.slot, count=count, warm_up=warm_up))
    return reply.samples_ms[0] if count else 0.0


def _decided(live: list[Side], rule: StoppingRule) -> bool:
    solutions = [side for side in live if side.role == "solution"]
    if len(solutions) != 2:
        return True
    base, head = (side.rounds for side in solutions)
    quick = compare_rounds(base, head, confidence=rule.confidence, n_bootstrap=rule.check_bootstrap)
    if classify(quick, rule.threshold, alpha=rule.alpha) is Verdict.INCONCLUSIVE:
        return False
    final = compare_rounds(base, head, confidence=rule.confidence)
    return classify(final, rule.threshold, alpha=rule.alpha) is not Verdict.INCONCLUSIVE
