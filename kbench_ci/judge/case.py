"""One case under ``--isolation judge``: the judge's loop over its side workers.

1. Each side (base, head; or the bench solution) and each baseline gets a worker process of its
   own (:mod:`.sides`) that loads its code and nothing else.
2. The judge loads the trusted reference (the base's ref.py in ``compare``, the user's in
   ``bench`` and ``run``) and the trusted setup() (:mod:`.contents`), lends each worker two
   arenas (:mod:`.arena`: placements, one picked at random per round), and checks that a head's
   own setup() asks for the same arguments as the trusted one.
3. Correctness: ``correctness_trials`` calls per side, each on contents drawn from entropy,
   outputs poisoned, the outputs compared in the judge against the reference it computed,
   inputs checked unmodified.
4. Timing: rounds alternating the sides' order (A B, B A, ...) with the stopping rule of
   ``compare``; before every call the judge stages one of its versions (contents from entropy,
   expected outputs in the judge; made for that call's round alone where versions are cheap,
   else one of a pool of up to 8), poisons the outputs, flushes the cache and waits for the
   device, then asks the side to time one call, then checks that call's outputs. One side has
   work on the device at a time. A side whose timed call is wrong is ``incorrect``.

Events leave as the in-process worker's do (:mod:`kbench_ci.wire.protocol`), so the parent,
the verdicts and the report read a judged case like any other.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from kbench_ci.basefiles import Change, blame, reclaim, restore
from kbench_ci.errors import EnvironmentProblem, KbenchError, UserFileError
from kbench_ci.judge.arena import extent as arena_extent
from kbench_ci.judge.arena import make_arena
from kbench_ci.judge.breakdown import JUDGE, RECORD
from kbench_ci.judge.clock import ClockUnavailable, GpuClock
from kbench_ci.judge.contents import Maker, NoTrustedSetup, entropy_seed, trusted_maker
from kbench_ci.judge.handoff import Handoff
from kbench_ci.judge.sides import (
    STARTUP_TIMEOUT_S,
    SideFailed,
    SideWorker,
    end_side_strays,
    hold_all_but,
    short_of_space,
)
from kbench_ci.judge.state import HEAD_REFERENCE, Emit, Side
from kbench_ci.judge.trials import (
    CALL_TIMEOUT_S,
    FRESH_CALL_MAX_MS,
    VERSIONS,
    OwnReference,
    batch_size,
    batch_sizes,
    check_correctness,
    fresh_each_call,
    judge_outside_clock,
    make_version,
    round_calls,
    settle_gpu,
    time_in_rounds,
    trusted,
    turn,
    users_error,
)
from kbench_ci.measure.correctness import tolerance_function
from kbench_ci.measure.inputs import InputSet
from kbench_ci.measure.reference import describe_error, sync
from kbench_ci.measure.staging import version_budget
from kbench_ci.measure.timing import CacheFlush, CudaEventTimer
from kbench_ci.measure.usercode import Problem, load_problem
from kbench_ci.results.model import VariantResult
from kbench_ci.scratch import remove_tree
from kbench_ci.suite.settings import (
    judge_placements,
    judge_settle_us,
    judge_touch_stride,
)
from kbench_ci.wire.protocol import (
    Begin,
    CaseJob,
    LoadError,
    TimingDescription,
    VariantDone,
    WorkerEvent,
)
from kbench_ci.wire.sideproto import (
    LEND_FAILED,
    Called,
    CallRequest,
    EndRequest,
    Loaded,
    LoadRequest,
    Made,
    MakeRequest,
)

#: placements (arenas) per side; each round picks one at random, so a buffer's place in memory
#: cannot side with either side
PLACEMENTS = judge_placements(os.environ)
#: a side's reads of its lent buffers' pages before each handed-over call (suite.settings)
TOUCH_STRIDE = judge_touch_stride(os.environ)
#: a side's spin after those reads, before its start event (suite.settings)
SETTLE_US = judge_settle_us(os.environ)
#: seconds a side may take to load (imports, a Triton compile) and to answer one call
LOAD_TIMEOUT_S = 300.0


class Judge:
    """The judge's state across the cases of one process: the side workers, kept warm by label."""

    def __init__(self, scratch: Path, environment: Mapping[str, str]) -> None:
        self.scratch = scratch
        self.environment = dict(environment)
        self.workers: dict[str, SideWorker] = {}
        #: by label, a worker started ahead of need for a re-measurement (:meth:`_start_spares`)
        self.spares: dict[str, SideWorker] = {}
        #: modules each side's worker imports as it starts (``triton``)
        self.preload: tuple[str, ...] = ()
        self._clocks: dict[str, GpuClock | None] = {}
        #: the event overhead (ms) the judge calibrated, by device: one for every side and case
        self._overheads: dict[str, float] = {}
        #: why the event overhead could not be calibrated, where it could not (the report says so)
        self.overhead_refused: str | None = None
        #: whether any side's code has been loaded in this judge's workers
        self._loaded_code = False
        #: why the GPU clock could not be had, where it could not (the report says so)
        self.clock_refused: str | None = None
        #: the case's head reference worker's load failure (message, hint), if it failed
        self._reference_failure: tuple[str, str | None] | None = None
        #: every change of the base's files found in this case (the pull request's doing)
        self._base_changes: list[Change] = []

    def clock(self, device: torch.device) -> GpuClock | None:
        """The judge's GPU clock on ``device``, made once; None on a CPU or where the driver refuses it."""
        if device.type != "cuda":
            return None
        key = str(device)
        if key not in self._clocks:
            try:
                self._clocks[key] = GpuClock(device)
            except ClockUnavailable as exc:
                self._clocks[key], self.clock_refused = None, str(exc)
        return self._clocks[key]

    def event_overhead_ms(self, device: torch.device, job: CaseJob) -> float:
        """The GPU's own cost of a CUDA event pair around a launch, subtracted from every side's
        samples (0 where the timer is not CUDA events). One figure for all sides, so its noise
        cannot set one side's process apart from another's: each side calibrating its own made a
        5 us kernel's two sides read several percent apart (docs/statistics.md). The parent's
        figure where it has one (the judge's own, from an earlier case of the run: the judge is
        the only writer of its events), else calibrated here, in the judge's process, the
        in-process worker's way (:meth:`CudaEventTimer.calibrate_overhead`) before the run's
        first case loads any side's code, so no side's GPU work is in it. (With a copy like a
        side's page reads ahead of the start event it read 3.65-3.90 us on an H100 against 2.94
        without, and the judged times went further below the in-process code's: not done.)"""
        if device.type != "cuda" or job.settings.timing_method != "cuda_event":
            return 0.0
        key = str(device)
        if job.event_overhead_ms is not None:
            self._overheads.setdefault(key, job.event_overhead_ms)
        if key not in self._overheads:
            if self._loaded_code:
                # Sides' code has run in this judge's workers (a run whose first cases were not
                # timed with events): nothing of theirs may run while the judge calibrates.
                hold_all_but(None)
            try:
                timer = CudaEventTimer(device, flush_l2=job.settings.flush_l2)
                self._overheads[key] = timer.calibrate_overhead()
            except RuntimeError as exc:  # out of memory for the flush, a lost context: uncorrected, and said
                self._overheads[key], self.overhead_refused = 0.0, f"{type(exc).__name__}: {exc}"
        return self._overheads[key]

    def worker(self, label: str, device: str) -> SideWorker:
        worker = self.workers.get(label)
        if worker is None or not worker.alive() or worker.device != device:
            if worker is not None:
                worker.stop()
                if worker.loaded_once:
                    # What a side's code left in its folders and caches (a bytecode file its
                    # next worker would import as it starts, before its calibration) goes
                    # with the worker it ran in: a head could end its worker to be served anew.
                    worker.remove_files()
            worker = self.workers[label] = SideWorker(label, device, self.scratch, self.environment, self.preload)
        return worker

    def adopt(self, workers: Mapping[str, SideWorker], preload: Sequence[str]) -> None:
        """Workers started before the judge imported torch (kbench_ci.judge.main), by label, and
        the modules every worker imports as it starts."""
        self.preload = tuple(preload)
        self.workers.update(workers)

    def close(self) -> None:
        for worker in (*self.workers.values(), *self.spares.values()):
            worker.stop()
        self.workers.clear()
        self.spares.clear()
        remove_tree(self.scratch)

    def run_case(self, job: CaseJob, emit: Emit) -> None:
        emit = _without_witness(emit)
        device = torch.device(job.settings.device)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        else:
            torch.set_num_threads(1)
        self._base_changes = []
        self._guard_base_files(job)  # before the judge reads the base's ref.py itself
        with RECORD.step(JUDGE, "ref.py and its setup() loaded"):
            problem = load_problem(Path(job.sides[0].ref))
            try:
                maker: Maker | None
                maker, maker_source = trusted_maker(job, problem, device)
            except NoTrustedSetup:
                maker, maker_source = None, ""
        with RECORD.step(JUDGE, "the event pair's cost calibrated"):
            overhead_ms = self.event_overhead_ms(device, job)  # before any side's code of the case loads
        remeasure = job.placement_pad_bytes > 0
        if remeasure:
            self._retire_workers(job)
        self._start_spares(job, device)
        sides = self._load(job, problem, device, emit)
        self._await_spares()
        reference = next((side for side in sides if side.label == HEAD_REFERENCE), None)
        if reference is not None:
            sides.remove(reference)
        self._reference_failed(job, sides, emit)
        description = "judged apart: nothing was timed (the case's inputs could not be made)"
        try:
            if maker is None:
                maker, maker_source = _side_maker(sides, job, device)
            description = _judge(sides, job, problem, maker, maker_source, device, emit, self, reference)
            if _failed_beside_the_head(sides):
                # The head's reference worker runs the pull request's code too: gone with the head
                # before the base is measured alone, its memory with it
                self._retire_reference(reference)
                reference = None
                sides, description = self._base_alone(sides, job, problem, maker, maker_source, device, emit, description)
        except (SideFailed, _NoInputs) as exc:
            # Only a solution's own setup() run in its worker fails this way (a trusted one's
            # failure is ref.py's, exit 2): that solution's error, and nothing else is judged.
            for side in sides:
                if side.ok:
                    side.fail("error", f"its own setup() could not make the inputs: {exc}" if side.label == job.sides[0].label
                              else f"not judged: the inputs could not be made ({exc})")
        finally:
            with RECORD.step(JUDGE, "the case ended (buffers, workers told, strays)"):
                self._end(sides)
                self._retire_reference(reference)
        self._guard_base_files(job)  # a change no load of the base met (the case's last turns)
        if self._base_changes:
            for side in sides:
                if side.label == job.sides[1].label:
                    side.fail("incorrect", blame(self._base_changes, job.base_files[0].path))
        for side in sides:
            emit(VariantDone(side.result))
        if remeasure:
            description += "; measured again in new processes (each side's worker started anew: a process's own bias is drawn again)"
        emit(TimingDescription(description, overhead_ms if job.settings.timing_method == "cuda_event" else None))

    def _retire_workers(self, job: CaseJob) -> None:
        """Every worker of ``job``'s sides and baselines ended, so the case is measured in new
        processes. A re-measurement (the parent asks one of a suspected change, and says so by
        laying its buffers out anew) must not meet the same processes: a kernel of ~5 us runs a
        few percent slower in one process than in another for that process's whole life, the
        same sign on every buffer and every stream (docs/statistics.md, "Each process has its own
        bias"). Kept warm, a side's process would carry that into the re-measurement, and an A/A
        case could read `slower` twice (on an H100: cvadd 2^20 +8.68%, then +7.53%)."""
        for label in job.variant_labels():
            worker = self.workers.pop(label, None)
            if worker is not None:
                worker.stop()
                worker.remove_files()
            spare = self._spare(label, job.settings.device)
            if spare is not None:
                del self.spares[label]
                spare.claim()
                self.workers[label] = spare

    def _start_spares(self, job: CaseJob, device: torch.device) -> None:
        """A spare worker for each side of a compare on a GPU that has none, so that a
        re-measurement's new processes have started already (torch, triton, the CUDA context:
        1-2 s a pair on an H100 host, in the case). Started as the case's sides load, and
        waited for before any side is timed (:meth:`_await_spares`): nothing of a spare's start
        runs beside a timed call. Not on a CPU, where a start would take the cores from the
        case's loads."""
        if device.type != "cuda" or len(job.sides) < 2:
            return
        for side in job.sides:
            if self._spare(side.label, job.settings.device) is None:
                self.spares[side.label] = SideWorker(side.label, job.settings.device, self.scratch, self.environment,
                                                     self.preload, spare=True)

    def _spare(self, label: str, device: str) -> SideWorker | None:
        """``label``'s spare where it can serve on ``device``; one that cannot (it died, or was
        started for another device) is stopped, its files removed, and forgotten."""
        spare = self.spares.get(label)
        if spare is None or (spare.alive() and spare.device == device):
            return spare
        self._drop_spare(label)
        return None

    def _drop_spare(self, label: str) -> None:
        """``label``'s spare stopped, its files removed, and forgotten."""
        spare = self.spares.pop(label)
        spare.stop()
        spare.remove_files()

    def _await_spares(self) -> None:
        """Every spare's start finished (its :class:`Ready` read); one that failed to start is
        dropped (a re-measurement then starts a worker as before)."""
        for label, spare in list(self.spares.items()):
            with RECORD.step(JUDGE, "spare workers' start awaited"):
                spare.wait_started(STARTUP_TIMEOUT_S)
            if spare.start_failure is not None:
                self._drop_spare(label)

    def _retire_reference(self, reference: Side | None) -> None:
        """The head's reference worker ended, its buffers released (never kept warm: it runs the
        pull request's code, which must hold nothing past its case)."""
        if reference is not None:
            self._end([reference])
        worker = self.workers.pop(HEAD_REFERENCE, None)
        if worker is not None:
            worker.stop()

    def _reference_failed(self, job: CaseJob, sides: list[Side], emit: Emit) -> None:
        """The head's changed ref.py could not be loaded in its worker: the head cannot be checked,
        and it is the user's file to fix (exit 2), as in process. The worker runs the pull
        request's code, so its own word on the exit code is not taken (a 3 would stop the run)."""
        if self._reference_failure is None:
            return
        message, hint = self._reference_failure
        for side in sides:
            if side.label == job.sides[1].label and side.ok:
                side.fail("error", f"{message} ({hint})" if hint else message)
                emit(users_error(side.label, message, hint))

    def _end(self, sides: list[Side]) -> None:
        """The case's buffers dropped, every worker told the case is over, and whatever a side
        left running outside its worker (a daemon it double-forked) ended."""
        for side in sides:
            _reclaim_arenas(side)
            for arena in (*side.arenas, *side.arenas_extra):
                arena.release()
            side.arenas, side.arenas_extra = [], []
            side.worker.resume()
            if side.worker.alive():
                try:
                    side.worker.send(EndRequest())
                except SideFailed:
                    side.worker.stop()
        end_side_strays()

    def _guard_base_files(self, job: CaseJob) -> None:
        """The base's files put back as the parent recorded them before any pull-request code ran
        (:mod:`kbench_ci.basefiles`); what changed is kept, to lay on the head. Landlock keeps
        a side from writing them, not from ``chmod``: a head that set the base's helper to mode
        000 at its load failed the next fresh base worker, and the 30x slower head read ``fixed``."""
        if job.base_files:
            with RECORD.step(JUDGE, "the base's files checked"):
                self._base_changes.extend(restore(job.base_files))

    def _base_alone(
        self, sides: list[Side], job: CaseJob, problem: Problem, maker: Maker, maker_source: str, device: torch.device,
        emit: Emit, description: str,
    ) -> tuple[list[Side], str]:
        """The base failed while a head that passed was beside it: measured again with the head's
        worker gone. A base that then passes failed because of the head (it took the device's
        memory, say): an error of the head, never a ``fixed`` one. A base that fails alone too
        is broken on its own."""
        base, head = sides[0], sides[1]
        self._end(sides)
        head_worker = self.workers.pop(head.label)
        head_worker.stop()
        head_worker.remove_files()
        job_alone = replace(job, sides=job.sides[:1], baselines=())
        again = self._load(job_alone, problem, device, emit)
        alone_description = description
        if again:
            alone_description = _judge(again, job_alone, problem, maker, maker_source, device, emit, self)
        if not again or not again[0].ok:
            full = bool(again) and (again[0].result.message or "").startswith(NOT_COMPARABLE)
            short = None if full else short_of_space((self.scratch, Path("/dev/shm")))
            if full or short is not None:
                # Alone too, but with the disk still full (a head's file where the judge cannot
                # name it as the head's: /dev/shm): not the base's failure to own, nor a fix.
                why = again[0].result.message if full else f"while {short}"
                _not_comparable(head, f"the base failed beside this head ({base.result.message}) and again without it, "
                                      f"{why}: not comparable")
            return sides, description
        _not_comparable(head, (
            f"the base failed beside this head ({base.result.message}) and passed when measured again without it: "
            "the head reached into the base's turn; not comparable"
        ))
        return [again[0], head, *sides[2:]], alone_description

    def _load(self, job: CaseJob, problem: Problem, device: torch.device, emit: Emit) -> list[Side]:
        sides: list[Side] = []
        self._loaded_code = True
        clock = self.clock(device) if job.settings.timing_method == "cuda_event" else None
        # Every worker this case needs starts now, together: each imports torch and creates its
        # CUDA context (seconds) while the others do; they load their code one at a time below.
        witness = _needs_witness(job)
        own_reference = _runs_head_reference(job)
        self._reference_failure = None
        with RECORD.step("workers", "started (torch, a CUDA context), all at once"):
            started = [self.worker(label, job.settings.device)
                       for label in (*(spec.label for spec in job.sides), *job.baselines, *((WITNESS,) if witness else ()),
                                     *((HEAD_REFERENCE,) if own_reference else ()))
                       if label not in job.skip]
            # None paused before all have started (a paused start is a start one after the other).
            for worker in started:
                worker.wait_started(STARTUP_TIMEOUT_S)
        common = _load_settings(job)
        entries = [(spec.label, "solution", LoadRequest(side=spec, **common)) for spec in job.sides]
        entries += [(name, "baseline", LoadRequest(baseline=name, ref=str(problem.path), **common))
                    for name in job.baselines]
        if witness:
            entries.append((WITNESS, "baseline", LoadRequest(baseline=WITNESS_BASELINE, ref=str(problem.path), **common)))
        if own_reference:  # the head's ref.py, loaded by that worker alone (the judge only names it)
            entries.append((HEAD_REFERENCE, "baseline",
                            LoadRequest(baseline=WITNESS_BASELINE, ref=job.sides[1].ref, **common)))
        for index, (label, role, request) in enumerate(entries):
            if label in job.skip:
                continue
            emit(Begin(label, "load"))
            kind = request.side.implementation if request.side is not None else label
            result = VariantResult(label=label, kind=kind, role=role, status="ok")  # type: ignore[arg-type]
            try:
                worker = self.worker(label, job.settings.device)
                # Loading runs the side's code (imports, a first call): a turn like any other.
                # Every other worker paused, and every process a side left outside its worker
                # ended: a daemon the last load double-forked (re-parented to the judge, so not
                # under the worker a pause stops) ran through the next side's load when the
                # others were only paused (daemon_burn's orphan, running).
                hold_all_but(worker)
                # Every other worker stopped, every stray ended: nothing of the pull request's
                # runs between these and the load
                if index == 0 and role == "solution":
                    self._guard_base_files(job)
                if trusted_load(job, label):
                    # A root side can chattr +i another's folders (Landlock does not cover it):
                    # a compiled base copies its library into its own folder as it loads
                    reclaim(worker.writable)
                worker.resume()
                worker.loaded_once = True
                with RECORD.step(label, "load (imports, setup, a first call)"):
                    loaded = worker.ask(request, Loaded, timeout_s=LOAD_TIMEOUT_S)
                    if isinstance(loaded, Loaded):
                        RECORD.split(label, "load: its compile step", _seconds(loaded.compile_ms))
                        RECORD.split(label, "load: its first call (JIT compiles)", _seconds(loaded.first_call_ms))
            except SideFailed as exc:
                emit(VariantDone(replace(result, status="error", message=f"loading failed: {exc}")))
                if label == HEAD_REFERENCE:
                    self._reference_failure = (f"{Path(job.sides[1].ref).name} could not be loaded: {exc}", None)
                continue
            assert isinstance(loaded, Loaded)
            if loaded.error is not None:
                # Loaded.error is the message with its hint in brackets (KbenchError.one_line)
                message = loaded.error.removesuffix(f" ({loaded.hint})") if loaded.hint else loaded.error
                if label == HEAD_REFERENCE:
                    self._reference_failure = (message, loaded.hint)
                status = "unavailable" if role == "baseline" and loaded.exit_code != 1 else "error"
                emit(VariantDone(replace(result, status=status, message=loaded.error)))  # type: ignore[arg-type]
                if index == 0 and role == "solution":
                    # The first side's: a compare's base (trusted), or bench's and run's solution,
                    # the user's own. Exit 2 is the user's files or settings, as in process.
                    emit(LoadError(label, "UserFileError" if loaded.exit_code == 2 else "KbenchError", loaded.exit_code,
                                   message, loaded.hint, "user" if loaded.exit_code == 2 else "kernel"))
                continue
            notes = tuple(note for note in loaded.notes if note not in _LAYERS)
            result = replace(result, notes=notes, first_call_ms=loaded.first_call_ms, compile_ms=loaded.compile_ms)
            layers = tuple(note for note in loaded.notes if note in _LAYERS)
            sides.append(Side(label, role, worker, result, template=dict(loaded.template), layers=layers,
                               layout=loaded.layout, scalars=dict(loaded.scalars), outputs=loaded.outputs,
                               inplace=loaded.inplace))
        # Nothing a side's load started runs on: every worker paused, every stray ended, and (on
        # a GPU) the GPU quiet before anything is timed.
        hold_all_but(None)
        if clock is not None:
            settle_gpu(clock, sides)
        return sides


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1e3


