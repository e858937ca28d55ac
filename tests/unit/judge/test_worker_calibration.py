"""Each judged worker's own cost of a call (kbench_ci.judge.calibration): from the workers'
figures to what is taken off each side's samples, and when the judge measures a figure."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kbench_ci.judge import case
from kbench_ci.judge import handoff as handoff_module
from kbench_ci.judge.calibration import (
    MAX_CORRECTION_MS,
    MAX_LEVEL_MS,
    WARM_UP_CALLS,
    Calibration,
    Corrections,
    centre_ms,
    corrections,
    kept,
)
from kbench_ci.judge.handoff import Handoff
from kbench_ci.judge.quiet import Quiet
from kbench_ci.judge.sides import SideFailed, SideWorker
from kbench_ci.judge.state import HEAD_REFERENCE, Side
from kbench_ci.measure.inputs import InputSet
from kbench_ci.measure.protocol import CaseJob, SideSpec
from kbench_ci.measure.sideproto import CALIBRATION_BASELINE, Called, EndRequest, LendRequest, Loaded, LoadRequest
from kbench_ci.measure.timing import CacheFlush
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.suite.settings import judge_calibrate_each

US = 1e-3  # ms


def test_each_side_loses_its_figure_less_the_cases_mean() -> None:
    adjust = corrections({"base": Calibration(5.00 * US, calls=195), "head": Calibration(5.24 * US, calls=195)}, each=True)
    assert adjust.by_label == pytest.approx({"base": -0.12 * US, "head": 0.12 * US})
    assert "measured on 195 trusted calls" in adjust.words
    assert "taken out: base -0.12 us, head +0.12 us" in adjust.words


def test_the_cases_level_stays_with_three_sides() -> None:
    adjust = corrections({"base": Calibration(5.1 * US, calls=10), "head": Calibration(5.4 * US, calls=10),
                          "pytorch-eager": Calibration(5.1 * US, calls=10)}, each=True)
    assert adjust.by_label == pytest.approx({"base": -0.1 * US, "head": 0.2 * US, "pytorch-eager": -0.1 * US})
    assert sum(adjust.by_label.values()) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("missing", "why"), [
    (None, "head's worker was not calibrated before its first load"),
    (Calibration(None, refused="its trusted calls failed: hung"), "head's worker has no figure (its trusted calls failed: hung)"),
])
def test_a_side_without_a_figure_leaves_every_side_as_it_was(missing: Calibration | None, why: str) -> None:
    adjust = corrections({"base": Calibration(5.0 * US, calls=10), "head": missing}, each=True)
    assert adjust.by_label == {}
    assert adjust.words == f"each worker's own cost of a call not taken out: {why}"


def test_a_correction_beyond_the_bound_is_said_and_none_is_taken_out() -> None:
    adjust = corrections({"base": Calibration(5.0 * US, calls=10), "head": Calibration(6.2 * US, calls=10)}, each=True)
    assert adjust.by_label == {}
    assert "not taken out: base's is beyond the ±0.50 us" in adjust.words
    assert "base -0.60 us, head +0.60 us" in adjust.words and "head 6.200 us" in adjust.words
    at_bound = corrections({"base": Calibration(5.0 * US, calls=10), "head": Calibration(5.0 * US + 2 * MAX_CORRECTION_MS)}, each=True)
    assert at_bound.by_label == pytest.approx({"base": -MAX_CORRECTION_MS, "head": MAX_CORRECTION_MS})


def test_with_cuptis_empty_kernel_each_side_loses_its_figure_less_cuptis_reading() -> None:
    """The figures are the handed-over empty calls less the judge's one overhead (taken in its
    own process, after a held stream); where the judge also has CUPTI's duration of that empty
    kernel, what is left above it is what a handed-over call's pair costs beyond the one
    overhead (negative on an H100: judged times read 0.6-0.7 us low), for every side alike,
    and each side loses its own figure less CUPTI's reading."""
    figures = {"base": Calibration(0.30 * US, calls=195), "head": Calibration(0.54 * US, calls=195)}
    adjust = corrections(figures, each=True, level_ms=1.0 * US)
    assert adjust.by_label == pytest.approx({"base": -0.70 * US, "head": -0.46 * US})
    assert "and the level: every side -0.58 us" in adjust.words and "CUPTI's 1.000 us" in adjust.words
    # without CUPTI's reading, only the differences go
    assert corrections(figures, each=True).by_label == pytest.approx({"base": -0.12 * US, "head": 0.12 * US})


