"""History keeps, per commit, the registers of a case's main kernel and its
share of the GPU's ceiling, and `history show` lists them first → last; entries recorded before
them still read."""

from __future__ import annotations

from typing import Any

from kbench_ci.history.show import render_markdown, trends
from kbench_ci.history.store import CasePoint, HistoryEntry, entries_from_results


def head(registers: int, median_ms: float) -> dict[str, Any]:
    launch = {"name": "matmul_kernel", "per_call": 1, "share": 0.9, "mean_us": 100.0, "registers": registers}
    tail = {"name": "reduce_tail", "per_call": 1, "share": 0.1, "mean_us": 10.0, "registers": 32}
    return {
        "status": "ok", "rounds_ms": [[median_ms] * 5],
        "escape_audit": {"status": "passed", "launches": [launch, tail]},
        "speed_of_light": {"source": "declared", "bytes": 3 * 2**26, "flops": None, "median_ms": median_ms,
                           "copy_bytes_per_s": 4.0e12, "matmul_flops_per_s": None, "matmul_dtype": None, "floor_ms": 0.04},
    }


def payload(sha: str, registers: int, median_ms: float) -> dict[str, Any]:
    return {"schema": "kbench-ci/compare", "head": {"sha": sha, "description": sha[:7]},
            "environment": {"gpu_name": "NVIDIA H200"},
            "cases": [{"case_id": "vadd[N=16777216]", "head": head(registers, median_ms)}]}


def test_a_compare_records_the_main_kernels_registers_and_the_share_of_peak() -> None:
    (entry,) = entries_from_results(payload("a" * 40, 168, 0.0617))
    (point,) = entry.points
    assert point.registers == 168
    assert point.peak_share is not None and abs(point.peak_share - 3 * 2**26 / 0.0617e-3 / 4.0e12) < 1e-9
    assert HistoryEntry.from_json(entry.as_json()) == entry


def test_an_entry_recorded_before_the_figures_reads_with_none() -> None:
    old = {"commit": "b" * 40, "recorded_at": "2026-11-01T00:00:00+00:00", "gpu": "NVIDIA H200",
           "points": [{"case_id": "vadd[N=1]", "median_ms": 0.01, "n_samples": 100}]}
    assert HistoryEntry.from_json(old).points == (CasePoint("vadd[N=1]", 0.01, 100),)


def test_history_show_lists_registers_and_peak_first_to_last() -> None:
    history = [entries_from_results(payload(sha * 40, registers, ms), now=None)[0]
               for sha, registers, ms in (("a", 168, 0.0617), ("b", 168, 0.0620), ("c", 207, 0.0700))]
    text = render_markdown(trends(history, threshold=0.02))
    row = next(line for line in text.splitlines() if "vadd" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[-2] == "168 → 207"
    assert cells[-1] == "82% → 72%"