def trusted_load(job: CaseJob, label: str) -> bool:
    """A load of trusted code: a compare's base, a baseline or the witness; not a compare's head,
    its changed ref.py's worker, nor bench's and run's solution (the user's own)."""
    return label != HEAD_REFERENCE and label not in (spec.label for spec in job.sides[1:]) and (
        len(job.sides) == 2 or label != job.sides[0].label)


def _load_settings(job: CaseJob) -> dict[str, Any]:
    """What every LoadRequest of ``job`` carries besides what it loads. A side reports raw event
    times (no overhead of its own to calibrate): the judge subtracts its one calibration from
    every side's (Judge.event_overhead_ms)."""
    return {"device": job.settings.device, "dims": dict(job.dims), "timing_method": job.settings.timing_method,
            "num_warmup": job.settings.num_warmup, "event_overhead_ms": 0.0, "touch_stride": TOUCH_STRIDE,
            "settle_us": SETTLE_US, "flush_l2": job.settings.flush_l2}


#: the sandbox layer that keeps a side's writes to its own folders (kbench_ci.side.harden)
WRITES_CONFINED = "landlock-write"

def _judge(
    sides: list[Side], job: CaseJob, problem: Problem, maker: Maker, maker_source: str, device: torch.device, emit: Emit,
    judge: Judge, reference: Side | None = None,
) -> str:
    """Correctness and timing of ``sides`` (their results are set, not emitted); the timing
    description of the case. ``reference``: the worker of the head's changed ref.py."""
    tolerance_for = tolerance_function(job.sides[0], problem)  # the trusted side's
    try:
        template = maker(entropy_seed())
    except (KbenchError, SideFailed):
        raise
    except Exception as exc:
        raise UserFileError(f"{maker_source} raised {type(exc).__name__}: {exc}", hint="fix the trusted setup()") from exc
    _check_goalposts(sides, template, job)
    with RECORD.step(JUDGE, "buffers lent (IPC)"):
        placements = _lend(sides, template, device)
        if reference is not None:
            _lend([reference], template, device, placements=1)
    flush = CacheFlush(device, enabled=job.settings.flush_l2)
    clock = judge.clock(device) if job.settings.timing_method == "cuda_event" else None
    overhead_ms = judge.event_overhead_ms(device, job)
    handoff = Handoff(device, flush, clock, event_overhead_ms=overhead_ms)
    own = None if reference is None else OwnReference(
        side=reference, sides=[*sides, reference], clock=handoff.clock, device=device, name=Path(job.sides[1].ref).name,
        head=job.sides[1].label, emit=emit)
    for side in sides:
        if side.ok:
            turn(sides, side, handoff.clock)
        if side.ok:
            with RECORD.step(side.label, "correctness trials"):
                check_correctness(side, job, problem, maker, tolerance_for, device, handoff, emit,
                                  own_reference=own if own is not None and side.label == job.sides[1].label else None)
    live = [side for side in sides if side.ok]
    if (reason := job.why_not_timed({side.label: side.result.status for side in sides})) is not None:
        for side in live:
            side.result = replace(side.result, not_timed=reason)
        live = []
    if live:
        versions, make_ms = [], []
        for _ in range(2):
            began = time.perf_counter()
            versions.append(make_version(maker, problem, device, label=live[0].label, emit=emit))
            sync(device)
            make_ms.append((time.perf_counter() - began) * 1e3)
        # Each version holds its inputs and its expected outputs in the judge: the in-process
        # worker's memory budget for versions says how many can be kept at once.
        each = max(1, sum(v.numel() * v.element_size() for v in (*versions[0].inputs.kwargs.values(),
                                                                 *versions[0].expected.values()) if isinstance(v, torch.Tensor)))
        affordable = max(2, version_budget(device) // each)
        calls_per_round = job.settings.trials_per_round + job.settings.discard_first
        fresh = fresh_each_call(max(make_ms), affordable, calls_per_round)
        batch = 1
        if fresh and (clock is not None or device.type == "cpu"):
            with RECORD.step(JUDGE, "buffers lent (IPC)"):
                batch = _batch(live, sides, template, device, placements, max(make_ms), affordable, calls_per_round)
            placements = max(placements, batch)
            calls_per_round = round_calls(calls_per_round, batch)
        while not fresh and len(versions) < min(VERSIONS, affordable):
            versions.append(make_version(maker, problem, device, label=live[0].label, emit=emit))
        with RECORD.step(JUDGE, "timed rounds, outside the steps named"):
            time_in_rounds(live, sides, versions, job, problem, maker, tolerance_for, device, handoff, emit, fresh=fresh,
                           own_reference=own, batch_calls=batch)
        with RECORD.step(JUDGE, "the outside clock's checks"):
            judge_outside_clock(sides, handoff, on_gpu=clock is not None)
        source = f"the inputs from {maker_source} at seeds drawn from the OS's entropy, made and kept by the judge"
        if fresh:
            contents = (f"every timed call on contents of its own: {source}, {calls_per_round} for each round alone (one "
                        f"version made in {max(make_ms):.2f} ms, within the {FRESH_CALL_MAX_MS:g} ms that allows it), so no "
                        f"cache of contents can hit; warm-ups on a version of their own")
        else:
            contents = (f"{len(versions)} versions of {source}, and one more made for each round alone, given at a random "
                        f"position in it (one version took {max(make_ms):.2f} ms to make: contents of their own for every "
                        f"call need at most {FRESH_CALL_MAX_MS:g} ms and memory for {calls_per_round + 1})")
        for side in live:
            checked = f"; outputs of all {side.checked} timed calls checked by the judge" if side.role == "solution" else ""
            sizes = " and ".join(str(size) for size in sorted(set(batch_sizes(calls_per_round, batch)), reverse=True))
            batched = (f"; the calls in batches of {sizes} under one span of the judge's clock, each on a placement of its "
                       f"buffers of its own, the cache flushed between them by the side and every call's sample the batch's mean"
                       if batch > 1 else f"; {placements} placement(s) of its buffers, taken in turn from a random one each round")
            side.result = replace(
                side.result, rounds_ms=tuple(side.rounds), round_versions=tuple(side.round_versions),
                discarded_ms=tuple(side.discarded),
                fresh_inputs=f"{contents}; one staged before every timed call{checked}{batched}",
            )
    for side in sides:
        side.worker.resume()
    # the layers every side's worker reports; a layer one side lacks was not in force for the case
    in_all = set(_LAYERS)
    for side in sides:
        in_all &= set(side.layers)
    layers = sorted(in_all) if sides else []
    if handoff.event_overhead_ms:
        overhead = (f", less the event pair's own cost ({handoff.event_overhead_ms * 1e3:.2f} us, calibrated once by the judge "
                    "against CUPTI and the same for every side)")
    elif judge.overhead_refused:
        overhead = f", uncorrected for the event pair's own cost (its calibration failed: {judge.overhead_refused})"
    else:
        overhead = ""
    if clock is not None:
        timer = (f"each side's own {job.settings.timing_method} timer{overhead}, held to the judge's GPU clock (%globaltimer "
                 "stamps around every call, the side's start gated by the judge's go and its end signalled on the GPU)")
    elif device.type == "cuda":
        timer = (f"each side's own {job.settings.timing_method} timer{overhead}, held only to the judge's host clock around each request "
                 f"({judge.clock_refused or 'no GPU clock with this timing method'}): a lie about time smaller than a "
                 "host round trip is not seen")
    else:
        timer = f"each side's own {job.settings.timing_method} timer, held to the judge's monotonic clock around each request"
    return (
        f"judged apart: each side in a process of its own (paused while another has the turn), inputs staged, outputs "
        f"checked and {'the L2 flushed' if flush.enabled else 'nothing flushed'} by a judge process that runs no "
        f"pull-request code; {timer}; sandbox: {', '.join(layers) or 'none available'}{_given_seeds_note(job.settings.seeds)}"
    )


def _given_seeds_note(seeds: tuple[int, ...]) -> str:
    """What a case's description adds where ``--seeds`` chose its correctness trials' seeds:
    the judge did not draw them, so a kernel could have known them in advance."""
    if not seeds:
        return ""
    return (f"; correctness trials at the seeds given by --seeds ({', '.join(map(str, seeds))}), chosen, not drawn: a "
            "kernel could have known them, so this checks those contents again and is no judged verdict")


def _batch(
    live: list[Side], sides: list[Side], template: InputSet, device: torch.device, placements: int, make_ms: float,
    affordable: int, calls_per_round: int,
) -> int:
    """Calls per batch for the case's timed rounds (trials.batch_size), from its correctness
    trials' own times (the trusted sides', where there are any: a head cannot make its own
    batches short), each side lent a placement for every call of a batch. 1 where
    one call already spans the target, or where contents of their own for every call of the
    batched rounds would take more than the memory for versions or time to make."""
    trusted_own = [own for side in live if trusted(side) for own in side.trial_own_us]
    own = trusted_own or [own for side in live for own in side.trial_own_us]
    if not own:
        return 1
    # no more calls than a round has: the samples a user asks for stay as many
    wanted = min(batch_size(statistics.median(own), affordable - 1), calls_per_round)
    while wanted > 1 and not fresh_each_call(make_ms, affordable, round_calls(calls_per_round, wanted)):
        wanted //= 2
    if wanted <= placements:
        return wanted
    _lend(sides, template, device, placements=wanted, first=placements)
    lent = min((len(side.arenas) for side in live if side.ok), default=1)
    return max(1, min(wanted, lent))


#: the clock's witness: where a case times no trusted side (``bench`` or ``run`` with no
#: baseline), the judge times ref.py's reference (trusted there) beside the solution, in a worker
#: of its own, as the handoff the solution's gap is judged against; it is not reported
WITNESS = "clock-witness"
WITNESS_BASELINE = "pytorch-eager"


def _needs_witness(job: CaseJob) -> bool:
    """``bench`` or ``run`` (the one side is the user's "solution", and the user's ref.py is
    trusted) with no baseline: nothing trusted would be timed beside the solution. A compare's
    head with no base is ``added`` whatever its time, and its ref.py is the pull request's."""
    return not job.baselines and [spec.label for spec in job.sides] == ["solution"]


def _runs_head_reference(job: CaseJob) -> bool:
    """A compare whose head changed ref.py (the parent compared the files): its reference runs
    in a worker of its own, for the head's own correctness and, accepted, its timed calls."""
    return job.head_reference_changed and len(job.sides) == 2 and job.sides[1].label not in job.skip


def _without_witness(emit: Emit) -> Emit:
    """``emit``, less every event of the witness and the head's reference worker (the parent
    knows no such variants): their progress, their load, their results."""

    def emit_others(event: WorkerEvent) -> None:
        result = getattr(event, "result", None)
        hidden = (WITNESS, HEAD_REFERENCE)
        if getattr(event, "variant", None) not in hidden and getattr(result, "label", None) not in hidden:
            emit(event)

    return emit_others


#: the placement number of the buffers a side's own setup() fills (_side_maker)
INBOX_SLOT = 1_000


def _side_maker(sides: list[Side], job: CaseJob, device: torch.device) -> tuple[Maker, str]:
    """No trusted setup() exists (``bench`` or ``run`` of a Python solution whose ref.py has
    none, a kernel new in the pull request): the inputs come from the solution's own setup(),
    run in its worker at seeds the judge draws, copied out through buffers of their own. The
    solution then chooses its inputs, and the report says so."""
    owner = next((side for side in sides if side.label == job.sides[0].label and side.ok and side.layout), None)
    if owner is None:
        raise _NoInputs("the solution did not load, and no trusted setup() says what its inputs are")
    template: dict[str, Any] = {**job.dims, **owner.scalars}
    for lent in owner.layout:
        extent = lent.storage_offset + arena_extent(lent.size, lent.stride)
        storage = torch.empty(max(extent, 1), dtype=getattr(torch, lent.dtype), device=device)
        template[lent.name] = storage.as_strided(lent.size, lent.stride, lent.storage_offset)
    owner.result = replace(owner.result, notes=(*owner.result.notes, (
        "the solution chose its inputs: no trusted setup() exists (none in ref.py), so its own setup() made them, "
        "at seeds the judge drew")))
    inbox = make_arena(template, owner.outputs, device, slot=INBOX_SLOT)
    owner.arenas_extra.append(inbox)
    owner.worker.send(inbox.request, fds=inbox.fds)
    names = tuple(lent.name for lent in owner.layout)

    def make(seed: int) -> InputSet:
        paused = owner.worker.paused
        owner.worker.resume()
        try:
            made = owner.worker.ask(MakeRequest(seed=seed, slot=INBOX_SLOT), Made, timeout_s=CALL_TIMEOUT_S)
        finally:
            if paused:
                owner.worker.pause()
        assert isinstance(made, Made)
        if made.error is not None:
            raise SideFailed(f"its setup() failed at seed {seed}: {made.error}")
        sync(device)
        copied = InputSet(kwargs={**template, **{name: inbox.views[name] for name in names}}, output_names=owner.outputs,
                          seed=seed, inplace_names=owner.inplace).fresh_copy()
        return InputSet(kwargs=copied, output_names=owner.outputs, seed=seed, inplace_names=owner.inplace)

    return make, f"{owner.label}'s own setup(), run in its worker at seeds the judge drew (the solution chose its inputs)"


class _NoInputs(Exception):
    """Nothing can make the case's inputs: the case fails (the solution's load said why)."""


def _failed_beside_the_head(sides: list[Side]) -> bool:
    solutions = [side for side in sides if side.role == "solution"]
    return len(solutions) == 2 and solutions[0].label == "base" and not solutions[0].ok and solutions[1].ok


def _lend(
    sides: list[Side], template: InputSet, device: torch.device, *, placements: int | None = None, first: int = 0,
) -> int:
    """Each side's arenas, allocated in a random order across the sides (neither side always
    gets the memory allocated first); how many placements each side got (``placements``: so
    many, where the memory allows them). ``first``: the placements each side has already (more
    are lent for a batch)."""
    need = sum(
        (value.storage_offset() + arena_extent(tuple(value.shape), tuple(value.stride()))) * value.element_size()
        for value in template.kwargs.values() if isinstance(value, torch.Tensor)
    )
    wanted = placements or PLACEMENTS
    placements = min(wanted, first + _placements(len(sides), int(need), device, most=max(1, wanted - first)))
    if placements <= first:
        return first
    order = [(side, slot) for side in sides if side.ok for slot in range(first, placements)]
    random.SystemRandom().shuffle(order)
    for side in sides:
        if side.ok:
            _reclaim_arenas(side)
    for side, slot in order:
        if not side.ok:
            continue
        try:
            arena = make_arena(template.kwargs, template.output_names, device, slot=slot)
        except torch.cuda.OutOfMemoryError as exc:
            # Not a refusal of IPC: the GPU's memory is full, and a side's process may be what
            # holds it (a head that takes it all at load). No side's result means anything then.
            for each in sides:
                if each.ok:
                    each.fail("error", f"{NOT_COMPARABLE}: the GPU's memory was full when the judge lent the sides their "
                                       f"buffers ({describe_error(exc)}); a side's process may hold it")
            hold_all_but(None)
            return placements
        except RuntimeError as exc:  # the judge's own export of the buffers (CUDA IPC) refused
            raise _lending_refused(device, describe_error(exc)) from exc
        side.arenas.append(arena)
        try:
            side.worker.send(arena.request, fds=arena.fds)
        except SideFailed as exc:
            side.fail("error", f"could not be lent its buffers: {exc}")
    for side in sides:
        side.arenas.sort(key=lambda arena: arena.slot)
        if side.ok:
            hold_all_but(side.worker)  # its own turn to read the requests: every other worker stopped
            side.worker.resume()
            _mapped(side, device)
    hold_all_but(None)
    return placements


def _reclaim_arenas(side: Side) -> None:
    """The folder the judge makes a side's CPU arenas in, its own again: a root side can make
    another's folder immutable (``chattr +i``; Landlock leaves the ioctl alone), and the judge's
    arena for the base, or its removal, then failed."""
    reclaim([side.worker.folder], below=False)
    reclaim([side.worker.folder / "arenas"])


def _mapped(side: Side, device: torch.device) -> None:
    """Ask ``side`` for a call of nothing on each placement: it says there whether it mapped the
    buffers. A trusted side (a compare's base, a baseline) that could not is the machine's
    problem (exit 3), never that side's failure, which would read as a head that ``fixed`` it;
    a side that runs pull-request code could say so falsely, so its word fails it alone."""
    for arena in side.arenas:
        if not side.ok:
            return
        try:
            reply = side.worker.ask(CallRequest(slot=arena.slot, count=0), Called, timeout_s=LOAD_TIMEOUT_S)
        except SideFailed as exc:
            side.fail("error", f"could not be lent its buffers: {exc}")
            return
        assert isinstance(reply, Called)
        if reply.error is None:
            continue
        if reply.error.startswith(LEND_FAILED) and trusted(side):
            raise _lending_refused(device, reply.error)
        side.fail("error", reply.error)


def _lending_refused(device: torch.device, why: str) -> EnvironmentProblem:
    way = "CUDA IPC" if device.type == "cuda" else "a memfd handed over its socket"
    return EnvironmentProblem(
        f"this machine refuses what --isolation judge lends its sides' buffers through ({way}): {why}",
        hint="run with --isolation process here (one worker process for every side: docs/isolation.md says what that "
             "leaves within the kernel's reach), or on a runner that allows it (a container needs the host's IPC namespace)",
    )


def _placements(sides: int, need_bytes: int, device: torch.device, *, most: int = PLACEMENTS) -> int:
    """``most``, fewer where the arenas of every side would take more than a quarter of
    the memory free (the device's, or the scratch folder's disk on the CPU); at least one."""
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        stats = os.statvfs(tempfile.gettempdir())
        free = stats.f_bavail * stats.f_frsize
    affordable = free // 4 // max(1, sides * max(need_bytes, 1))
    return int(max(1, min(most, affordable)))


_LAYERS = frozenset({"not-dumpable", "no-ptrace-capability", "no-new-privs", WRITES_CONFINED, "landlock-signal", "seccomp"})


def _not_comparable(head: Side, message: str) -> None:
    """The head fails beside a base that failed because of it, or of the machine: an error,
    with no samples for a verdict to read."""
    head.fail("error", message)
    head.result = replace(head.result, rounds_ms=(), round_versions=(), discarded_ms=())


#: how a side's failure that is no side's doing begins (the machine's memory or disk was full)
NOT_COMPARABLE = "not comparable"


def _check_goalposts(sides: list[Side], template: InputSet, job: CaseJob) -> None:
    """A side whose own setup() asks for other arguments than the trusted one cannot be timed
    on the trusted inputs: it moved the goalposts (the in-process worker's rule for a changed
    ref.py: ``incorrect`` unless the case is accepted)."""
    trusted = {name: _describe(value) for name, value in template.kwargs.items() if isinstance(value, torch.Tensor)}
    trusted["outputs"] = ",".join(template.output_names)
    for side in sides:
        own = side.template
        if side.role != "solution" or not own or own == trusted:
            continue
        differences = [f"{name}: {own.get(name, 'absent')} instead of {trusted.get(name, 'absent')}"
                       for name in sorted(set(own) | set(trusted)) if own.get(name) != trusted.get(name)]
        what = "; ".join(differences[:3])
        if job.accept_changed_reference:
            side.fail("error", f"its setup() gives other arguments than the trusted one ({what}; accepted): not comparable")
        else:
            side.fail("incorrect", (
                f"its setup() gives other arguments than the trusted one ({what}): the inputs are the base's; "
                "keep them, or accept the change (--accept / the accept label)"
            ))


def _describe(value: torch.Tensor) -> str:
    return f"{str(value.dtype).removeprefix('torch.')} {tuple(value.shape)} {tuple(value.stride())}"