def test_a_level_beyond_its_bound_moves_nothing_but_the_differences_still_go() -> None:
    figures = {"base": Calibration(3.0 * US, calls=10), "head": Calibration(3.2 * US, calls=10)}
    adjust = corrections(figures, each=True, level_ms=3.1 * US - MAX_LEVEL_MS - 0.1 * US)
    assert adjust.by_label == pytest.approx({"base": -0.1 * US, "head": 0.1 * US})
    assert "the level not moved: the figures' mean is +1.60 us from CUPTI's" in adjust.words
    # and where the differences themselves are out of bounds, nothing moves, level or not
    assert corrections({"base": Calibration(3.0 * US), "head": Calibration(4.5 * US)}, each=True, level_ms=3.5 * US).by_label == {}


def test_no_sides_no_words() -> None:
    assert corrections({}, each=True).by_label == {} and corrections({}, each=True).words == ""


def test_the_centre_is_the_mean_of_the_middle_half_between_the_clocks_ticks() -> None:
    tick = 0.032 * US
    # 60% of calls on one tick, 40% on the next, and two calls held up by something else
    samples = [5 * US] * 30 + [5 * US + tick] * 20 + [9 * US, 12 * US]
    centre = centre_ms(samples)
    assert 5 * US < centre < 5 * US + tick
    assert centre == pytest.approx(sum(sorted(samples)[13:39]) / 26)
    assert centre_ms([7 * US]) == 7 * US
    with pytest.raises(ValueError):
        centre_ms([])


def test_the_first_calls_are_warm_up() -> None:
    assert kept(list(range(20))) == list(range(WARM_UP_CALLS, 20))
    assert kept([1.0, 2.0, 3.0]) == [2.0, 3.0]  # at most half left out
    assert kept([1.0]) == [1.0] and kept([]) == []


class _ReplyingWorker:
    """A worker that answers every call with one time of ``sample_ms``."""

    paused = False

    def __init__(self, sample_ms: float) -> None:
        self.sample_ms = sample_ms

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def ask(self, request: object, kind: object, *, timeout_s: float) -> Called:
        return Called(samples_ms=(self.sample_ms,))


def _side(label: str, worker: object) -> Side:
    return Side(label, "solution", worker, VariantResult(label=label, kind="triton", role="solution", status="ok"))  # type: ignore[arg-type]


def test_the_handoff_takes_each_sides_correction_off_its_every_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handoff_module, "end_side_strays", lambda: [])
    cpu = torch.device("cpu")
    handoff = Handoff(cpu, CacheFlush(cpu, enabled=False), None, event_overhead_ms=2.0 * US,
                      corrections_ms={"base": -0.12 * US, "head": 0.12 * US})
    arena = SimpleNamespace(slot=0, views={})
    nothing = InputSet(kwargs={}, output_names=(), seed=0)
    times = {label: handoff.call(_side(label, _ReplyingWorker(10.0 * US)), arena, nothing).sample_ms  # type: ignore[arg-type]
             for label in ("base", "head", "pytorch-eager")}
    assert times == pytest.approx({"base": 8.12 * US, "head": 7.88 * US, "pytorch-eager": 8.0 * US})
    assert handoff._corrected(Called(samples_ms=(10.0 * US,)), "head") == pytest.approx((7.88 * US,))
    # the judge's clock is held against the side's own time less the one overhead only: the
    # correction of a slow process would otherwise read as time the side left out
    judged = handoff.call(_side("head", _ReplyingWorker(10.0 * US)), arena, nothing)  # type: ignore[arg-type]
    assert judged.sample_ms == pytest.approx(7.88 * US) and judged.reported_ms == pytest.approx(8.0 * US)
    # without corrections, only the one event overhead, as before
    plain = Handoff(cpu, CacheFlush(cpu, enabled=False), None, event_overhead_ms=2.0 * US)
    assert plain._corrected(Called(samples_ms=(10.0 * US,)), "head") == pytest.approx((8.0 * US,))


