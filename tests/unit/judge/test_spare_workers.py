"""A re-measurement is made in new processes (a process's own bias is drawn again), and on a GPU
their start is taken off the case's time: the judge keeps a spare worker per side, started ahead
(torch imported, no CUDA context), and a re-measurement claims it."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import torch

from kbench_ci.judge.case import Judge
from kbench_ci.judge.sides import SideWorker

ROOT = str(Path(__file__).resolve().parents[3])


def _job(device: str, labels: tuple[str, ...] = ("base", "head")) -> SimpleNamespace:
    return SimpleNamespace(
        sides=tuple(SimpleNamespace(label=label) for label in labels), settings=SimpleNamespace(device=device),
        variant_labels=lambda: labels,
    )


def test_a_compare_on_a_gpu_keeps_one_spare_per_side(tmp_path: Path) -> None:
    """No CUDA is needed: an unclaimed spare makes no context."""
    judge = Judge(tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT})
    try:
        judge._start_spares(_job("cuda:0"), torch.device("cuda:0"))  # type: ignore[arg-type]
        first = dict(judge.spares)
        assert set(first) == {"base", "head"}
        assert all(spare.spare and spare.alive() for spare in first.values())
        judge._start_spares(_job("cuda:0"), torch.device("cuda:0"))  # type: ignore[arg-type]
        assert judge.spares == first, "a second case started spares again"
    finally:
        judge.close()


def test_no_spares_on_a_cpu_nor_for_one_side(tmp_path: Path) -> None:
    """On a CPU a spare's imports would share the cores with the case's timed calls; a bench
    (one side) is never re-measured."""
    judge = Judge(tmp_path / "scratch", {**os.environ, "PYTHONPATH": ROOT})
    try:
        judge._start_spares(_job("cpu"), torch.device("cpu"))  # type: ignore[arg-type]
        judge._start_spares(_job("cuda:0", ("solution",)), torch.device("cuda:0"))  # type: ignore[arg-type]
        assert judge.spares == {}
    finally:
        judge.close()


def test_a_remeasurement_claims_the_spare_and_retires_the_worker(tmp_path: Path) -> None:
    environment = {**os.environ, "PYTHONPATH": ROOT}
    judge = Judge(tmp_path / "scratch", environment)
    try:
        old = judge.worker("head", "cpu")
        old.wait_started(120)
        spare = judge.spares["head"] = SideWorker("head", "cpu", judge.scratch, environment, spare=True)
        judge._retire_workers(_job("cpu", ("head",)))  # type: ignore[arg-type]
        assert not old.alive() and not old.folder.exists()
        assert judge.workers["head"] is spare and not spare.spare and "head" not in judge.spares
        spare.wait_started(120)
        assert spare._started and spare._start_failure is None
        assert judge.worker("head", "cpu") is spare
    finally:
        judge.close()


def test_a_dead_spare_is_not_claimed(tmp_path: Path) -> None:
    """A spare another process of the user ended: the re-measurement starts a worker as before."""
    environment = {**os.environ, "PYTHONPATH": ROOT}
    judge = Judge(tmp_path / "scratch", environment)
    try:
        spare = judge.spares["head"] = SideWorker("head", "cpu", judge.scratch, environment, spare=True)
        spare.process.kill()
        spare.process.wait(30)
        judge._retire_workers(_job("cpu", ("head",)))  # type: ignore[arg-type]
        assert "head" not in judge.workers and "head" not in judge.spares
        worker = judge.worker("head", "cpu")
        assert worker is not spare
        worker.wait_started(120)
        assert worker._started
    finally:
        judge.close()
