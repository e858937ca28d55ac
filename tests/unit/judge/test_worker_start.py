"""A side's worker says when it has started (:class:`Ready`), and the judge reads that before
its first request: new workers start together, none paused in its start."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kbench_ci.judge.sides import SideFailed, SideWorker, hold_all_but
from kbench_ci.procgroup import state
from kbench_ci.wire.sideproto import BadReply, EndRequest, Loaded, Ready, decode_reply, encode_reply, encode_request

ROOT = str(Path(__file__).resolve().parents[3])


def test_ready_is_a_reply_of_its_own() -> None:
    assert isinstance(decode_reply(encode_reply(Ready()), Ready), Ready)
    with pytest.raises(BadReply, match="'ready' reply where a Loaded was due"):
        decode_reply(encode_reply(Ready()), Loaded)


def test_two_workers_started_together_both_say_they_have_started(tmp_path: Path) -> None:
    workers = [SideWorker(label, "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT}) for label in ("base", "head")]
    try:
        began = time.monotonic()
        for worker in workers:
            worker.wait_started(120)
        waited = time.monotonic() - began
        assert all(worker._started and worker._start_failure is None for worker in workers)
        print(f"both started {waited:.2f} s after the first was waited on")
    finally:
        for worker in workers:
            worker.stop()


def test_a_worker_that_cannot_start_fails_its_first_request_saying_so(tmp_path: Path) -> None:
    # a Python without its standard library: the worker dies before its Ready
    worker = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONHOME": str(tmp_path)})
    try:
        worker.wait_started(60)
        with pytest.raises(SideFailed, match="it did not start: its worker died"):
            worker.send(EndRequest())
    finally:
        worker.stop()


def test_a_worker_held_while_it_starts_is_let_go_to_finish_its_start(tmp_path: Path) -> None:
    """The judge's hold of every worker (before it calibrates its own figures between cases) may
    catch a new worker mid-start: waiting for it must not wait out the start-up limit."""
    worker = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT})
    try:
        worker.pause()
        assert worker.paused
        worker.wait_started(60)
        assert worker._started and not worker.paused
    finally:
        worker.stop()


def test_a_worker_stopped_before_it_started_fails_its_first_request_at_once(tmp_path: Path) -> None:
    worker = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT})
    worker.stop()
    began = time.monotonic()
    with pytest.raises(SideFailed, match="it was stopped before it had started"):
        worker.send(EndRequest())
    assert time.monotonic() - began < 5


def test_a_spare_starts_then_waits_unheld_until_claimed(tmp_path: Path) -> None:
    """A spare (a re-measurement's new process, started ahead) starts as any worker does, says
    so, and then serves nothing until claimed; the judge's holds leave it be until then."""
    spare = SideWorker("head", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT}, spare=True)
    try:
        hold_all_but(None)
        assert state(spare.process.pid) != "T", "the judge's hold stopped an unclaimed spare"
        spare.wait_started(120)
        assert spare._started and spare.start_failure is None and spare.spare
        spare.send(EndRequest())  # a spare asked anything is claimed first: it serves the request
        assert not spare.spare
        assert spare.alive()
        hold_all_but(None)
        assert state(spare.process.pid) == "T", "a claimed spare is a side's worker: the judge's hold stops it"
    finally:
        spare.stop()


def test_a_spare_given_anything_but_its_wake_ends(tmp_path: Path) -> None:
    """Before its WAKE it reads nothing as a request: a line that is not the WAKE, or the
    judge closing it unclaimed, ends it."""
    spare = SideWorker("base", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT}, spare=True)
    spare.wait_started(120)
    spare.channel.sendall(encode_request(EndRequest()))
    assert spare.process.wait(timeout=30) == 0
    spare.stop()
    closed = SideWorker("base", "cpu", tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT}, spare=True)
    closed.wait_started(120)
    closed.channel.close()
    assert closed.process.wait(timeout=30) == 0
    closed.stop()


def test_workers_of_one_label_have_folders_of_their_own(tmp_path: Path) -> None:
    environment = {**os.environ, "PYTHONPATH": ROOT, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    first = SideWorker("head", "cpu", tmp_path / "scratch", environment)
    spare = SideWorker("head", "cpu", tmp_path / "scratch", environment, spare=True)
    try:
        assert first.folder != spare.folder
        assert not set(first.writable) & set(spare.writable)
        first.stop()
        first.remove_files()
        assert all(folder.is_dir() for folder in spare.writable), "retiring a worker took its spare's folders"
    finally:
        first.stop()
        spare.stop()