# --- when the judge calibrates a worker (kbench_ci.judge.case) ------------------------------------------------------


class _Worker:
    """A side's worker as the judge's loop sees it: every load answered, every request kept."""

    def __init__(self, label: str, folder: Path | None = None, *, alive: bool = True) -> None:
        self.label = label
        self.folder = folder or Path("/nonexistent")
        self.writable: tuple[Path, ...] = ()  # its folder and caches, reclaimed before a trusted load
        self.loaded_once = False
        self.calibration: Calibration | None = None
        self.requests: list[object] = []
        #: the descriptors lent with its requests (a CPU arena's memfd)
        self.lent_fds: list[int] = []
        self.paused = False
        self._alive = alive

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def wait_started(self, timeout_s: float) -> None:
        pass

    def alive(self) -> bool:
        return self._alive

    def send(self, request: object, *, fds: Sequence[int] = ()) -> None:
        self.requests.append(request)
        self.lent_fds += fds

    #: the sandbox layers its loads report
    layers: tuple[str, ...] = (case.WRITES_CONFINED,)

    def ask(self, request: object, kind: object, *, timeout_s: float) -> Loaded:
        self.requests.append(request)
        return Loaded(notes=self.layers)


def _job(device: str = "cuda", timing_method: str = "cuda_event", *, head_ref_changed: bool = False) -> CaseJob:
    settings = MeasureSettings(device=device, seed=42, correctness_trials=1, timing_method=timing_method,  # type: ignore[arg-type]
                               num_warmup=1, trials_per_round=3, discard_first=0, rounds=1, flush_l2=False)
    sides = tuple(SideSpec(label=label, solution="k.py", ref=f"{label}/ref.py", implementation="triton") for label in ("base", "head"))
    return CaseJob(case_id="k[N=1]", dims={"N": 1}, sides=sides, baselines=(), settings=settings, event_overhead_ms=0.003,
                   head_reference_changed=head_ref_changed)


_CLOCK = object()


def _judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: dict[str, _Worker], *, calls: int,
           clock: object = _CLOCK) -> tuple[case.Judge, list[tuple[str, bool, int]]]:
    """A judge over ``workers`` whose calibration is recorded: (label, whether it had loaded,
    requests it had been sent) for each worker calibrated."""
    monkeypatch.setattr(case, "CALIBRATE_CALLS", calls)
    monkeypatch.setattr(case, "hold_all_but", lambda current: None)
    monkeypatch.setattr(case, "settle_gpu", lambda clock, sides: None)
    judge = case.Judge(tmp_path, {})
    judge.workers.update(workers)  # type: ignore[arg-type]
    monkeypatch.setattr(judge, "worker", lambda label, device: judge.workers[label])
    monkeypatch.setattr(judge, "clock", lambda device: clock if device.type == "cuda" else None)
    calibrated: list[tuple[str, bool, int]] = []

    def calibrate(worker: _Worker, job: CaseJob, problem: object, device: torch.device, clock: object) -> _Worker:
        calibrated.append((worker.label, worker.loaded_once, len(worker.requests)))
        worker.calibration = Calibration(5.0 * US, calls=10)
        return worker

    monkeypatch.setattr(judge, "_calibrate", calibrate)
    return judge, calibrated


def _load(judge: case.Judge, job: CaseJob) -> list[Side]:
    return judge._load(job, SimpleNamespace(path=Path("base/ref.py")), torch.device(job.settings.device), lambda event: None)  # type: ignore[arg-type]


def test_a_new_worker_is_calibrated_before_its_first_load_and_never_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workers = {label: _Worker(label) for label in ("base", "head")}
    judge, calibrated = _judge(tmp_path, monkeypatch, workers, calls=50)
    sides = _load(judge, _job())
    # both before either loads (nothing loaded in either yet), in an order drawn each case
    assert sorted(calibrated) == [("base", False, 0), ("head", False, 0)]
    assert all(worker.loaded_once for worker in workers.values())
    assert [side.label for side in sides] == ["base", "head"] and all(side.ok for side in sides)

    _load(judge, _job())  # the next case, in the same (warm) workers: their figures stand
    assert len(calibrated) == 2
    judge.workers["head"] = _Worker("head")  # a new process (a re-measurement retired the old one)
    _load(judge, _job())
    assert calibrated[2:] == [("head", False, 0)]


