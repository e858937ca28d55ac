"""A re-measurement is made in new processes (a process's own bias is drawn again), and on a GPU
their start is taken off the case's time: the judge keeps a spare worker per side, started ahead
and waited for before any side is timed, and a re-measurement claims it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kbench_ci.judge.case import Judge
from kbench_ci.judge.sides import SideWorker

ROOT = str(Path(__file__).resolve().parents[3])
ENVIRONMENT = {**os.environ, "PYTHONPATH": ROOT}


@pytest.fixture
def judge(tmp_path: Path) -> Iterator[Judge]:
    judge = Judge(tmp_path / "scratch", ENVIRONMENT)
    try:
        yield judge
    finally:
        judge.close()


def _job(device: str, labels: tuple[str, ...] = ("base", "head")) -> SimpleNamespace:
    return SimpleNamespace(
        sides=tuple(SimpleNamespace(label=label) for label in labels), settings=SimpleNamespace(device=device),
        variant_labels=lambda: labels,
    )


def test_a_compare_on_a_gpu_keeps_one_spare_per_side(judge: Judge) -> None:
    """Spares for a GPU's sides on this CPU: their CUDA context fails quietly (the load would
    report it); they start, say so, and wait."""
    judge._start_spares(_job("cuda:0"), torch.device("cuda:0"))  # type: ignore[arg-type]
    first = dict(judge.spares)
    assert set(first) == {"base", "head"}
    judge._await_spares()
    assert all(spare.spare and spare.alive() and spare._started for spare in first.values())
    judge._start_spares(_job("cuda:0"), torch.device("cuda:0"))  # type: ignore[arg-type]
    assert judge.spares == first, "a second case started spares again"


def test_a_spare_that_fails_to_start_is_dropped(tmp_path: Path) -> None:
    # a Python without its standard library: the spare dies before its Ready
    judge = Judge(tmp_path / "scratch", {**os.environ, "PYTHONHOME": str(tmp_path)})
    try:
        judge._start_spares(_job("cuda:0"), torch.device("cuda:0"))  # type: ignore[arg-type]
        judge._await_spares()
        assert judge.spares == {}
    finally:
        judge.close()


def test_no_spares_on_a_cpu_nor_for_one_side(judge: Judge) -> None:
    """On a CPU a spare's imports would share the cores with the case's timed calls; a bench
    (one side) is never re-measured."""
    judge._start_spares(_job("cpu"), torch.device("cpu"))  # type: ignore[arg-type]
    judge._start_spares(_job("cuda:0", ("solution",)), torch.device("cuda:0"))  # type: ignore[arg-type]
    assert judge.spares == {}


def test_a_remeasurement_claims_the_spare_and_retires_the_worker(judge: Judge) -> None:
    old = judge.worker("head", "cpu")
    old.wait_started(120)
    spare = judge.spares["head"] = SideWorker("head", "cpu", judge.scratch, ENVIRONMENT, spare=True)
    judge._retire_workers(_job("cpu", ("head",)))  # type: ignore[arg-type]
    assert not old.alive() and not old.folder.exists()
    assert judge.workers["head"] is spare and not spare.spare and "head" not in judge.spares
    spare.wait_started(120)
    assert spare._started and spare._start_failure is None
    assert judge.worker("head", "cpu") is spare


def test_a_dead_spare_is_not_claimed(judge: Judge) -> None:
    """A spare another process of the user ended: the re-measurement starts a worker as before."""
    spare = judge.spares["head"] = SideWorker("head", "cpu", judge.scratch, ENVIRONMENT, spare=True)
    spare.process.kill()
    spare.process.wait(30)
    judge._retire_workers(_job("cpu", ("head",)))  # type: ignore[arg-type]
    assert "head" not in judge.workers and "head" not in judge.spares
    worker = judge.worker("head", "cpu")
    assert worker is not spare
    worker.wait_started(120)
    assert worker._started
