"""``--gpus``: cases spread over one warm worker per GPU.

The scheduler (:func:`kbench_ci.gate.distribute.distribute`) is tested as a pure function with fake
work; ``run_compare`` and ``run_suite`` with a fake worker that records the thread (the GPU's
lane) each job ran in.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kbench_ci.gate.compare import run_compare
from kbench_ci.gate.distribute import distribute
from kbench_ci.gate.lanes import lane_device, visible_device
from kbench_ci.gate.run import run_suite
from kbench_ci.measure.parent import WorkerOutcome
from kbench_ci.results.model import CaseResult
from kbench_ci.results.outcome import CompareRequest, GpuSlot, RunRequest
from kbench_ci.wire.protocol import CaseJob
from tests.support.suite_repo import TempRepo
from tests.unit.gate.test_compare_logic import FakeWorker, fake_nvcc
from tests.unit.gate.test_compare_logic import repo as repo  # noqa: F401  (the fixture)

TWO = (GpuSlot(0, "Fake GPU", 0), GpuSlot(1, "Fake GPU", 1))
SHARED = (GpuSlot(0, "Fake GPU", 0), GpuSlot(0, "Fake GPU", 1))


# --------------------------------------------------------------------------------------------
# The scheduler, pure
# --------------------------------------------------------------------------------------------


def test_every_item_runs_exactly_once_concurrently_and_results_reach_the_calling_thread() -> None:
    items = list(range(12))
    ran: list[tuple[str, int]] = []
    ran_lock = threading.Lock()
    both_lanes_busy = threading.Barrier(2, timeout=10)  # fails unless two items run at once
    delivered: list[tuple[int, int, str]] = []

    def work(lane: str, index: int, item: int) -> int:
        if index < 2:
            both_lanes_busy.wait()
        with ran_lock:
            ran.append((lane, item))
        time.sleep(0.005)
        return item * 10

    distribute(items, ["gpu0", "gpu1"], work, lambda i, r: delivered.append((i, r, threading.current_thread().name)))
    assert sorted(item for _, item in ran) == items  # each exactly once
    assert {lane for lane, _ in ran} == {"gpu0", "gpu1"}
    assert sorted((i, r) for i, r, _ in delivered) == [(i, i * 10) for i in items]
    assert {name for _, _, name in delivered} == {threading.current_thread().name}


def test_one_lane_runs_in_order_in_the_calling_thread() -> None:
    seen: list[tuple[int, str]] = []
    distribute(["a", "b", "c"], ["only"], lambda lane, i, item: (i, threading.current_thread().name),
               lambda i, r: seen.append(r))
    assert seen == [(0, threading.current_thread().name), (1, threading.current_thread().name),
                    (2, threading.current_thread().name)]


def test_an_error_in_one_lane_keeps_the_case_running_in_the_other_and_hands_out_no_more() -> None:
    in_flight = threading.Barrier(2, timeout=10)
    ran: list[int] = []
    delivered: list[int] = []

    def work(lane: str, index: int, item: int) -> int:
        ran.append(index)
        if index < 2:
            in_flight.wait()
        if index == 1:
            raise RuntimeError("GPU 1 fell off the bus")
        time.sleep(0.3)  # still running when the other lane fails
        return item

    with pytest.raises(RuntimeError, match="fell off the bus"):
        distribute(list(range(6)), ["a", "b"], work, lambda i, r: delivered.append(i))
    assert delivered == [0]  # the other GPU's case was not lost
    assert sorted(ran) == [0, 1]  # and no further case was started


def test_an_error_while_recording_still_records_the_cases_in_flight() -> None:
    in_flight = threading.Barrier(2, timeout=10)
    delivered: list[int] = []

    def work(lane: str, index: int, item: int) -> int:
        if index < 2:
            in_flight.wait()
        if index == 1:
            time.sleep(0.3)
        if index >= 2:
            time.sleep(0.5)  # the lane that finished first is in item 2 when recording item 0 fails
        return item

    def record(index: int, result: int) -> None:
        delivered.append(index)
        if index == 0:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        distribute(list(range(6)), ["a", "b"], work, record)
    assert sorted(delivered) == [0, 1, 2]  # what was running is still recorded; nothing new started


def test_a_worker_sees_only_its_gpu() -> None:
    assert visible_device(1, {}) == "1"
    # A runner that gave this job GPUs 2 and 3: the parent's cuda:1 is the physical GPU 3.
    assert visible_device(1, {"CUDA_VISIBLE_DEVICES": "2,3"}) == "3"
    assert visible_device(0, {"CUDA_VISIBLE_DEVICES": "GPU-abc, GPU-def"}) == "GPU-abc"
    assert lane_device("cuda:3", TWO[1]) == "cuda:0" and lane_device("cuda:3", None) == "cuda:3"
    assert lane_device("cpu", TWO[1]) == "cpu"


# --------------------------------------------------------------------------------------------
# compare and run over two lanes, with a fake worker
# --------------------------------------------------------------------------------------------


class LaneRecorder:
    """Wraps a worker: records the thread (lane) of every job; the first two calls wait for
    each other, so the run fails unless two lanes measure at once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str, int]] = []  # case id, thread, rounds
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(2, timeout=10)

    def __call__(self, job: CaseJob, *, timeout_s: float, on_event: Any = None) -> tuple[CaseResult, WorkerOutcome]:
        with self.lock:
            self.calls.append((job.case_id, threading.current_thread().name, job.settings.rounds))
            first_two = len(self.calls) <= 2
        if first_two:
            self.barrier.wait()
        with self.lock:  # FakeWorker keeps a list of jobs: one at a time
            return self.inner(job, timeout_s=timeout_s, on_event=on_event)  # type: ignore[no-any-return]