@pytest.mark.parametrize(("calls", "device", "timing_method", "clock"), [
    (0, "cuda", "cuda_event", _CLOCK),  # the knob off (the default)
    (50, "cpu", "host_time", _CLOCK),  # a CPU: no GPU clock
    (50, "cuda", "host_time", _CLOCK),  # no events to calibrate
    (50, "cuda", "cuda_event", None),  # the driver refused the judge its GPU clock
])
def test_no_worker_is_calibrated_off_the_knob_or_the_gpu_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: int, device: str, timing_method: str, clock: object,
) -> None:
    workers = {label: _Worker(label) for label in ("base", "head")}
    judge, calibrated = _judge(tmp_path, monkeypatch, workers, calls=calls, clock=clock)
    _load(judge, _job(device, timing_method))
    assert calibrated == []
    assert all(worker.loaded_once and worker.calibration is None for worker in workers.values())


def test_the_heads_reference_worker_is_never_calibrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workers = {label: _Worker(label) for label in ("base", "head", HEAD_REFERENCE)}
    judge, calibrated = _judge(tmp_path, monkeypatch, workers, calls=50)
    _load(judge, _job(head_ref_changed=True))
    assert sorted(label for label, _, _ in calibrated) == ["base", "head"]


def test_the_order_of_the_calibrations_is_drawn_each_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fixed order (the base always first) would set the sides apart by when each was measured,
    the same way in every run."""
    orders = set()
    for _ in range(40):
        workers = {label: _Worker(label) for label in ("base", "head")}
        judge, calibrated = _judge(tmp_path, monkeypatch, workers, calls=50)
        _load(judge, _job())
        orders.add(tuple(label for label, _, _ in calibrated))
    assert orders == {("base", "head"), ("head", "base")}


def test_the_calibration_loads_the_trusted_call_and_measures_only_on_a_quiet_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(case, "hold_all_but", lambda current: None)
    monkeypatch.setattr(case, "CALIBRATE_CALLS", 40)
    seen: list[tuple[object, int]] = []

    def calibrate_worker(worker: object, request: LoadRequest, device: torch.device, handoff: Handoff, *, calls: int) -> Calibration:
        seen.append((request, calls))
        assert handoff.event_overhead_ms == 0.003 and handoff.corrections_ms == {}
        return Calibration(5.0 * US, calls=calls - WARM_UP_CALLS)

    monkeypatch.setattr(case, "calibrate_worker", calibrate_worker)
    monkeypatch.setattr(case, "wait_quiet", lambda probe: Quiet(True, 0.0, 30.0, 3))
    judge = case.Judge(tmp_path, {})
    judge._reading_tried.add("cuda")  # CUPTI's reading of the empty kernel: tested in test_event_overhead
    clock = SimpleNamespace(idle_latency_us=lambda: 30.0)
    problem = SimpleNamespace(path=Path("base/ref.py"))
    head = _Worker("head")
    assert judge._calibrate(head, _job(), problem, torch.device("cuda"), clock) is head  # type: ignore[arg-type]
    assert head.calibration == Calibration(5.0 * US, calls=35)
    ((request, calls),) = seen
    assert isinstance(request, LoadRequest) and calls == 40
    assert request.baseline == CALIBRATION_BASELINE and request.side is None
    assert request.ref == "base/ref.py"  # the trusted ref.py: the base's, in a compare
    assert request.touch_stride == case.TOUCH_STRIDE and request.settle_us == case.SETTLE_US  # the case's lead-in

    monkeypatch.setattr(case, "wait_quiet", lambda probe: Quiet(False, 3.0, 900.0, 40))
    busy = _Worker("head")
    judge._calibrate(busy, _job(), problem, torch.device("cuda"), clock)  # type: ignore[arg-type]
    assert busy.calibration is not None and busy.calibration.figure_ms is None
    assert "the GPU stayed busy for 3.0 s" in (busy.calibration.refused or "")
    assert len(seen) == 1


def test_a_worker_lost_in_its_calibration_is_replaced_without_a_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(case, "hold_all_but", lambda current: None)
    monkeypatch.setattr(case, "wait_quiet", lambda probe: Quiet(True, 0.0, 30.0, 3))
    monkeypatch.setattr(case, "calibrate_worker", lambda *args, **kwargs: Calibration(None, refused="its trusted calls failed: died"))
    judge = case.Judge(tmp_path, {})
    fresh = _Worker("head")
    monkeypatch.setattr(judge, "worker", lambda label, device: fresh)
    clock = SimpleNamespace(idle_latency_us=lambda: 30.0)
    serving = judge._calibrate(_Worker("head", alive=False), _job(), SimpleNamespace(path=Path("ref.py")),  # type: ignore[arg-type]
                               torch.device("cuda"), clock)  # type: ignore[arg-type]
    assert serving is fresh and fresh.calibration is not None and fresh.calibration.figure_ms is None
    assert (fresh.calibration.refused or "").startswith("its first worker ended in its trusted calls (its trusted calls failed")


class _Calls:
    """The handoff, as the calibration sees it: each call's time from ``times``, or a failure."""

    def __init__(self, times: list[float], fail_at: int | None = None) -> None:
        self.times = iter(times)
        self.fail_at = fail_at
        self.count = 0

    def call(self, side: Side, arena: object, inputs: InputSet) -> SimpleNamespace:
        self.count += 1
        if self.count == self.fail_at:
            raise SideFailed("its worker died")
        return SimpleNamespace(sample_ms=next(self.times))


