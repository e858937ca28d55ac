"""The memoisation probe: is a variant faster on content it has seen than on content it has not?

Every timed call gets other input contents and has its outputs checked
(:mod:`kbench_ci.measure.staging`), so a cache that returns *wrong* results is caught there. A
cache that returns the *right* results for content it has seen before (keyed on a full hash, or
an LRU as large as the pool of versions) would still time as a copy. So, after the timing rounds,
each solution is timed on :data:`PROBE_PAIRS` contents it has never been given, each in a triple
of calls made back to back under the timed conditions (staged, flushed, held, events)::

    a pool version it has seen many times | the new content | the new content again

and the new content's time is set against each of the two others (``stats.memo_evidence``): the
repeat catches a cache of one entry, the pool version a larger one or one honest only on its
first sightings. A variant read as caching is probed once more on other new contents and is
judged only when the same comparison says so again (rounds._probe_memoisation). The seen call
comes first in the triple, so a clock that rises during the triple can only hide caching, never
invent it. The new contents' outputs are checked like every other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kbench_ci.measure.staging import OutputCheck, StagedCalls, TimedSet, Version, version_budget
from kbench_ci.measure.timing import Timer
from kbench_ci.stats import MemoEvidence, memo_evidence

#: contents never seen before, one per triple, in each batch of the probe
PROBE_PAIRS = 10
#: batches are added while a variant is faster on seen content but not yet significantly
MAX_PROBE_PAIRS = 30
#: what each call of a triple was given, in order
TRIPLE_ROLES = (
    "a version of the inputs it had been given many times",
    "input contents it had never seen",
    "the same new contents a second time",
)


@dataclass(slots=True)
class ProbeSubject:
    """One solution variant under the probe, and what its triples measured (ms)."""

    label: str
    fn: Callable[[], object]
    collect: Callable[[], Mapping[str, Any]]
    check: OutputCheck
    seen: list[float] = field(default_factory=list)
    new: list[float] = field(default_factory=list)
    repeat: list[float] = field(default_factory=list)

    def evidence(self, noise: float) -> tuple[MemoEvidence, ...]:
        return (
            memo_evidence(self.new, self.repeat, noise, "the same content one call before"),
            memo_evidence(self.new, self.seen, noise, "content it had been given many times"),
        )


def new_versions(timed: TimedSet, count: int) -> list[Version]:
    """Up to ``count`` versions no variant was given yet (fewer when the reference fails on some)."""
    if timed.maker is None:
        return []
    made: list[Version] = []
    for _ in range(2 * count):
        if len(made) >= count:
            break
        version = timed.maker.make()
        if version is not None:
            made.append(version)
    return made


def run_probe(
    timer: Timer, timed: TimedSet, subject: ProbeSubject, versions: list[Version], *, first_call: int
) -> None:
    """Time one subject's triples on ``versions`` (new to it); raises what its call raises."""
    pool = timed.last
    calls: list[Version] = []
    for version in versions:
        calls += [pool, version, version]
    # The rounds' hold (the probe comes after them): the probe's pairs are timed as the rounds
    # were, and the offset calibrated after it meets the same hold.
    timer.warm_up(subject.fn, 2, resize_hold=False)
    hooks = StagedCalls(timed, calls, subject.collect, subject.check, first_call=first_call)
    samples = timer.measure(subject.fn, len(calls), hooks)
    for index in range(0, len(samples), 3):
        subject.seen.append(samples[index])
        subject.new.append(samples[index + 1])
        subject.repeat.append(samples[index + 2])


def chunk_size(timed: TimedSet, device: Any) -> int:
    """How many new versions fit the memory budget at once (at least one)."""
    per_version = max(timed.versions[0].nbytes, 1)
    return max(1, min(PROBE_PAIRS, version_budget(device) // per_version))


def describe(evidence: tuple[MemoEvidence, ...]) -> str:
    """"new/repeat 1.00x, new/seen 0.99x (10 pairs)" for the report."""
    parts = [f"new content vs {e.seen_as}: {e.ratio:.2f}x ({e.slower_pairs}/{e.pairs} slower)" for e in evidence]
    return "; ".join(parts)
