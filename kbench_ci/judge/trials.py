"""The judge's calls: correctness trials and timed rounds, one side's call at a time.

Every call is handed over (kbench_ci.judge.handoff): the judge stages a version (contents from
entropy, expected outputs kept in the judge), poisons the outputs, flushes the cache, lets the
side time one call, and checks the outputs its clock's snapshot holds. Where a version is cheap
to make (:func:`fresh_each_call`), every timed call has one made for its round alone and no
cache of contents can hit; elsewhere every round gives each side, at a random position among the
calls it keeps, a version made for that round alone: the rounds' own samples then say whether a
side is faster on contents it has seen (:func:`judge_outside_clock`). While one side has the
turn, every other worker is paused and, on a GPU, the turn passes only once the GPU is quiet
(:func:`turn`).
"""

from __future__ import annotations

import itertools
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from kbench_ci.errors import ExitCode, UserFileError
from kbench_ci.judge.breakdown import JUDGE, RECORD
from kbench_ci.judge.clock import CallStamps, ClockUnavailable, GpuClock
from kbench_ci.judge.contents import Maker, entropy_seed
from kbench_ci.judge.handoff import CALL_TIMEOUT_S, Handoff, stage
from kbench_ci.judge.quiet import wait_quiet
from kbench_ci.judge.sides import SideFailed, hold_all_but
from kbench_ci.judge.state import HEAD_REFERENCE, Emit, Side, Version
from kbench_ci.measure.correctness import changed_reference_ruling, compare_outputs, first_mismatch, outputs_match
from kbench_ci.measure.inputs import InputSet, changed_inputs
from kbench_ci.measure.reference import CudaContextLost, reference_outputs, sync
from kbench_ci.measure.schedule import RoundPlan
from kbench_ci.measure.stopping import VerdictWatch, undecided_note
from kbench_ci.measure.usercode import Problem
from kbench_ci.results.model import CorrectnessResult, OutsideClock, Tolerance, TrialCheck
from kbench_ci.stats import (
    CLOCK_FLOOR_GPU_US,
    CLOCK_MIN_FIGURES,
    MEMO_MIN_EFFECT,
    ClockCheck,
    ClockTail,
    clock_check,
    clock_floor_us,
    clock_tail,
    seen_faster,
    shift_p,
)
from kbench_ci.suite.settings import judge_fresh_ms
from kbench_ci.wire.protocol import Begin, CaseJob, LoadError, Progress, ReferenceCall
from kbench_ci.wire.sideproto import Called, CallRequest

__all__ = [
    "CALL_TIMEOUT_S", "FRESH_CALL_MAX_MS", "VERSIONS", "OwnReference", "OwnReferenceFailed", "check_correctness",
    "fresh_each_call", "judge_outside_clock", "make_version", "settle_gpu", "time_in_rounds", "trusted", "turn",
    "users_error",
]

#: versions of the timed contents (each with its expected outputs kept in the judge)
VERSIONS = 8
#: every timed call gets contents made for its round alone (no cache can hit) where the judge
#: makes one version (the trusted setup() and the reference, to the device's sync) in at most
#: this many ms (KBENCH_CI_JUDGE_FRESH_MS, checked by the parent); 0 turns it off. A round's
#: versions are made before its first turn and given to every side at the same positions (each
#: side meets each once).
FRESH_CALL_MAX_MS = judge_fresh_ms(os.environ)
#: round_versions' entry for a version made for that round alone (its probe; every call's where
#: contents are fresh on every call)
PROBE_VERSION = -1
_NUMBERS = itertools.count(1)


def turn(sides: list[Side], side: Side, clock: GpuClock | None = None) -> None:
    """``side`` has the device: every other worker of the judge (and what runs under it) is
    paused, and every process a side left outside its worker is ended. With the judge's GPU
    clock, the turn passes only once the GPU is quiet (:func:`settle_gpu`)."""
    with RECORD.step(JUDGE, "turns (pause, resume, strays ended)"):
        _turn(sides, side, clock)


def _turn(sides: list[Side], side: Side, clock: GpuClock | None) -> None:
    hold_all_but(side.worker)
    for each in sides:
        # a worker that filled a disk after its last reply, stopped at this change of turn
        if each.ok and each.worker.filled is not None:
            each.fail("error", each.worker.filled)
    if clock is not None:
        # Every turn, not only where another side just ran: a worker resumed between turns (a
        # solution's own setup() making the judge's inputs) may have left work too.
        settle_gpu(clock, sides)
    side.worker.resume()
    refused = side.worker.scheduling_refused
    if refused and side.ok:
        # Another process raised its nice value (or the like) and this user may not lower it
        # back: its times would be another process's doing.
        side.fail("error", (
            f"another process changed the scheduling of its worker and the judge could not set it back ({refused[0]}): "
            "not comparable"
        ))