def _request(repo: TempRepo, tmp_path: Path, out: str, **kwargs: Any) -> CompareRequest:  # noqa: F811
    return CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=tmp_path / out, **kwargs)


def test_compare_over_two_gpus_keeps_each_case_on_one_gpu_and_the_results_in_suite_order(
    repo: TempRepo, tmp_path: Path  # noqa: F811
) -> None:
    one = run_compare(_request(repo, tmp_path, "one"), worker=FakeWorker(), build_fn=fake_nvcc)
    recorder = LaneRecorder(FakeWorker())
    progress: list[Any] = []
    two = run_compare(_request(repo, tmp_path, "two", gpus=TWO), worker=recorder, build_fn=fake_nvcc,
                      on_progress=progress.append)
    # Same cases, same order, same verdicts as on one GPU.
    assert [c.case_id for c in two.cases] == [c.case_id for c in one.cases]
    assert [c.verdict for c in two.cases] == [c.verdict for c in one.cases]
    # Each case's jobs (base and head together, and the re-measurement) in one lane.
    lanes_of: dict[str, set[str]] = {}
    for case_id, thread, _ in recorder.calls:
        lanes_of.setdefault(case_id, set()).add(thread)
    assert all(len(threads) == 1 for threads in lanes_of.values()), lanes_of
    assert len({thread for _, thread, _ in recorder.calls}) == 2
    assert [rounds for case_id, _, rounds in recorder.calls if case_id == "slow[N=16]"] == [4, 8]
    # The case records the GPU of the lane that measured it; the workers are pinned (cuda:0).
    for case in two.cases:
        if case.case_id in lanes_of:
            (thread,) = lanes_of[case.case_id]
            assert case.gpu is not None and thread == f"kbench-lane-{case.gpu.position}"
    assert all(job.settings.device == "cuda:0" for job in recorder.inner.jobs)

    data = json.loads((tmp_path / "two" / "results.json").read_text())
    assert [c["case_id"] for c in data["cases"]] == [c.case_id for c in one.cases]
    assert {c["gpu_index"] for c in data["cases"]} == {0, 1}
    assert [g["index"] for g in data["gpus"]] == [0, 1] and data["gpus_shared"] is False
    report = (tmp_path / "two" / "benchmark.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| case"))
    assert " GPU " in header and "0 (Fake GPU)" in report and "1 (Fake GPU)" in report
    assert "not valid" not in report
    done = [p for p in progress if p.stage == "done"]
    assert sorted(p.index for p in done) == list(range(1, len(one.cases) + 1))
    assert {p.gpu for p in done} == {"0 (Fake GPU)", "1 (Fake GPU)"}
    # One GPU: no GPU column, no gpu index, as before.
    single = json.loads((tmp_path / "one" / "results.json").read_text())
    assert {c["gpu_index"] for c in single["cases"]} == {None} and single["gpus"] == []
    single_report = (tmp_path / "one" / "benchmark.md").read_text()
    assert " GPU " not in next(line for line in single_report.splitlines() if line.startswith("| case"))


