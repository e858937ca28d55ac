"""The gate over the cases: the one decision ``compare``, ``merge`` and the action's summary and
gate steps take from each case's verdict and ``accepted`` and the settings' geometric-mean limit.

results.json's own ``gate`` object is what compare wrote; a process the pull request left running
shares the runner's user and can rewrite it afterwards. So the action never reads the verdict
from it: :func:`gate_of_results` judges the cases again, the way ``merge`` does, and a recorded
``gate.passed`` that disagrees is tampering (docs/isolation.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kbench_ci.errors import ResultsFileError
from kbench_ci.results.outcome import TIMED_VERDICTS, CaseComparison, Gate
from kbench_ci.results.read import compare_case_from_json
from kbench_ci.stats import RatioEstimate, Verdict, geometric_mean

__all__ = ["GpuGeomean", "evaluate_gate", "gate_by_model", "gate_of_results", "percent"]


def evaluate_gate(
    cases: Sequence[CaseComparison], *, total: int | None = None, max_geomean_slowdown: float | None = None
) -> Gate:
    """Passed when every case is in, none fails the gate, and the geometric mean is in bounds.

    The geometric mean is over the head/base ratios of the cases that have one (slower, faster,
    unchanged, inconclusive); it fails when above ``1 + max_geomean_slowdown``.
    """
    total = len(cases) if total is None else total
    counts = {verdict.value: 0 for verdict in Verdict}
    accepted = tuple(case.case_id for case in cases if case.accepted)
    for case in cases:
        if not case.accepted:  # counted apart: "regressions" (the action's output) leaves them out
            counts[case.verdict.value] += 1
    failing = tuple(case.case_id for case in cases if case.fails_gate)
    # An accepted regression is left out of the geometric mean too, or accepting it would not
    # let the gate pass when a geometric-mean limit is set.
    ratios = [
        case.estimate.ratio for case in cases
        if case.estimate is not None and case.verdict in TIMED_VERDICTS and not case.accepted
        and math.isfinite(case.estimate.ratio) and case.estimate.ratio > 0
    ]
    geomean = geometric_mean(ratios) if ratios else None
    geomean_failed = (
        max_geomean_slowdown is not None and geomean is not None and geomean > 1.0 + max_geomean_slowdown
    )
    complete = len(cases) >= total
    passed = complete and not failing and not geomean_failed

    order = sorted(Verdict, key=lambda v: -v.severity)
    words = [f"{counts[v.value]} {v.value}" for v in order if counts[v.value]]
    if accepted:
        words.insert(sum(1 for v in order if counts[v.value] and v.severity >= Verdict.SLOWER.severity),
                     f"{len(accepted)} slower (accepted)")
    text = ", ".join(words) if words else "no cases"
    if not complete:
        text += f" — incomplete ({len(cases)} of {total} cases)"
    else:
        text += " — gate passed" if passed else " — gate FAILED"
    if geomean_failed:
        text += (
            f" (geometric mean of head/base {percent(geomean - 1.0)}"  # type: ignore[operator]
            f" exceeds +{max_geomean_slowdown * 100:g}%)"  # type: ignore[operator]
        )
    return Gate(
        passed=passed, complete=complete, counts=counts, summary=text, geomean_ratio=geomean,
        max_geomean_slowdown=max_geomean_slowdown, geomean_failed=geomean_failed, failing=failing,
        accepted=accepted,
    )


def percent(change: float) -> str:
    return f"{change * 100:+.2f}%"


def p_words(estimate: RatioEstimate) -> str:
    """The p-value with what it was computed over. A bare "p = 1" beside an interval that leans
    one way reads as a contradiction: it is the paired test of the rounds' ratios (of one round's
    calls where there is one round), which few rounds cannot take low (2 rounds: 0.5 at best)."""
    over = f"{estimate.n_rounds} rounds" if estimate.n_rounds > 1 else "one round's calls"
    return f"p = {estimate.p_value:.3g} over {over}"


@dataclass(frozen=True, slots=True)
class GpuGeomean:
    gpu: str
    ratio: float | None
    cases: int
    failed: bool


def gate_by_model(
    cases: Sequence[CaseComparison], gpus: Sequence[str], *, total: int, max_geomean_slowdown: float | None
) -> tuple[Gate, tuple[GpuGeomean, ...]]:
    """The gate over ``cases``, each run on the GPU model of the same place in ``gpus``, with the
    geometric mean of head/base taken per model: a ratio measured on one GPU says nothing about
    another, and the gate fails when any model's is over the limit."""
    limit = max_geomean_slowdown
    models = sorted(set(gpus))
    geomeans = []
    for model in models:
        group = [case for case, gpu in zip(cases, gpus, strict=True) if gpu == model]
        judged = evaluate_gate(group, max_geomean_slowdown=limit)
        geomeans.append(GpuGeomean(model, judged.geomean_ratio, len(group), judged.geomean_failed))
    if len(models) <= 1:
        return evaluate_gate(cases, total=total, max_geomean_slowdown=limit), tuple(geomeans)
    gate = evaluate_gate(cases, total=total)
    over = [g for g in geomeans if g.failed]
    if over:
        words = gate.summary.split(" — ")[0]
        detail = ", ".join(f"{g.gpu} {percent((g.ratio or 1.0) - 1.0)}" for g in over)
        gate = replace(gate, passed=False, geomean_failed=True,
                       summary=f"{words} — gate FAILED (geometric mean of head/base on {detail} exceeds "
                               f"+{limit * 100:g}%)")  # type: ignore[operator]
    return replace(gate, geomean_ratio=None, max_geomean_slowdown=limit), tuple(geomeans)


def gate_of_results(data: Mapping[str, Any], source: str) -> Gate:
    """The gate of a compare (or merged) results.json judged from its cases, as ``merge`` judges
    them: each case's recorded verdict and ``accepted``, the settings' ``max_geomean_slowdown``
    per GPU model. ``data`` passed :func:`kbench_ci.results.load.load_results`; ``source`` names it.

    A recorded "incomplete" (a stopped compare, shards that do not add up) is kept: it can only
    fail the gate. ResultsFileError when a case is not as kbench-ci writes one."""
    settings = data.get("settings") or {}
    raw = data.get("cases") or []
    try:
        seed = int(settings.get("seed") or 0)
        cases = [compare_case_from_json(case, seed=seed) for case in raw]
        limit = settings.get("max_geomean_slowdown")
        limit = None if limit is None else float(limit)
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultsFileError(f"{source}: a case or the settings are not as kbench-ci writes them ({exc!r})",
                               hint="regenerate it with kbench-ci compare") from None
    gpus = [str(case.get("gpu") or "") for case in raw]
    gate, _ = gate_by_model(cases, gpus, total=len(cases), max_geomean_slowdown=limit)
    recorded = data.get("gate") or {}
    merged = data.get("merge") or {}
    if recorded.get("complete") is False or merged.get("complete") is False:
        words = gate.summary.split(" — ")[0]
        gate = replace(gate, passed=False, complete=False,
                       summary=f"{words} — incomplete (results.json records cases that were not measured)")
    return gate
