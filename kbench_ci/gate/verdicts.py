"""Verdicts, pure where they can be: one case's verdict from both sides' results (:func:`assess`),
a suspected regression measured again before it counts (:func:`measure_case`). The gate over
all cases is :func:`kbench_ci.results.decide.evaluate_gate`, the one decision merge and the action take too."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import replace

from kbench_ci.gate.worker_call import WorkerRun
from kbench_ci.results.decide import percent
from kbench_ci.results.model import CaseResult, VariantResult
from kbench_ci.results.outcome import (
    ALPHA,
    BASE,
    CONFIDENCE,
    HEAD,
    REMEASURE_FACTOR,
    Assessment,
    BuildOutcome,
    Measurement,
)
from kbench_ci.stats import (
    PROCESS_SPREAD_US,
    RatioEstimate,
    Verdict,
    classify,
    compare_rounds,
    needs_remeasure,
    spread_half_width,
    with_process_spread,
)


def assess(
    result: CaseResult | None,
    *,
    threshold: float,
    head_present: bool = True,
    base_present: bool = True,
    head_build: BuildOutcome | None = None,
    base_build: BuildOutcome | None = None,
    base_unavailable: str | None = None,
    alpha: float = ALPHA,
) -> Assessment:
    """The verdict of one case from what the worker (and the builds) produced.

    In order, the first that applies:

    * not in the head suite → REMOVED; the head did not build → FAILED with the compiler's word;
    * the head raised, crashed, hung or produced no samples → FAILED;
    * the head's outputs are wrong (before or after timing) → INCORRECT, whatever its speed;
    * not in the base suite → ADDED; in it, but the base has no usable build or could not be set
      up (``base_build`` failed, ``base_unavailable``) → ADDED with "no baseline": a base that
      does not build is not the head's regression;
    * the base is wrong, raised, crashed or hung while the head is right → FIXED;
    * both timed → :func:`stats.classify` of :func:`stats.compare_rounds` on their rounds.
    """
    if not head_present:
        return Assessment(Verdict.REMOVED, None, "in the base suite only")
    if head_build is not None and not head_build.ok:
        return Assessment(Verdict.FAILED, None, f"head failed to build: {head_build.message}")
    head = result.variant(HEAD) if result is not None else None
    if head is None:
        detail = result.error if result is not None and result.error else "the head was not run"
        return Assessment(Verdict.FAILED, None, detail)
    if head.status == "incorrect":
        return Assessment(Verdict.INCORRECT, None,
                          f"head is incorrect: {head.message or 'outputs differ'}{_base_not_timed(result)}")
    if head.status != "ok":
        detail = head.message or result.error or head.status  # type: ignore[union-attr]
        return Assessment(Verdict.FAILED, None, f"head failed: {detail}{_base_not_timed(result)}")
    if not head.timed:
        return Assessment(Verdict.FAILED, None, "head produced no timing samples")
    if not base_present:
        return Assessment(Verdict.ADDED, None, "new at head: no baseline to compare with")
    if base_build is not None and not base_build.ok:
        return Assessment(Verdict.ADDED, None, f"no baseline: base failed to build ({base_build.message})")
    if base_unavailable is not None:
        return Assessment(Verdict.ADDED, None, f"no baseline: {base_unavailable}")
    base = result.variant(BASE) if result is not None else None
    if base is None:
        return Assessment(Verdict.ADDED, None, "no baseline: the base was not run")
    if base.status == "incorrect":
        return Assessment(Verdict.FIXED, None, f"base was incorrect ({base.message or 'outputs differ'}); head is correct")
    if base.status != "ok":
        return Assessment(Verdict.FIXED, None, f"base failed ({base.message or base.status}); head runs correctly")
    if not base.timed:
        return Assessment(Verdict.ADDED, None, "no baseline: the base produced no timing samples")
    try:
        estimate = compare_rounds(base.rounds_ms, head.rounds_ms, confidence=CONFIDENCE)
    except ValueError as exc:
        return Assessment(Verdict.INCONCLUSIVE, None, f"cannot compare the samples: {exc}")
    verdict = classify(estimate, threshold, alpha=alpha)
    if verdict in (Verdict.SLOWER, Verdict.FASTER) and (
            apart := _within_process_spread(base, head, estimate, verdict, threshold, alpha)):
        return apart
    if verdict is Verdict.FASTER and (within := _within_clock_resolution(base, head)) is not None:
        # Without its estimate: the head's own times are what the clock could not vouch for, and
        # a head that reported next to nothing would still put its -100% into the report and
        # into the geometric mean (red team: a +30% case elsewhere then passed a 10% limit).
        return Assessment(Verdict.UNCHANGED, None, within)
    return Assessment(verdict, estimate, None)


def _within_process_spread(
    base: VariantResult, head: VariantResult, estimate: RatioEstimate, verdict: Verdict, threshold: float, alpha: float,
) -> Assessment | None:
    """Under the judge (each side in a process of its own) a change counts only where it stands
    beyond the spread two processes put between one kernel (:data:`stats.PROCESS_SPREAD_US` a
    call, a random effect of the case's pair of processes, which more rounds do not shrink): on
    an H100 a 6.7 us add read +1.7% `slower` in 2 of 10 compares of a change its one-process
    timing put at -0.5%, every round of those two runs the same way. The assessment that says
    so (``inconclusive``, the interval widened), or None where the change stands beyond it."""
    # a figure of GPU contexts: a CPU side's process has none measured (and its calls take ms)
    if head.outside_clock is None or not head.outside_clock.source.startswith("gpu") or not base.samples_ms:
        return None
    base_us = statistics.median(base.samples_ms) * 1e3
    if base_us <= 0:
        return None
    spread = PROCESS_SPREAD_US / base_us
    widened = with_process_spread(estimate, spread)
    if classify(widened, threshold, alpha=alpha) is verdict:
        return None
    change = percent(estimate.ratio - 1.0)
    return Assessment(Verdict.INCONCLUSIVE, widened, (
        f"{change} [{percent(estimate.ci_low - 1.0)}, {percent(estimate.ci_high - 1.0)}] in this pair of processes, but two "
        f"processes of their own put {PROCESS_SPREAD_US * 1e3:.0f} ns a call (one standard deviation, "
        f"{percent(spread).lstrip('+')} of this kernel's {base_us:.2f} us) between one kernel: with that, the interval is "
        f"[{percent(widened.ci_low - 1.0)}, {percent(widened.ci_high - 1.0)}]; a change under about "
        f"{percent(math.expm1(spread_half_width(spread, estimate.confidence))).lstrip('+')} cannot be told from it at this "
        "size under the judge"
    ))


def _within_clock_resolution(base: VariantResult, head: VariantResult) -> str | None:
    """Where the judge's clock held the head to its time (``--isolation judge``): a head is
    ``faster`` only by more than the smallest lie about its time that clock resolves, counted
    after taking off what the clock saw its own times leave out (its gap beyond the base's). A
    lie just under the resolution (work on another stream after its end event: 3.7 us of a
    4.4 us vector add on the H200) otherwise still read as that much faster. The words that say
    why not, or None."""
    clock = head.outside_clock
    if clock is None or clock.resolution_us is None:
        return None
    gain_us = (statistics.median(base.samples_ms) - statistics.median(head.samples_ms)) * 1e3
    # what the judge counted in its samples already is in the gain
    left_out_us = max(0.0, (clock.unexplained_us or 0.0) - clock.counted_us)
    # The lead-in between the go and the start event (page reads, a spin) is in the trusted
    # sides' gap too: work a head did there instead would leave its gap as it was.
    lead_us = max(0.0, clock.reference_lead_us or 0.0)
    if gain_us - left_out_us > clock.resolution_us + lead_us:
        return None
    unseen = "" if left_out_us == 0.0 else (
        f", {left_out_us:.2f} us of which its own times left out of what the judge's clock saw")
    lead = "" if lead_us == 0.0 else (
        f" and the {lead_us:.2f} us lead-in before its start event, where work would look like the lead-in")
    return (f"faster by {gain_us:.2f} us a call{unseen}: within the {clock.resolution_us:.2f} us the judge's clock "
            f"resolves{lead}, a lie about time that size would not be seen, so it does not count as faster")


def _base_not_timed(result: CaseResult | None) -> str:
    """Where the worker did not time a correct base because the head failed (measure/child.py
    ``_to_time``), the words that say so: the base's own result is not lost from the report."""
    base = result.variant(BASE) if result is not None else None
    if base is None or base.status != "ok" or base.not_timed is None:
        return ""
    return f"; the base is correct but was not timed ({base.not_timed})"


def measure_case(
    run: Callable[[int], WorkerRun],
    judge: Callable[[CaseResult], Assessment],
    *,
    threshold: float,
    rounds: int,
    remeasure_factor: int = REMEASURE_FACTOR,
    on_remeasure: Callable[[], None] | None = None,
) -> tuple[Measurement, Measurement | None]:
    """Measure once; measure a suspected regression again with more rounds.

    Returns ``(deciding, first)``: ``first`` is None unless there was a re-measurement, which
    then decides alone. Using the second run by itself (not pooled with the first) keeps the
    decision free of the selection that triggered it: a first run that looked slow by chance
    is not counted twice.
    """

    def once(n_rounds: int) -> Measurement:
        worker_run = run(n_rounds)
        return Measurement(
            result=worker_run.result, assessment=judge(worker_run.result), rounds=worker_run.rounds,
            phases=worker_run.phases, environment=worker_run.environment, user_error=worker_run.user_error(HEAD),
        )

    first = once(rounds)
    estimate = first.estimate
    if (
        estimate is None
        or remeasure_factor <= 1
        or not needs_remeasure(estimate, threshold, alpha=ALPHA)
    ):
        return first, None
    if on_remeasure is not None:
        on_remeasure()
    second = once(rounds * remeasure_factor)
    if not _contradicts(first, second):
        return second, first
    # Each interval was true to its samples, and neither held the error that the buffers'
    # layout adds (on an H200 a 5 us vector add read -1.21% then +1.51% in one A/A): a third
    # measurement, on a third layout, decides between them.
    if on_remeasure is not None:
        on_remeasure()
    return _settled(first, second, once(rounds * remeasure_factor)), first


#: verdicts that contradict each other: the same versions cannot be both
_OPPOSITE = {Verdict.SLOWER: Verdict.FASTER, Verdict.FASTER: Verdict.SLOWER}


def _contradicts(first: Measurement, second: Measurement) -> bool:
    """Each significant, in opposite directions."""
    return first.estimate is not None and second.estimate is not None and _OPPOSITE.get(first.verdict) is second.verdict


def _settled(first: Measurement, second: Measurement, third: Measurement) -> Measurement:
    """The third measurement of a contradicted case, deciding: the verdict two of the three
    measurements share, else ``inconclusive``. Its message gives all three changes."""
    changes = ", then ".join(
        percent(m.estimate.ratio - 1.0) if m.estimate is not None else m.verdict.value for m in (first, second, third)
    )
    said = f"measured three times on different buffer layouts ({changes})"
    if third.verdict in (first.verdict, second.verdict):
        message = f"{said}: two of three say {third.verdict.value}"
        return replace(third, assessment=replace(third.assessment, message=_joined(third.assessment.message, message)))
    message = f"{said}: at this kernel's time the layout moves it by more than the threshold"
    return replace(third, assessment=Assessment(Verdict.INCONCLUSIVE, third.estimate, _joined(third.assessment.message, message)))


def _joined(first: str | None, second: str) -> str:
    return f"{first}; {second}" if first else second