def settle_gpu(clock: GpuClock, sides: Sequence[Side]) -> None:
    """Every worker paused and every stray ended: wait for the GPU to be quiet
    (kbench_ci.judge.quiet). Work still running past the wait cannot be told apart from another
    process's on the same GPU, so no side is blamed for it: every side still in the case is an
    ``error`` of the run (not comparable), never ``incorrect``, and no longer timed. Where the
    judge's probe itself fails, nothing is waited for."""
    try:
        with RECORD.step(JUDGE, "quiet-GPU waits"):
            found = wait_quiet(clock.idle_latency_us)
    except (ClockUnavailable, RuntimeError):
        return
    if found.quiet:
        return
    for side in sides:
        if side.ok:
            side.fail("error", (
                f"the GPU stayed busy with every side's worker stopped: for {found.waited_s:.1f} s the judge's probe kernel "
                f"waited up to {found.slowest_us / 1e3:.1f} ms for it, so no side's calls could be timed alone. Another process "
                "used this GPU, or a side left GPU work running after its turn; not comparable: run on a GPU no other job uses"
            ))


def make_version(
    maker: Maker, problem: Problem, device: torch.device, *, label: str = "", emit: Emit | None = None,
    seed: int | None = None,
) -> Version:
    """Contents from the OS's entropy and the trusted reference's outputs for them. With
    ``emit``, the reference's call is announced as checking ``label``: a reference that hangs is
    then the user's ref.py's to blame (the parent reads it so), not that side's. ``seed``: a
    seed given on the command line (``--seeds``) in place of one drawn."""
    seed = entropy_seed() if seed is None else seed
    # The trusted reference's outputs on a private copy: they never leave the judge.
    try:
        with RECORD.step(JUDGE, "versions (inputs, the reference's outputs)"):
            inputs = maker(seed)
            expected = reference_outputs(problem, inputs, device, label=label, emit=emit)
    except CudaContextLost as exc:
        raise UserFileError(
            f"{problem.path.name} reference() left the CUDA context unusable: {exc}",
            hint="fix reference(): every variant is checked against it",
        ) from exc
    return Version(inputs, expected, next(_NUMBERS))


