"""Cases spread over lanes: one thread per lane takes the next case from a shared counter, and
every result reaches one callback in the calling thread (the one writer of the report)."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
LaneT = TypeVar("LaneT")


@dataclass(frozen=True, slots=True)
class _LaneFailed:
    index: int
    error: BaseException


@dataclass(frozen=True, slots=True)
class _LaneResult:
    index: int
    result: Any


_LANE_DONE = object()


def distribute(
    items: Sequence[Item],
    lanes: Sequence[LaneT],
    work: Callable[[LaneT, int, Item], Result],
    on_done: Callable[[int, Result], None],
    *,
    poll_s: float = 0.1,
) -> None:
    """Run ``work(lane, index, item)`` for every item, each exactly once, and hand each result to
    ``on_done(index, result)``.

    One lane: in order, in this thread (a run without ``--gpus``, as it always was). Several:
    one thread per lane takes the next item in suite order from a shared counter, so a fast
    lane serves more cases; ``on_done`` runs in *this* thread only, one result at a time (the
    one writer of results.json and the report). When a lane's ``work`` or an ``on_done`` raises,
    no further item is handed out; the items already running finish and their results still
    reach ``on_done``; then the first error is raised. Ctrl-C (in this thread) stops the hand-out
    and propagates at once: the caller's clean-up stops the workers.
    """
    if not lanes:
        raise ValueError("distribute needs at least one lane")
    if len(lanes) == 1:
        for index, item in enumerate(items):
            on_done(index, work(lanes[0], index, item))
        return
    counter = itertools.count()
    counter_lock = threading.Lock()
    stop = threading.Event()
    finished: queue.Queue[object] = queue.Queue()

    def serve(lane: LaneT) -> None:
        try:
            while not stop.is_set():
                with counter_lock:
                    index = next(counter)
                if index >= len(items):
                    return
                try:
                    finished.put(_LaneResult(index, work(lane, index, items[index])))
                except BaseException as exc:  # noqa: BLE001  (handed to the main thread, raised there)
                    stop.set()
                    finished.put(_LaneFailed(index, exc))
                    return
        finally:
            finished.put(_LANE_DONE)

    threads = [
        threading.Thread(target=serve, args=(lane,), name=f"kbench-lane-{n}", daemon=True)
        for n, lane in enumerate(lanes)
    ]
    for thread in threads:
        thread.start()
    first_error: BaseException | None = None
    running = len(threads)
    try:
        while running:
            try:
                message = finished.get(timeout=poll_s)
            except queue.Empty:
                continue
            if message is _LANE_DONE:
                running -= 1
            elif isinstance(message, _LaneFailed):
                first_error = first_error or message.error
            elif isinstance(message, _LaneResult):
                try:
                    on_done(message.index, message.result)
                except BaseException as exc:
                    if not isinstance(exc, Exception):
                        raise
                    stop.set()
                    first_error = first_error or exc
    finally:
        stop.set()
    for thread in threads:
        thread.join()
    if first_error is not None:
        raise first_error