def test_a_workers_figure_is_the_centre_of_its_calls_after_the_warm_up(tmp_path: Path) -> None:
    worker = _Worker("head", tmp_path)
    times = [50.0 * US] * WARM_UP_CALLS + [5.0 * US] * 18 + [5.032 * US] * 12 + [40.0 * US]
    request = case._calibration_request(_job("cpu", "host_time"), SimpleNamespace(path=Path("ref.py")))  # type: ignore[arg-type]
    calibration = case.calibrate_worker(worker, request, torch.device("cpu"), _Calls(times), calls=len(times))  # type: ignore[arg-type]
    assert calibration.calls == len(times) - WARM_UP_CALLS and calibration.refused is None
    assert calibration.figure_ms == pytest.approx(centre_ms(times[WARM_UP_CALLS:]))
    assert 5.0 * US < (calibration.figure_ms or 0.0) < 5.032 * US
    load, lend, end = worker.requests
    assert load is request and isinstance(lend, LendRequest) and lend.slot == case.CALIBRATION_SLOT and isinstance(end, EndRequest)
    assert [tensor.name for tensor in lend.tensors] == ["x"] and lend.output_names == ()
    (lent,) = worker.lent_fds
    with pytest.raises(OSError):  # its arena released: the judge's descriptor of it closed
        os.fstat(lent)


def test_a_calibration_that_fails_gives_no_figure_and_ends_its_case(tmp_path: Path) -> None:
    worker = _Worker("head", tmp_path)
    request = case._calibration_request(_job("cpu", "host_time"), SimpleNamespace(path=Path("ref.py")))  # type: ignore[arg-type]
    calibration = case.calibrate_worker(worker, request, torch.device("cpu"), _Calls([5.0 * US] * 20, fail_at=7), calls=20)  # type: ignore[arg-type]
    assert calibration.figure_ms is None and calibration.refused == "its trusted calls failed: its worker died"
    assert isinstance(worker.requests[-1], EndRequest)

    refusing = _Worker("head", tmp_path)
    refusing.ask = lambda request, kind, *, timeout_s: (refusing.requests.append(request), Loaded(error="no ref.py"))[1]  # type: ignore[method-assign]
    calibration = case.calibrate_worker(refusing, request, torch.device("cpu"), _Calls([]), calls=20)  # type: ignore[arg-type]
    assert calibration == Calibration(None, refused="its trusted call could not be loaded: no ref.py")
    assert [type(sent) for sent in refusing.requests] == [LoadRequest, EndRequest]


