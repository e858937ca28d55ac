"""The suite loop that ``run`` and ``compare`` share: the plan of cases, the lanes that measure
them, and the one writer of results.json and benchmark.md.

A command supplies only what is its own: how one case is measured (:class:`CaseSlot` says where),
and its :class:`SuiteReport` (finished cases into its outcome, the outcome into results.json and
benchmark.md). The driver does the rest, the same way for both:

* every build begins and the warm workers start before the first case (:meth:`SuiteExecution.start`);
* cases go to the lanes (:func:`~kbench_ci.gate.distribute.distribute`), one per GPU with ``--gpus``;
* after every case both files are rewritten, atomically and from the calling thread only, with the
  cases in suite order whichever lane finished first: a later crash, or a Ctrl-C, loses nothing
  already measured;
* a problem of the machine a case met (exit code 3) stops the run once that case is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from kbench_ci.errors import KbenchError
from kbench_ci.gate.builds import BuildRequest
from kbench_ci.gate.distribute import distribute
from kbench_ci.gate.lanes import Lane, SuiteExecution
from kbench_ci.gate.progress import ProgressFn, SuiteProgress, worker_listener
from kbench_ci.gate.worker_call import EventCallback
from kbench_ci.results.atomic import write_json_atomically, write_text_atomically
from kbench_ci.results.outcome import GpuSlot


class PlannedCase(Protocol):
    """One case of the plan: a run's :class:`~kbench_ci.suite.model.Case`, a compare's pair of sides."""

    @property
    def case_id(self) -> str: ...


class WrittenOutcome(Protocol):
    """An outcome that names the files it is written to."""

    @property
    def results_path(self) -> Path: ...

    @property
    def report_path(self) -> Path: ...


Item = TypeVar("Item", bound=PlannedCase)
#: one finished case: a run's RunCase, a compare's CaseComparison
Done = TypeVar("Done")
Done_contra = TypeVar("Done_contra", contravariant=True)
Outcome = TypeVar("Outcome", bound=WrittenOutcome)


class SuiteReport(Protocol[Done_contra, Outcome]):
    """A command's results: what its finished cases (in suite order) and the machine its workers
    described make of its outcome, and that outcome as results.json and as benchmark.md."""

    def outcome(self, cases: tuple[Done_contra, ...], environment: Mapping[str, Any] | None) -> Outcome: ...

    def payload(self, outcome: Outcome) -> dict[str, Any]: ...

    def render(self, outcome: Outcome) -> str: ...


@dataclass(frozen=True, slots=True)
class CaseSlot:
    """Where one case is measured: case ``index`` of ``total`` (1-based), the lane whose worker
    measures it, and the progress line that reports on it."""

    index: int
    total: int
    case_id: str
    lane: Lane
    on_progress: ProgressFn | None

    @property
    def gpu(self) -> GpuSlot | None:
        """The GPU measuring the case when ``--gpus`` spreads cases over several; None otherwise
        (only such lanes are pinned to a GPU)."""
        return self.lane.gpu

    @property
    def gpu_label(self) -> str | None:
        return self.lane.gpu.label if self.lane.gpu is not None else None

    def say(self, stage: str) -> None:
        """Tell the progress line the case reached ``stage`` (``build``, ``remeasure``)."""
        if self.on_progress is not None:
            self.on_progress(SuiteProgress(self.index, self.total, self.case_id, stage, gpu=self.gpu_label))

    def listener(self, stage: str) -> EventCallback | None:
        """Pass the worker's events on to the progress line, as ``stage`` of this case."""
        return worker_listener(self.on_progress, self.index, self.total, self.case_id, stage, self.gpu_label)


@dataclass(frozen=True, slots=True)
class Measured(Generic[Done]):
    """One case as a command's measurement hands it to the writer: the finished case, the one
    word and the detail the progress line gives it, the machine its worker described (None when
    none did), and a problem of the machine that stops the run once the case is written."""

    case: Done
    outcome: str
    detail: str | None
    environment: Mapping[str, Any] | None = None
    problem: KbenchError | None = None


@dataclass(frozen=True, slots=True)
class _Timed(Generic[Done]):
    """A case measured in its lane, with its wall time (build wait, worker calls, remeasurement)."""

    measured: Measured[Done]
    seconds: float
    gpu_label: str | None


class SuiteDriver(Generic[Item, Done, Outcome]):
    """Measures the plan's cases on the lanes of a suite run and writes after each one; the only
    writer of the command's results.json and benchmark.md (see the module docstring)."""

    def __init__(
        self, plan: Sequence[Item], report: SuiteReport[Done, Outcome], *, on_progress: ProgressFn | None = None
    ) -> None:
        self.plan = tuple(plan)
        self.report = report
        self.on_progress = on_progress
        # by position in the plan: lanes finish in any order, the files list the suite's
        self._finished: dict[int, Done] = {}
        # the first machine description a worker gave: results.json's "environment"
        self._environment: Mapping[str, Any] | None = None

    @property
    def total(self) -> int:
        return len(self.plan)

    def write(self) -> Outcome:
        """The outcome of the cases finished so far, written to both files."""
        cases = tuple(self._finished[position] for position in sorted(self._finished))
        outcome = self.report.outcome(cases, self._environment)
        write_json_atomically(outcome.results_path, self.report.payload(outcome))
        write_text_atomically(outcome.report_path, self.report.render(outcome))
        return outcome

    def measure_all(
        self,
        execution: SuiteExecution,
        builds: Sequence[BuildRequest],
        measure: Callable[[CaseSlot, Item], Measured[Done]],
    ) -> None:
        """Begin ``builds``, then measure every case with ``measure`` (in its lane's thread),
        writing after each. The caller writes the final outcome with :meth:`write` (``run`` once
        its workers are stopped, ``compare`` before its worktrees go)."""
        execution.start(builds)
        if self.on_progress is not None:
            self.on_progress(SuiteProgress(0, self.total, "", "start"))

        def work(lane: Lane, position: int, item: Item) -> _Timed[Done]:
            slot = CaseSlot(position + 1, self.total, item.case_id, lane, self.on_progress)
            started = time.perf_counter()
            measured = measure(slot, item)
            return _Timed(measured, time.perf_counter() - started, slot.gpu_label)

        distribute(self.plan, execution.lanes, work, self._record)

    def _record(self, position: int, timed: _Timed[Done]) -> None:
        """Write the case (in the calling thread only), say so, then stop on a problem of the
        machine."""
        measured = timed.measured
        self._finished[position] = measured.case
        self._environment = self._environment or measured.environment
        self.write()
        if self.on_progress is not None:
            self.on_progress(SuiteProgress(
                position + 1, self.total, self.plan[position].case_id, "done", outcome=measured.outcome,
                detail=measured.detail, seconds=timed.seconds, gpu=timed.gpu_label,
            ))
        if measured.problem is not None:
            raise measured.problem