class OwnReferenceFailed(Exception):
    """The head's own (changed) ref.py failed: the user's file to fix (exit 2), said as ``message``."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


@dataclass(slots=True)
class OwnReference:
    """A compare's head changed ref.py: its reference, the pull request's code, runs in a worker
    of its own (``side``: a ``pytorch-eager`` baseline over the head's ref.py), never in the
    judge. The judge stages a version's inputs into that worker's buffers, lets it compute, and
    copies its outputs into the judge's own memory: what the head's outputs are checked against
    where the change is accepted, and what tells "right by its own reference" apart.

    Always after the head's call on those inputs, never before: the reference and the head are
    both the pull request's, and a reference given contents first could pass its answers to the
    head (a file both can read) before the head is called on them."""

    side: Side
    sides: list[Side]
    clock: GpuClock | None
    device: torch.device
    #: the head's ref.py's file name, for messages
    name: str
    #: the head's label (the reference's work is announced as checking it) and the events
    head: str
    emit: Emit

    def outputs(self, inputs: InputSet) -> dict[str, torch.Tensor] | None:
        """The head's own reference's outputs for ``inputs`` (None where its turn could not be
        had: the GPU stayed busy, and every side is an error of the run already). The
        reference's worker has the device meanwhile; the caller's next turn takes it back.
        Raises :class:`OwnReferenceFailed`."""
        if not self.side.ok or not self.side.arenas:
            raise OwnReferenceFailed(f"{self.name} could not be run: {self.side.result.message}", _FIX_REFERENCE)
        turn(self.sides, self.side, self.clock)
        if not self.side.ok:
            return None
        arena = self.side.arenas[0]
        stage(arena, inputs)
        sync(self.device)
        # Announced as the head's reference: a reference that hangs is the head's ref.py's to blame
        # (the parent reads the event so), never the base that the last event named
        self.emit(ReferenceCall(self.head, running=True))
        try:
            reply = self.side.worker.ask(CallRequest(slot=arena.slot, count=1), Called, timeout_s=CALL_TIMEOUT_S)
        except SideFailed as exc:
            raise OwnReferenceFailed(f"{self.name} reference() failed: {exc} (seed {inputs.seed})", _FIX_REFERENCE) from exc
        self.emit(ReferenceCall(self.head, running=False))
        assert isinstance(reply, Called)
        if reply.error is not None:
            raise OwnReferenceFailed(f"{self.name} reference() raised {reply.error} (seed {inputs.seed})", _FIX_REFERENCE)
        own = {name: arena.views[name].clone() for name in inputs.output_names}
        sync(self.device)
        return own


_FIX_REFERENCE = "fix reference(): every variant is checked against it"


def users_error(label: str, message: str, hint: str | None) -> LoadError:
    """Variant ``label`` failed on the user's ref.py, setup() or settings: exit 2, blamed on the
    user (kbench_ci.measure.variant.emit_load_error's event for a UserFileError)."""
    return LoadError(label, "UserFileError", int(ExitCode.USAGE), message, hint, "user")


def fresh_each_call(make_ms: float, affordable: int, calls_per_round: int, *, max_ms: float = FRESH_CALL_MAX_MS) -> bool:
    """Whether every timed call can have contents of its own: one version made within
    ``max_ms``, and a round's worth of them (plus the pool's version for warm-ups) within the
    memory ``affordable`` versions take."""
    return max_ms > 0 and make_ms <= max_ms and affordable >= calls_per_round + 1


def check_correctness(
    side: Side, job: CaseJob, problem: Problem, maker: Maker, tolerance_for: Callable[[torch.dtype], Tolerance],
    device: torch.device, handoff: Handoff, emit: Emit, *, own_reference: OwnReference | None = None,
) -> None:
    """``side``'s correctness trials, each on a version made for it: at a seed drawn from the
    OS's entropy, or at the trial's seed given by ``--seeds`` (a local run that checks again the
    contents a report named; the same seeds for every side). ``own_reference`` (a compare's head
    that changed ref.py): its trials are checked against its own reference, and each also
    against the base's (:func:`_judge_changed_reference`)."""
    given = job.settings.seeds
    trials: list[TrialCheck] = []
    against_base: list[TrialCheck] = []
    arena = side.arenas[0]
    for trial in range(job.settings.correctness_trials):
        emit(Progress(side.label, "correctness", trial, job.settings.correctness_trials))
        emit(Begin(side.label, "correctness"))
        # The trusted reference runs in the judge with the side's worker stopped too (a thread of
        # its own could take the memory the reference needs and have that blamed on ref.py)
        side.worker.pause()
        version = make_version(maker, problem, device, label=side.label, emit=emit, seed=given[trial] if given else None)
        side.worker.resume()
        try:
            judged = handoff.call(side, arena, version.inputs)
        except SideFailed as exc:
            trials.append(TrialCheck(seed=version.inputs.seed, outputs=(), error=f"raised {exc}"))
            if not side.worker.alive():
                side.fail("error", f"its worker ended during the correctness trials: {exc}")
                return
            continue
        side.seen.add(version.number)
        side.trial_own_us.append(judged.sample_ms * 1e3)
        if own_reference is not None:  # after the head's call (OwnReference says why)
            own = _own_outputs(own_reference, side, version.inputs)
            if own is None:
                return
            version = replace(version, own_expected=own)
            turn(own_reference.sides, side, own_reference.clock)
        expected = version.own_expected if version.own_expected is not None else version.expected
        checks = compare_outputs(judged.outputs, expected, tolerance_for)
        modified = changed_inputs(version.inputs.kwargs, arena.views, version.inputs.output_names)
        trials.append(TrialCheck(seed=version.inputs.seed, outputs=checks, modified_inputs=modified))
        if version.own_expected is not None:
            against_base.append(TrialCheck(seed=version.inputs.seed, outputs=compare_outputs(judged.outputs, version.expected,
                                                                                           tolerance_for)))
    result = CorrectnessResult(trials=tuple(trials))
    side.result = replace(side.result, status="ok" if result.passed else "incorrect", correctness=result,
                          message=result.first_failure())
    if own_reference is not None and side.ok:
        _judge_changed_reference(side, CorrectnessResult(trials=tuple(against_base)), job)


def _own_outputs(own_reference: OwnReference, side: Side, inputs: InputSet) -> dict[str, torch.Tensor] | None:
    """The head's own reference's outputs for ``inputs``; None where ``side`` failed meanwhile
    (its reference failed: the user's file to fix, exit 2, said here; or the GPU stayed busy)."""
    try:
        own = own_reference.outputs(inputs)
    except OwnReferenceFailed as exc:
        side.fail("error", exc.message)
        own_reference.emit(users_error(side.label, exc.message, exc.hint))
        return None
    return own if side.ok else None


def _judge_changed_reference(side: Side, against_base: CorrectnessResult, job: CaseJob) -> None:
    """A head right by its own changed ref.py, checked on the same inputs against the base's
    reference too (the in-process worker's rule, correctness.changed_reference_ruling): one that passes only its own
    is ``incorrect`` unless the case is accepted, and then it is checked against its own in
    its timed calls as well."""
    fails, words = changed_reference_ruling("ok" if against_base.passed else "incorrect", against_base.first_failure(),
                                            accepted=job.accept_changed_reference)
    if fails:
        side.fail("incorrect", words)
        return
    _note(side, words)
    side.own_reference = not against_base.passed  # accepted: its timed calls are checked against its own


def time_in_rounds(
    live: list[Side], sides: list[Side], versions: list[Version], job: CaseJob, problem: Problem, maker: Maker,
    tolerance_for: Callable[[torch.dtype], Tolerance], device: torch.device, handoff: Handoff, emit: Emit,
    *, fresh: bool = False, own_reference: OwnReference | None = None, batch_calls: int = 1,
) -> None:
    """The timed rounds. ``versions`` is the pool the timed calls draw from (``fresh``: only the
    warm-ups do; every timed call has a version made for its round alone). ``own_reference``:
    a side checked against the head's own reference (an accepted change of ref.py) has its
    round's outputs checked against it after its round (:func:`_check_against_own`).
    ``batch_calls`` (with ``fresh``; :func:`batch_size`): a side's calls go in batches of that many
    under one span of the judge's clock, and each call's sample is its batch's mean
    (:func:`_batched_round`)."""
    batch_calls = batch_calls if fresh else 1
    calls_per_round = round_calls(job.settings.trials_per_round + job.settings.discard_first, batch_calls)
    kept = list(range(job.settings.discard_first, calls_per_round))
    plan = RoundPlan(job.settings.rounds, job.stopping)
    picker = random.SystemRandom()
    started = time.perf_counter()
    for side in reversed(live):  # the full warm-up, in the reverse of round 0's order
        emit(Begin(side.label, "timing"))
        turn(sides, side, handoff.clock)
        if not side.ok:
            continue
        try:
            _warm_up(side, side.arenas[0], versions[0], job.settings.num_warmup, handoff, device)
        except SideFailed as exc:
            side.fail("error", f"failed while warming up: {exc}")
    live = [side for side in live if side.ok]
    round_index = 0
    watch = VerdictWatch(job.stopping) if job.stopping is not None else None
    said = False  # the rounds ended decided, or with the early stop's note
    while batch := plan.next_batch(round_index, time.perf_counter() - started):
        for _ in range(batch):
            order = list(reversed(live)) if plan.reversed_order(round_index) else list(live)
            checking = live[0].label if live else ""  # whom a hanging reference's blame names
            picks = [picker.randrange(len(versions)) for _ in range(calls_per_round)]
            # The round's versions made for it alone (every call's, where they are cheap; else a
            # probe at a random position among the calls kept), so that no side has seen them:
            # made before any side's turn, the GPU's idle while the judge makes them falls on no
            # one's call.
            # The trusted reference runs in the judge with every worker stopped: the last turn's
            # side is still running (the others are stopped already)
            for side in (*sides, *((own_reference.side,) if own_reference is not None else ())):
                if side.worker.alive() and not side.worker.paused:
                    side.worker.pause()
            if fresh:
                probe_at, probe = None, None
                this_round = None  # the last round's versions go before this round's are made
                this_round = [make_version(maker, problem, device, label=checking, emit=emit) for _ in range(calls_per_round)]
            else:
                probe_at = picker.choice(kept) if kept else None
                probe = make_version(maker, problem, device, label=checking, emit=emit) if probe_at is not None else None
                this_round = None
            total = max(job.settings.rounds, round_index + 1)
            for side in order:
                emit(Begin(side.label, "timing"))
                emit(Progress(side.label, "timing", round_index, total))
                turn(sides, side, handoff.clock)
                deferred: list[tuple[Version, dict[str, torch.Tensor], int]] | None = (
                    [] if side.own_reference and own_reference is not None else None)
                if batch_calls > 1 and this_round is not None:
                    done = side.ok and _batched_round(side, picks, versions, this_round, batch_calls, job, tolerance_for, device,
                                                      handoff, picker, round_index, deferred)
                else:
                    done = side.ok and _one_round(side, picks, versions, probe_at, probe, job, tolerance_for, device, handoff,
                                                  picker, round_index, this_round, deferred)
                if not done:
                    live = [s for s in live if s is not side]
                elif deferred and own_reference is not None:
                    _check_against_own(side, deferred, own_reference, tolerance_for, round_index)
            live = [s for s in live if s.ok]
            round_index += 1
        if not plan.may_continue(round_index, time.perf_counter() - started):
            break
        assert watch is not None  # may_continue is False without a rule
        checked = time.perf_counter()
        solutions = [side for side in live if side.role == "solution"]
        look = watch.look([side.rounds for side in solutions], round_index, checked - started)
        if look.stop:
            if look.note is not None:
                _note(solutions[1], look.note)
            said = True
            break
        plan.checked(round_index, time.perf_counter() - checked)
    solutions = [side for side in live if side.role == "solution"]
    note = undecided_note([side.rounds for side in solutions], job.stopping, round_index) if job.stopping and not said else None
    if note is not None:
        _note(solutions[1], note)


def _warm_up(side: Side, arena: Any, version: Version, count: int, handoff: Handoff, device: torch.device) -> None:
    """``count`` untimed calls on ``version``'s contents (staged by the judge, not checked)."""
    if count:
        with RECORD.step(side.label, "warm-ups"):
            stage(arena, version.inputs)
            sync(device)
            handoff.warm_up(side, arena, count)
        side.seen.add(version.number)


def _one_round(
    side: Side, picks: list[int], versions: list[Version], probe_at: int | None, probe: Version | None, job: CaseJob,
    tolerance_for: Callable[[torch.dtype], Tolerance], device: torch.device, handoff: Handoff, picker: random.SystemRandom,
    round_index: int, this_round: list[Version] | None = None,
    deferred: list[tuple[Version, dict[str, torch.Tensor], int]] | None = None,
) -> bool:
    """One side's calls of one round. ``deferred``: its outputs are not checked here but kept
    (version, a copy of the outputs, call number) for :func:`_check_against_own`."""
    # The round's calls go round the side's placements from a random start: each round's median
    # then averages over them (one placement a round made the rounds' ratios swing with it).
    start = picker.randrange(len(side.arenas))
    samples: list[float] = []
    spans: list[float] = []
    new: list[bool] = []
    for call, pick in enumerate(picks):
        if this_round is not None:
            version = this_round[call]
        else:
            version = probe if call == probe_at and probe is not None else versions[pick]
        arena = side.arenas[(start + call) % len(side.arenas)]
        try:
            if call == 0:  # on a version of the pool, never the probe's (which must stay unseen)
                _warm_up(side, arena, versions[pick], max(1, min(3, job.settings.num_warmup)), handoff, device)
            with RECORD.step(side.label, "timed calls (handoffs)"):
                judged = handoff.call(side, arena, version.inputs)
        except SideFailed as exc:
            side.fail("error", f"failed while timing: {exc}")
            return False
        side.checked += 1
        if deferred is not None:
            deferred.append((version, {name: output.clone() for name, output in judged.outputs.items()}, call))
        elif side.role == "solution":
            failed = [] if _matches(judged.outputs, version.expected, tolerance_for) else [
                check for check in compare_outputs(judged.outputs, version.expected, tolerance_for) if not check.passed]
            if failed:
                side.fail("incorrect", (
                    f"timed call {side.checked} (round {round_index + 1}, call {call + 1}) was given new input contents by the "
                    f"judge (seed {version.inputs.seed}) and its output '{failed[0].name}' does not match the reference "
                    f"for them ({failed[0].problem or 'mismatch'}); compute from the inputs on every call"
                ))
                return False
        new.append(version.number not in side.seen)
        side.seen.add(version.number)
        samples.append(judged.sample_ms)
        spans.append(judged.stamps.span_us)
        side.judged.append((judged.stamps, judged.sample_ms))
        side.batches.append(1)
        if judged.lead_us is not None:
            side.leads.append(judged.lead_us)
    first = job.settings.discard_first
    side.rounds.append(tuple(samples[first:]))
    side.round_versions.append(tuple(
        PROBE_VERSION if this_round is not None or call == probe_at else pick for call, pick in enumerate(picks))[first:])
    side.discarded.extend(samples[:first])
    side.memo_pairs.extend(_pairs(spans, new, first))
    return True


#: a batch's calls: enough that their time dwarfs the handoff's jitter (a few us a handoff) and
#: the side's lead-in, which each batch has once (us, the calls' own times together)
BATCH_TARGET_US = 2000.0
#: the most calls in a batch (each needs a placement of its own on the device)
MAX_BATCH = 64


def batch_size(call_us: float, affordable: int, *, target_us: float = BATCH_TARGET_US, most: int = MAX_BATCH) -> int:
    """Calls per batch for a case whose call takes ``call_us`` (its own time, the flush before it
    left out): enough for ``target_us`` of calls together, at most ``most`` and the
    ``affordable`` placements; 1 where one call already takes that."""
    if not math.isfinite(call_us) or call_us <= 0:
        return 1
    return int(max(1, min(most, affordable, math.ceil(target_us / call_us))))


def batch_sizes(calls: int, batch: int) -> list[int]:
    """A round's ``calls`` in as few batches of at most ``batch`` as hold them, their sizes as
    even as can be (11 calls at most 10 a batch: 6 and 5, not 10 and 1). A batch of one call
    holds no flush of the side's between calls: its gap is not a batch's, and a round of batches
    and lone calls would give the gaps two modes, whose spread no interval then resolves."""
    count = max(1, math.ceil(calls / max(1, batch)))
    size, longer = divmod(calls, count)
    return [size + 1 if index < longer else size for index in range(count)]


def round_calls(calls: int, batch: int) -> int:
    """A round's calls for a side: ``calls``, and at least one batch (the last batch of a round
    may be shorter)."""
    return max(calls, batch)


def _batched_round(
    side: Side, picks: list[int], versions: list[Version], this_round: list[Version], batch: int, job: CaseJob,
    tolerance_for: Callable[[torch.dtype], Tolerance], device: torch.device, handoff: Handoff, picker: random.SystemRandom,
    round_index: int, deferred: list[tuple[Version, dict[str, torch.Tensor], int]] | None = None,
) -> bool:
    """One side's calls of one round, in batches of ``batch`` under one span each
    (:meth:`Handoff.batch`), every call on contents of its own and every output checked.

    A batch's calls each take its mean as their sample. All of a batch's contents are staged
    before its go, so a side could do every call's work in the first call and report next to
    nothing for the rest: a median of the calls, or leaving the first out, would take that as a
    gain, while their sum is what the judge's clock holds the side to. The stamps and the side's
    time are kept per call (the batch's, divided by its calls), as a handed-over call's are."""
    placements = side.arenas[:batch]
    start = picker.randrange(len(placements))
    placements = placements[start:] + placements[:start]
    samples: list[float] = []
    first = 0
    for size in batch_sizes(len(this_round), batch):
        chosen = this_round[first : first + size]
        try:
            if first == 0:  # on a version of the pool, never one of the round's (which must stay unseen)
                _warm_up(side, placements[0], versions[picks[0]], max(1, min(3, job.settings.num_warmup)), handoff, device)
            with RECORD.step(side.label, "timed calls (handoffs)"):
                judged = handoff.batch(side, placements[: len(chosen)], [version.inputs for version in chosen])
        except SideFailed as exc:
            side.fail("error", f"failed while timing: {exc}")
            return False
        if deferred is not None:
            for offset, (version, outputs) in enumerate(zip(chosen, judged.outputs, strict=True)):
                deferred.append((version, {name: output.clone() for name, output in outputs.items()}, first + offset))
        elif side.role == "solution":
            with RECORD.step(JUDGE, "timed calls' outputs checked"):
                bad = first_mismatch([(outputs, version.expected) for version, outputs in zip(chosen, judged.outputs, strict=True)],
                                     tolerance_for)
            if bad is not None:
                side.checked += bad + 1
                failed = [check for check in compare_outputs(judged.outputs[bad], chosen[bad].expected, tolerance_for)
                          if not check.passed]
                side.fail("incorrect", (
                    f"timed call {side.checked} (round {round_index + 1}, call {first + bad + 1}) was given new input contents "
                    f"by the judge (seed {chosen[bad].inputs.seed}) and its output '{failed[0].name}' does not match the "
                    f"reference for them ({failed[0].problem or 'mismatch'}); compute from the inputs on every call"
                ))
                return False
        side.checked += len(chosen)
        side.seen.update(version.number for version in chosen)
        calls = judged.calls
        # each call's sample is the batch's mean: a sample a call, as one call a span gives
        samples.extend([statistics.fmean(judged.samples_ms)] * calls)
        stamps = judged.stamps
        side.judged.append((CallStamps(pre_us=stamps.pre_us / calls, span_us=stamps.span_us / calls,
                                       post_us=stamps.post_us / calls), statistics.fmean(judged.samples_ms)))
        side.batches.append(calls)
        if calls > 1 and judged.samples_ms[0] > 0:
            side.later_over_first.append(statistics.fmean(judged.samples_ms[1:]) / judged.samples_ms[0])
        if judged.lead_us is not None:
            side.leads.append(judged.lead_us / calls)
        first += size
    # Every sample of a batch is its mean: leaving the first out moves no work between calls
    discard = job.settings.discard_first
    side.rounds.append(tuple(samples[discard:]))
    side.round_versions.append(tuple(PROBE_VERSION for _ in samples[discard:]))
    side.discarded.extend(samples[:discard])
    return True


def _matches(outputs: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
             tolerance_for: Callable[[torch.dtype], Tolerance]) -> bool:
    with RECORD.step(JUDGE, "timed calls' outputs checked"):
        return outputs_match(outputs, expected, tolerance_for)


def _check_against_own(
    side: Side, deferred: list[tuple[Version, dict[str, torch.Tensor], int]], own_reference: OwnReference,
    tolerance_for: Callable[[torch.dtype], Tolerance], round_index: int,
) -> None:
    """A head checked against its own (accepted) reference: each call of its round, after the
    round, against what that reference makes of the same contents (OwnReference says why after)."""
    for version, outputs, call in deferred:
        own = _own_outputs(own_reference, side, version.inputs)
        if own is None:
            return
        failed = [] if outputs_match(outputs, own, tolerance_for) else [
            check for check in compare_outputs(outputs, own, tolerance_for) if not check.passed]
        if failed:
            side.fail("incorrect", (
                f"timed call (round {round_index + 1}, call {call + 1}) was given new input contents by the judge (seed "
                f"{version.inputs.seed}) and its output '{failed[0].name}' does not match its own accepted reference for them "
                f"({failed[0].problem or 'mismatch'}); compute from the inputs on every call"
            ))
            return


def _pairs(samples: Sequence[float], new: Sequence[bool], first: int) -> list[tuple[float, float]]:
    """Each kept call on contents new to the side, with the kept call next to it (the one
    before, else the one after) on contents it had seen: (new, seen) figures of theirs."""
    pairs = []
    for index in range(first, len(samples)):
        if not new[index]:
            continue
        for other in (index - 1, index + 1):
            if first <= other < len(samples) and not new[other]:
                pairs.append((samples[index], samples[other]))
                break
    return pairs


def judge_outside_clock(sides: Sequence[Side], handoff: Handoff, *, on_gpu: bool) -> None:
    """Each side's calls under the judge's clock against the trusted sides' (a compare's base,
    the baselines). A side whose own times leave out more of the judge's span than theirs:
    beyond the clock's floor, ``incorrect``; beyond the interval of the two medians alone (the
    clock's resolution, :data:`stats.CLOCK_SE_FACTOR` standard errors), that much is counted in
    its times. A side that flushes its cache between the calls of a batch and whose gap falls
    short of theirs by more than the resolution and :data:`FLUSH_SHORT_SHARE` of their gap left
    work out of the span (its flush): ``incorrect``; so is one whose later calls in a batch ran
    from a cache left warm (:func:`_warm_after_first`). So is one whose GPU work lengthened the
    judge's own steps, or that is faster on contents it had seen. Every judged side's figures go
    into its result."""
    references = [side for side in sides if trusted(side) and side.ok and side.judged]
    reference = {
        "gap": [stamps.span_us - ms * 1e3 for side in references for stamps, ms in side.judged],
        "pre": [stamps.pre_us for side in references for stamps, _ in side.judged],
        "post": [stamps.post_us for side in references for stamps, _ in side.judged],
        "lead": [lead for side in references for lead in side.leads],
        "flushed": [gap for side in references for gap in _flushed_gaps(side)],
        "later": [ratio for side in references for ratio in side.later_over_first],
    }
    for side in sides:
        if not side.judged:
            continue
        spans = tuple(stamps.span_us for stamps, _ in side.judged)
        reported = tuple(ms * 1e3 for _, ms in side.judged)
        gaps = [span - own for span, own in zip(spans, reported, strict=True)]
        pre = tuple(stamps.pre_us for stamps, _ in side.judged)
        post = tuple(stamps.post_us for stamps, _ in side.judged)
        own_us = statistics.median(reported)
        batch = int(statistics.median(side.batches)) if side.batches else 1
        floor_us = clock_floor_us(on_gpu, own_us)
        figures = OutsideClock(
            source=handoff.source, calls=sum(side.batches) or len(spans), batch_calls=batch, gap_us=statistics.median(gaps),
            pre_us=statistics.median(pre), post_us=statistics.median(post), span_us=spans, reported_us=reported,
            pre_call_us=pre, post_call_us=post, lead_us=statistics.median(side.leads) if side.leads else None,
        )
        finding = None
        counted_us = 0.0
        if not trusted(side) and reference["gap"]:
            gap = clock_check(gaps, reference["gap"], floor_us=floor_us)
            interval = clock_check(gaps, reference["gap"], floor_us=0.0)
            figures = replace(
                figures, reference=", ".join(s.label for s in references), reference_gap_us=gap.reference_us,
                reference_pre_us=statistics.median(reference["pre"]), reference_post_us=statistics.median(reference["post"]),
                resolution_us=interval.resolution_us,
                reference_lead_us=statistics.median(reference["lead"]) if reference["lead"] else None,
            )
            finding = _lie(gap, clock_tail(gaps, reference["gap"], floor_us=floor_us), on_gpu)
            if finding is None and batch > 1:
                finding = _flush_left_out(_flushed_gaps(side), reference["flushed"], interval.resolution_us)
            if finding is None and batch > 1 and on_gpu:
                # Not on a CPU: there a batch's first call also holds the worker's wake-up after
                # the handoff, so its later-over-first ratio is the work's share of that, not the
                # cache's (an honest head of 30 times the base's matmul read 85% against the
                # base's 117%, p=0.008, on a busy 2-core machine); the span's shortfall
                # (_flush_left_out) is what finds a skipped flush there
                finding = _warm_after_first(side.later_over_first, reference["later"])
            if finding is None and on_gpu:
                finding = _segments(pre, post, reference["pre"], reference["post"])
            if finding is None and interval.enough and interval.excess_us > max(interval.resolution_us, SPAN_SPREAD_US / batch):
                counted_us = interval.excess_us
        if finding is None and side.role == "solution" and not trusted(side):
            finding = _memo(side, floor_us, own_us)
        if side.ok and finding is not None:
            side.fail("incorrect", finding)
        else:
            finding = None  # a side that failed already is judged by that
        if side.ok and counted_us > 0:
            # time its own clock left out and the judge's saw: its samples carry it
            side.rounds = [tuple(sample + counted_us / 1e3 for sample in samples) for samples in side.rounds]
        side.result = replace(side.result, outside_clock=replace(figures, finding=finding, counted_us=counted_us))


#: how far two honest processes' gaps lie apart over a case, once a span (us; the head's gap
#: less the base's over A/A runs reached +1.6 us on an H200, one call a span): the process's,
#: not the side's lie, so not counted in its times; a batch's calls share it
SPAN_SPREAD_US = 2.0
#: a side that flushes between its batch's calls (the judge flushes before the first) and whose
#: gap falls short of the trusted sides' by more than this share of theirs left its flush out: an
#: honest kernel moves the flush's time only by what it leaves in the cache to write back, a flush
#: cut by this much leaves the cache warm
FLUSH_SHORT_SHARE = 0.25
#: ... and short beyond chance: the rank test's two-sided p of its batches' gaps against theirs,
#: where the medians' interval is wider than the shortfall (a loaded CPU's flushes vary by
#: milliseconds; a batch's gap holds them all, and they shift all of a side's batches together)
FLUSH_RANK_P = 0.01


def _flushed_gaps(side: Side) -> list[float]:
    """A side's gap a call (us) in each batch that held flushes of its own (two calls or more)."""
    batches = side.batches or [1] * len(side.judged)  # none recorded: every span one call
    return [stamps.span_us - ms * 1e3 for (stamps, ms), calls in zip(side.judged, batches, strict=True) if calls > 1]


def _flush_left_out(gaps: Sequence[float], reference: Sequence[float], resolution_us: float) -> str | None:
    """A batched side's gaps short of the trusted sides' (one a batch, a call's share) by more
    than :data:`FLUSH_SHORT_SHARE` of theirs, and beyond the clock's resolution, by the rank
    test (:data:`FLUSH_RANK_P`), or short by that share of their fastest batch: work the span
    should hold (its cache flush between the calls) was not done."""
    if min(len(gaps), len(reference)) < CLOCK_MIN_FIGURES:
        return None
    side_us, reference_us = statistics.median(gaps), statistics.median(reference)
    short_us = reference_us - side_us
    if short_us <= FLUSH_SHORT_SHARE * reference_us:
        return None
    p_value = shift_p(gaps, reference)
    # A loaded CPU only adds time to a batch's gap (a flush, a wake-up, a descheduled worker),
    # so no honest side's median gap falls short of the trusted sides' fastest batch by a
    # quarter: a skipped flush does, however wide the interval and however the load spread the
    # ranks (the judge's 11-call batches of a 2^16-float add, next to 4 busy processes on 2
    # cores: the base's gaps 1572-9793 us a call, the head's 94-124 us and one batch of 7388 us;
    # resolution 5878 us, rank test p = 0.010)
    below_fastest = side_us < (1 - FLUSH_SHORT_SHARE) * min(reference)
    if short_us <= resolution_us and p_value >= FLUSH_RANK_P and not below_fastest:
        return None
    return (f"its batches took less of the judge's clock than its own times and the flush between its calls explain: its "
            f"span less its own time was {side_us:.1f} us a call, the trusted sides' {reference_us:.1f} us (short by "
            f"{short_us:.1f} us, over {FLUSH_SHORT_SHARE:.0%} of theirs; their fastest batch {min(reference):.1f} us; "
            f"resolution {resolution_us:.1f} us, rank test p={p_value:.2g} over {len(gaps)} and {len(reference)} batches): "
            "flush the cache between calls as the judge asks, and time every call's work between its own start and end")


#: a batched side whose later calls take less than this share of the trusted sides' later-over-
#: first ratio (and by the rank test, FLUSH_RANK_P) ran them from a cache its flush left warm
WARM_LATER_SHARE = 0.75


def _warm_after_first(ratios: Sequence[float], reference: Sequence[float]) -> str | None:
    """A batch's first call follows the judge's flush, its later calls the side's own. A side
    whose later calls take much less of its first call's time than the trusted sides' do (one
    ratio a batch, their medians, and the rank test of its batches' ratios against theirs) did
    its later calls from a warm cache, or its batch's work in the first: the flush it was given
    between them skipped or undone. Needs its own times to say so: a side that also evens out
    what it reports is left to the span (docs/isolation.md, "What batches leave out")."""
    if min(len(ratios), len(reference)) < CLOCK_MIN_FIGURES:
        return None
    side_ratio, reference_ratio = statistics.median(ratios), statistics.median(reference)
    if side_ratio >= WARM_LATER_SHARE * reference_ratio:
        return None
    p_value = shift_p(ratios, reference)
    if p_value >= FLUSH_RANK_P:
        return None
    return (f"its calls after the first in a batch took {side_ratio:.0%} of its first call's time, the trusted sides' "
            f"{reference_ratio:.0%} (rank test p={p_value:.2g} over {len(ratios)} and {len(reference)} batches): the first "
            "follows the judge's cache flush, the later ones the flush the side is given between its calls, so that flush "
            "was skipped or undone; flush the cache between calls as the judge asks, and do every call's own work in it")


def trusted(side: Side) -> bool:
    """Code the threat model trusts: a compare's base, and the baselines (kbench-ci's own), but
    not the worker that runs a head's changed ref.py as one."""
    return (side.role == "baseline" or side.label == "base") and side.label != HEAD_REFERENCE


def _lie(gap: ClockCheck, tail: ClockTail, on_gpu: bool) -> str | None:
    """The side's own times left out more than the handoff explains: at the median, or in too
    many calls of its tail."""
    measured = "the GPU spent" if on_gpu else "the judge's clock measured"
    lied = f"its process reported less time than {measured}"
    fix = "time every call's work between its own start and end"
    if gap.exceeded:
        return (f"{lied}: {gap.excess_us:.1f} us a call beyond what the handoff explains (median span less its own time "
                f"{gap.side_us:.1f} us, the trusted sides' {gap.reference_us:.1f} us; resolution {gap.resolution_us:.1f} us): "
                f"{fix}")
    if tail.exceeded:
        return (f"{lied} on {tail.calls_beyond} of its {tail.calls} calls: their span less its own time passed "
                f"{tail.threshold_us:.1f} us (the trusted sides' 99th percentile plus the resolution; {tail.reference_beyond} "
                f"of their {tail.reference_calls} calls did): {fix}")
    return None


def _segments(pre: Sequence[float], post: Sequence[float], ref_pre: Sequence[float], ref_post: Sequence[float]) -> str | None:
    """The judge's own steps took longer for this side than for the trusted ones: its context
    ran GPU work in them."""
    for what, own, theirs in (("staged and flushed", pre, ref_pre), ("copied its outputs", post, ref_post)):
        check = clock_check(own, theirs, floor_us=CLOCK_FLOOR_GPU_US)
        if check.exceeded:
            return (f"GPU work of its own ran while the judge {what}: those steps took {check.excess_us:.1f} us a call "
                    f"longer than for the trusted sides ({check.side_us:.1f} us against {check.reference_us:.1f} us; "
                    f"resolution {check.resolution_us:.1f} us): do all of a call's work inside the call")
    return None


def _memo(side: Side, floor_us: float, own_us: float) -> str | None:
    """The round's never-seen contents against the call beside each, on the judge's clock: more
    than the clock's floor and :data:`stats.MEMO_MIN_EFFECT` of the side's time, in more pairs
    than chance allows, is caching."""
    if not side.memo_pairs:
        return None
    new, seen = zip(*side.memo_pairs, strict=True)
    evidence = seen_faster(list(new), list(seen), bound_us=max(floor_us, MEMO_MIN_EFFECT * own_us))
    if not evidence.cached:
        return None
    return (f"faster on contents it had seen than on contents new to it: {evidence.slower_pairs} of {evidence.pairs} "
            f"calls on never-seen contents, placed at random in its rounds, took longer on the judge's clock than the "
            f"call beside them (by {evidence.median_extra_us:.1f} us at the median; read as caching above "
            f"{evidence.bound_us:.1f} us): compute from the inputs")


def _note(side: Side, words: str) -> None:
    """A line in the side's notes (the report shows them under the case)."""
    side.result = replace(side.result, notes=(*side.result.notes, words))