def test_a_worker_not_confined_to_its_folders_gets_no_figure(tmp_path: Path) -> None:
    """Without Landlock's write rule a side's code could have written the bytecode its next
    worker imports as it starts, before its calibration: such a figure is the side's to set."""
    worker = _Worker("head", tmp_path)
    worker.layers = ("not-dumpable", "no-new-privs")
    request = case._calibration_request(_job("cpu", "host_time"), SimpleNamespace(path=Path("ref.py")))  # type: ignore[arg-type]
    calibration = case.calibrate_worker(worker, request, torch.device("cpu"), _Calls([5.0 * US] * 20), calls=20)  # type: ignore[arg-type]
    assert calibration.figure_ms is None and "landlock-write not in force" in (calibration.refused or "")
    assert [type(sent) for sent in worker.requests] == [LoadRequest, EndRequest]  # not one call made


def test_a_real_worker_serves_on_after_its_calibration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The calibration is a case of its own in the worker (load, lend, calls, end), and its end
    must not retire the worker (kbench_ci.measure.isolation.ProcessBaseline.after_case): the
    side's own load comes next in the same process."""
    monkeypatch.setattr(handoff_module, "end_side_strays", lambda: [])  # only the test's own worker runs here
    ref = tmp_path / "ref.py"
    ref.write_text("def reference(x, **_):\n    return x + 1\n")
    cpu = torch.device("cpu")
    worker = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    try:
        request = case._calibration_request(_job("cpu", "host_time"), SimpleNamespace(path=ref))  # type: ignore[arg-type]
        calibration = case.calibrate_worker(worker, request, cpu, Handoff(cpu, CacheFlush(cpu, enabled=False), None), calls=12)
        assert calibration.refused is None and calibration.calls == 12 - WARM_UP_CALLS
        assert calibration.figure_ms is not None and calibration.figure_ms > 0
        loaded = worker.ask(LoadRequest(device="cpu", dims={"N": 1}, timing_method="host_time", num_warmup=0, event_overhead_ms=0.0,
                                        baseline="pytorch-eager", ref=str(ref)), Loaded, timeout_s=120)
        assert isinstance(loaded, Loaded) and loaded.error is None
        assert worker.alive()
    finally:
        worker.stop()


def test_the_case_takes_out_its_timed_sides_corrections_only_where_its_workers_were_calibrated(monkeypatch: pytest.MonkeyPatch) -> None:
    workers = {label: _Worker(label) for label in ("base", "head", "pytorch-eager")}
    for worker, figure in zip(workers.values(), (5.0, 5.2, 9.0), strict=True):
        worker.calibration = Calibration(figure * US, calls=45)
    sides = [_side(label, worker) for label, worker in workers.items()]
    sides[2].fail("unavailable", "not installed")  # not timed: its figure is no part of the case's mean
    monkeypatch.setattr(case, "CALIBRATE_CALLS", 50)
    monkeypatch.setattr(case, "CALIBRATE_EACH", True)
    adjust = case.process_corrections(sides, calibrated=True)
    assert adjust.by_label == pytest.approx({"base": -0.1 * US, "head": 0.1 * US})
    assert adjust.words.startswith("each worker's own cost of a call, measured on 45 trusted calls")
    assert case.process_corrections(sides, calibrated=False) == Corrections({}, "")
    levelled = case.process_corrections(sides, calibrated=True, level_ms=4.9 * US)
    assert levelled.by_label == pytest.approx({"base": 0.1 * US, "head": 0.3 * US})
    monkeypatch.setattr(case, "CALIBRATE_CALLS", 0)
    assert case.process_corrections(sides, calibrated=True) == Corrections({}, "")


