"""Where a suite run is, as the CLI's progress line reads it: one :class:`SuiteProgress` per step
of a case, and the worker's own events passed on while it measures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kbench_ci.gate.worker_call import EventCallback
from kbench_ci.wire.protocol import WorkerEvent


@dataclass(frozen=True, slots=True)
class SuiteProgress:
    """Where a suite run is: case ``index`` of ``total`` (1-based), and what is happening.

    ``stage`` is ``start`` (builds begun, the worker starting: ``index`` 0), ``build``,
    ``measure``, ``remeasure`` (a suspected regression timed again) or ``done``; ``event`` is the worker's own event while it measures (a
    :class:`~kbench_ci.wire.protocol.Progress` says how far a phase is); ``outcome`` is a
    one-word result on ``done``.
    """

    index: int
    total: int
    case_id: str
    stage: str
    event: WorkerEvent | None = None
    outcome: str | None = None
    detail: str | None = None
    #: ``done``: the case's wall time (build wait, worker calls, remeasurement)
    seconds: float | None = None
    #: the GPU measuring the case (``1 (NVIDIA H200)``) when ``--gpus`` spreads cases over several
    gpu: str | None = None


ProgressFn = Callable[[SuiteProgress], None]


def worker_listener(
    progress: ProgressFn | None, index: int, total: int, case_id: str, stage: str, gpu: str | None = None
) -> EventCallback | None:
    if progress is None:
        return None

    def listen(event: WorkerEvent) -> None:
        progress(SuiteProgress(index, total, case_id, stage, event=event, gpu=gpu))

    return listen