def test_two_workers_on_one_gpu_say_plainly_that_the_timings_are_not_valid(
    repo: TempRepo, tmp_path: Path  # noqa: F811
) -> None:
    run_compare(_request(repo, tmp_path, "out", gpus=SHARED, kernels=("same", "slow")), worker=FakeWorker(),
                build_fn=fake_nvcc)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["gpus_shared"] is True
    report = (tmp_path / "out" / "benchmark.md").read_text()
    assert "Timings not valid" in report and "worker 1" in report


def test_an_error_in_one_gpus_thread_keeps_the_other_cases_results(repo: TempRepo, tmp_path: Path) -> None:  # noqa: F811
    inner = FakeWorker()

    class Breaks:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def __call__(self, job: CaseJob, **kwargs: Any) -> tuple[CaseResult, WorkerOutcome]:
            self.calls.append(job.case_id)
            if job.case_id == "wrong[N=16]":
                raise RuntimeError("the parent lost the worker")
            time.sleep(0.05)
            return inner(job, **kwargs)

    worker = Breaks()
    with pytest.raises(RuntimeError, match="lost the worker"):
        run_compare(_request(repo, tmp_path, "out", gpus=TWO), worker=worker, build_fn=fake_nvcc)
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    written = [c["case_id"] for c in data["cases"]]
    # Cases before it (both lanes) are kept, in suite order, once each; none ran twice.
    assert "same[N=16]" in written and "slow[N=16]" in written and "wrong[N=16]" not in written
    order = ["same[N=16]", "slow[N=16]", "wrong[N=16]", "raise[N=16]", "cu_base_broken[N=16]",
             "cu_head_broken[N=16]", "hot[N=16]", "new[N=16]", "gone[N=16]"]
    assert written == [case_id for case_id in order if case_id in written]
    counts = Counter(worker.calls)
    assert counts.pop("slow[N=16]") == 2 and set(counts.values()) == {1}  # slow: measured, then remeasured
    assert data["gate"]["passed"] is False and data["gate"]["complete"] is False


RUN_TOML = """[defaults]
rounds = 4
num_trials = 40
[[kernels]]
name = "add"
solution = "k/add.py"
ref = "k/ref.py"
shapes = [{N = 16}, {N = 32}, {N = 64}, {N = 128}]
"""


def test_run_over_two_gpus_records_each_cases_gpu(tmp_path: Path) -> None:
    repo = TempRepo(tmp_path / "repo")
    repo.commit({"kbench.toml": RUN_TOML, "k/ref.py": "def reference(**_): pass\n", "k/add.py": "# v1\ndef setup(**_):\n    pass\n\n\ndef run_kernel(**_):\n    pass\n"}, "base")
    recorder = LaneRecorder(FakeWorker())
    outcome = run_suite(RunRequest(start=repo.root, device="cuda:2", output_dir=tmp_path / "out", gpus=TWO),
                        worker=recorder)
    assert [c.case_id for c in outcome.cases] == [f"add[N={n}]" for n in (16, 32, 64, 128)]
    assert all(c.status == "ok" for c in outcome.cases) and outcome.passed
    for case in outcome.cases:
        (thread,) = {t for case_id, t, _ in recorder.calls if case_id == case.case_id}
        assert case.gpu is not None and thread == f"kbench-lane-{case.gpu.position}"
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [c["case_id"] for c in data["cases"]] == [c.case_id for c in outcome.cases]
    assert {c["gpu_index"] for c in data["cases"]} == {0, 1}
    report = (tmp_path / "out" / "benchmark.md").read_text()
    assert " GPU " in next(line for line in report.splitlines() if line.startswith("| kernel"))