def test_one_solution_beside_baselines_is_levelled_or_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench and run report a solution's absolute time: against the case's mean it would move by
    half its own process's cost and half its baselines'. Only with CUPTI's reading (each side
    by its own figure) is anything taken out."""
    monkeypatch.setattr(case, "CALIBRATE_CALLS", 50)
    monkeypatch.setattr(case, "CALIBRATE_EACH", True)
    workers = {"solution": _Worker("solution"), "pytorch-eager": _Worker("pytorch-eager")}
    for worker, figure in zip(workers.values(), (0.4, 0.2), strict=True):
        worker.calibration = Calibration(figure * US, calls=45)
    sides = [_side("solution", workers["solution"]),
             Side("pytorch-eager", "baseline", workers["pytorch-eager"],  # type: ignore[arg-type]
                  VariantResult(label="pytorch-eager", kind="pytorch-eager", role="baseline", status="ok"))]
    alone = case.process_corrections(sides, calibrated=True)
    assert alone.by_label == {} and "one solution" in alone.words
    levelled = case.process_corrections(sides, calibrated=True, level_ms=0.1 * US)
    assert levelled.by_label == pytest.approx({"solution": 0.3 * US, "pytorch-eager": 0.1 * US})


def test_by_default_only_the_level_is_taken_out_the_same_for_every_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """KBENCH_CI_JUDGE_CALIBRATE_EACH unset: no side moves against another (a worker's own
    difference put a 23 us kernel's A/A 2.1% off on an H100), and without CUPTI's reading of
    the empty kernel nothing moves at all, bench's one solution included."""
    monkeypatch.setattr(case, "CALIBRATE_CALLS", 50)
    assert judge_calibrate_each({}) is False
    assert case.CALIBRATE_EACH == judge_calibrate_each(os.environ)  # the judge reads the knob
    monkeypatch.setattr(case, "CALIBRATE_EACH", False)
    workers = {label: _Worker(label) for label in ("base", "head")}
    for worker, figure in zip(workers.values(), (0.30, 0.54), strict=True):
        worker.calibration = Calibration(figure * US, calls=195)
    sides = [_side(label, worker) for label, worker in workers.items()]
    levelled = case.process_corrections(sides, calibrated=True, level_ms=1.0 * US)
    assert levelled.by_label == pytest.approx({"base": -0.58 * US, "head": -0.58 * US})
    assert "the level taken out, every side -0.58 us" in levelled.words
    assert "differences (base -0.12 us, head +0.12 us) kept in" in levelled.words
    assert "KBENCH_CI_JUDGE_CALIBRATE_EACH=1" in levelled.words
    alone = case.process_corrections(sides, calibrated=True)
    assert alone.by_label == {} and "no CUPTI reading of the empty kernel" in alone.words
    solution = [_side("solution", workers["base"])]
    assert case.process_corrections(solution, calibrated=True).by_label == {}
    assert case.process_corrections(solution, calibrated=True, level_ms=0.1 * US).by_label == pytest.approx({"solution": 0.2 * US})


def test_the_level_alone_is_refused_beyond_its_bound_and_where_a_figure_is_missing_or_far() -> None:
    figures = {"base": Calibration(3.0 * US, calls=10), "head": Calibration(3.2 * US, calls=10)}
    far = corrections(figures, each=False, level_ms=3.1 * US - MAX_LEVEL_MS - 0.1 * US)
    assert far.by_label == {} and "the figures' mean is +1.60 us from CUPTI's" in far.words
    assert corrections(figures, each=False, level_ms=3.0 * US).by_label == pytest.approx({"base": 0.1 * US, "head": 0.1 * US})
    assert corrections({"base": Calibration(3.0 * US), "head": None}, each=False, level_ms=3.0 * US).by_label == {}
    # a figure far from the others says it was measured under something else: nothing moves
    far_apart = corrections({"base": Calibration(3.0 * US), "head": Calibration(4.5 * US)}, each=False, level_ms=3.5 * US)
    assert far_apart.by_label == {} and "base's figure is more than ±0.50 us from the figures' mean" in far_apart.words


class _Stoppable:
    def __init__(self, label: str, *, alive: bool = True, loaded_once: bool = True) -> None:
        self.label, self.device, self.loaded_once = label, "cuda", loaded_once
        self._alive = alive
        self.done: list[str] = []

    def alive(self) -> bool:
        return self._alive

    def stop(self) -> None:
        self.done.append("stopped")

    def remove_files(self) -> None:
        self.done.append("files removed")


def test_a_remeasured_case_gets_new_workers_and_the_old_ones_files_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = case.Judge(tmp_path, {})
    old = {label: _Stoppable(label) for label in ("base", "head", case.WITNESS)}
    judge.workers.update(old)  # type: ignore[arg-type]
    judge._retire_workers(_job())
    assert old["base"].done == old["head"].done == ["stopped", "files removed"]
    assert old[case.WITNESS].done == [] and set(judge.workers) == {case.WITNESS}


def test_a_dead_worker_that_ran_a_sides_code_is_replaced_without_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A head that ends its own worker gets a new one, which imports torch's bytecode from the
    side's cache as it starts, before any calibration: what the old one's code left there
    must go with it."""
    started: list[str] = []
    monkeypatch.setattr(case, "SideWorker", lambda label, device, *args: started.append(label) or _Stoppable(label, loaded_once=False))
    judge = case.Judge(tmp_path, {})
    dead, fresh_dead = _Stoppable("head", alive=False), _Stoppable("base", alive=False, loaded_once=False)
    judge.workers.update({"head": dead, "base": fresh_dead})  # type: ignore[dict-item]
    judge.worker("head", "cuda")
    judge.worker("base", "cuda")
    assert dead.done == ["stopped", "files removed"]
    assert fresh_dead.done == ["stopped"]  # never loaded anything: nothing of a side's to remove
    assert started == ["head", "base"]


def test_no_side_of_the_case_has_loaded_when_any_worker_is_calibrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workers = {label: _Worker(label) for label in ("base", "head", "pytorch-eager")}
    judge, _ = _judge(tmp_path, monkeypatch, workers, calls=50)
    loaded_when: list[bool] = []

    def calibrate(worker: _Worker, job: CaseJob, problem: object, device: torch.device, clock: object) -> _Worker:
        loaded_when.append(any(other.loaded_once or other.requests for other in workers.values()))
        worker.calibration = Calibration(5.0 * US, calls=10)
        return worker

    monkeypatch.setattr(judge, "_calibrate", calibrate)
    _load(judge, replace(_job(), baselines=("pytorch-eager",)))
    assert loaded_when == [False, False, False]


def test_every_new_worker_has_started_before_any_is_paused_or_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker paused while it imports torch starts only when the other side's load is done: a
    fresh pair of workers (a re-measured case, a changed-only run) took ~7 s on an H100 host.
    The judge lets them all start before it pauses any."""
    events: list[tuple[str, str]] = []

    class _Starting(_Worker):
        def wait_started(self, timeout_s: float) -> None:
            events.append(("started", self.label))

        def pause(self) -> None:
            events.append(("paused", self.label))

        def ask(self, request: object, kind: object, *, timeout_s: float) -> Loaded:
            events.append(("asked", self.label))
            return super().ask(request, kind, timeout_s=timeout_s)

    workers = {label: _Starting(label) for label in ("base", "head")}
    judge, _ = _judge(tmp_path, monkeypatch, workers, calls=0)  # type: ignore[arg-type]
    # a hold of every worker but one pauses each of the others
    monkeypatch.setattr(case, "hold_all_but", lambda current: events.append(("paused", "all but " + (current.label if current else "none"))))
    _load(judge, _job())
    first_other = min(index for index, (what, _) in enumerate(events) if what != "started")
    assert {label for what, label in events[:first_other] if what == "started"} == {"base", "head"}
    assert ("asked", "base") in events and ("asked", "head") in events
    assert any(what == "paused" for what, _ in events)


def test_every_load_is_a_turn_every_other_worker_held_and_strays_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A side's load runs its code (imports, a first call). Only pausing the other workers left
    running what a side's last load had double-forked away from its worker (re-parented to the
    judge): a daemon of the head's ran through the next load, a baseline's. Each load comes
    after a hold of every worker but the loading one, the hold that also ends such strays."""
    events: list[tuple[str, str]] = []

    class _Asked(_Worker):
        def ask(self, request: object, kind: object, *, timeout_s: float) -> Loaded:
            events.append(("asked", self.label))
            return super().ask(request, kind, timeout_s=timeout_s)

    workers = {label: _Asked(label) for label in ("base", "head", "pytorch-eager")}
    judge, _ = _judge(tmp_path, monkeypatch, workers, calls=0)  # type: ignore[arg-type]
    monkeypatch.setattr(case, "hold_all_but", lambda current: events.append(("held for", current.label if current else "")))
    _load(judge, replace(_job(), baselines=("pytorch-eager",)))
    asked = [index for index, (what, _) in enumerate(events) if what == "asked"]
    assert [events[index][1] for index in asked] == ["base", "head", "pytorch-eager"]
    for index in asked:
        assert events[index - 1] == ("held for", events[index][1]), events
    assert events[-1] == ("held for", "")  # and all held once the loads are done
