"""A side's worker gets the judge's scheduling back before each of its turns
(kbench_ci/judge/sides.py, SideWorker.resume): a head that renices and pinned the base's
worker, a sibling of its own found through /proc, while the base was stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import cast

from kbench_ci.judge.sides import SideWorker, judge_scheduling
from kbench_ci.judge.state import Side
from kbench_ci.judge.trials import turn
from kbench_ci.procgroup import scheduling_of
from kbench_ci.results.model import VariantResult

# a worker stand-in: a main thread and one more, both asleep
CHILD = "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); print('up', flush=True); time.sleep(60)"


def _threads(pid: int) -> list[int]:
    return sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task"))


def test_a_worker_reniced_and_pinned_by_another_process_is_set_back_before_its_turn() -> None:
    wanted = judge_scheduling()
    process = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"up\n"
        worker = object.__new__(SideWorker)  # the judge's handle on it, without a side's worker behind
        worker.process, worker._paused, worker._scheduling = process, [], wanted
        worker.pause()
        tids = _threads(process.pid)
        assert len(tids) == 2
        # what a head does to the base's worker while the base is stopped: every thread of it
        pinned = {min(wanted.affinity)}
        for tid in tids:
            os.setpriority(os.PRIO_PROCESS, tid, wanted.nice + 7)
            if len(wanted.affinity) > 1:
                os.sched_setaffinity(tid, pinned)
        assert {scheduling_of(tid).nice for tid in tids} == {wanted.nice + 7}
        started = time.perf_counter()
        worker.resume()
        took_us = (time.perf_counter() - started) * 1e6
        after = {tid: scheduling_of(tid) for tid in tids}
        print(f"before: nice {wanted.nice + 7}, CPUs {pinned}; after resume ({took_us:.0f} us): {after}; "
              f"refused: {worker.scheduling_refused}")
        assert all(state.affinity == wanted.affinity for state in after.values()), after
        if os.geteuid() == 0:
            assert all(state == wanted for state in after.values()), after
            assert worker.scheduling_refused == ()
        else:  # a user that is not root may not lower a nice value: said, for the turn to fail
            assert len(worker.scheduling_refused) == 2
            assert all("nice" in words for words in worker.scheduling_refused), worker.scheduling_refused
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()


class _Refused:
    """A worker whose resume could not lower the nice value another process raised."""

    paused = False
    filled = None  # it filled no disk (kbench_ci.judge.sides.SideWorker.filled)
    scheduling_refused = ("thread 7's nice 19 (Permission denied)",)

    def resume(self) -> None:
        pass


def test_a_worker_whose_scheduling_cannot_be_set_back_is_an_error_at_its_turn() -> None:
    """A user that is not root may not lower a nice value: the side's times would be another
    process's doing, so the side is not comparable, never timed on."""
    side = Side("base", "solution", cast(SideWorker, _Refused()),
                VariantResult(label="base", kind="pytorch", role="solution", status="ok"))
    turn([side], side)
    print(side.result.status, side.result.message)
    assert side.result.status == "error"
    assert "could not set it back (thread 7's nice 19 (Permission denied)): not comparable" in (side.result.message or "")
