"""The outside clock's red team on the CPU: heads that lie about their time or tell a probe from a timed
call (tests/fixtures/judge_clock/README.md says what each does), each against an honest base, in
one ``compare --isolation judge --device cpu``.

Every head computes correct outputs, so only the judge's clock and its probe can catch it.
Asserted is the architecture, never a timing bound (CI has 2 cores): no cheat reads ``faster``
or ``fixed``; the head that rebinds its process's clocks and the one that replays seen contents
are ``incorrect`` for the reason the defence gives; the honest head under another name stays
correct and is never ``incorrect``. The matmul is 1024^3 float32 (about 20 ms on one thread):
halving it is many times the jitter of a busy 2-core box.
"""

from __future__ import annotations

import pytest

from tests.support.judge_clock import (
    CHEATS,
    CONTROL,
    CPU_CHEATS,
    HEADS,
    OUTSIDE_CLOCK,
    SEEN_CONTENTS,
    SLOWER_LIARS,
    Judged,
    fired,
    judge,
    table,
)

SHAPE = {"M": 1024, "N": 1024, "K": 1024}
#: daemon_stage's trick gains most where the judge's flush (~3 ms) is about the work's length
SMALL = {"M": 512, "N": 512, "K": 512}
#: slow_shave's 1.5 ms a call of extra work, and of time taken off its own clock, on the 512^3
#: matmul (3-5 ms a call on 2 cores, more when they are busy; the change stays well past the 5%
#: threshold): under the 2 ms a lie must pass to be a finding, so only the interval of the gaps
#: can count it
#: 8 rounds: with fewer, no p-value of the rounds can fall under 0.05, and nothing reads `faster`
DEFAULTS = {"correctness_trials": 2, "rounds": 8}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    root = tmp_path_factory.mktemp("judge-clock")
    cases = ({head: (head, SHAPE) for head in HEADS} | {head: (head, SMALL) for head in CPU_CHEATS}
             | {head: (head, SMALL) for head in SLOWER_LIARS})
    result = judge(root, cases, DEFAULTS, ["--device", "cpu", "--threshold", "0.05"], cpu=True)
    print(f"\ncompare exited {result.completed.returncode}\n{table(result)}")
    return result


@pytest.mark.parametrize("head", (*CHEATS, *CPU_CHEATS))
def test_no_cheat_reads_faster_or_fixed(judged: Judged, head: str) -> None:
    case = judged.case(head)
    print(head, case["verdict"], case.get("ratio"), case["head"]["status"], case["head"].get("message"))
    assert case["base"]["status"] == "ok", case["base"]
    # A head that crashed would pass the next line for nothing: each must run and be judged.
    assert case["head"]["status"] in ("ok", "incorrect"), case["head"]
    assert case["verdict"] == "incorrect" or case["verdict"] not in ("faster", "fixed"), case


@pytest.mark.parametrize("head", [head for head in (*CHEATS, *CPU_CHEATS) if head != "skip_flush"])
def test_every_cheat_played_its_trick(judged: Judged, head: str) -> None:
    """A verdict that holds only because the trick never fired proves nothing. (skip_flush's
    prefetch needs a timer it can rebind; where the defence takes the timer away it may not fire.)"""
    assert fired(judged, head) > 0, judged.fired


@pytest.mark.parametrize("head", SLOWER_LIARS)
def test_a_head_slower_by_what_it_takes_off_its_clock_reads_slower(judged: Judged, head: str) -> None:
    """1.5 ms a call more work and 1.5 ms taken off its own clock: its own times are the base's.
    The judge's clock saw the gap grow; beyond the interval of the two sides' gaps, that much is
    counted in its times (or, beyond the clock's floor, it is ``incorrect``)."""
    case = judged.case(head)
    assert fired(judged, head) > 0, judged.fired
    assert case["base"]["status"] == "ok", case["base"]
    clock = case["head"].get("outside_clock") or {}
    print(head, case["verdict"], case.get("ratio"), clock.get("counted_us"), clock.get("resolution_us"))
    assert case["verdict"] in ("slower", "incorrect"), (case["verdict"], case.get("ratio"), clock)
    if case["verdict"] == "slower":
        assert clock.get("counted_us", 0.0) > 1000.0, clock


def test_a_head_that_rebinds_its_clocks_is_incorrect_by_the_outside_clock(judged: Judged) -> None:
    case = judged.case("rebind_timer")
    head = case["head"]
    assert head["status"] == "incorrect", head
    assert str(head.get("message") or "").startswith(OUTSIDE_CLOCK), head.get("message")
    assert case["verdict"] == "incorrect"


def test_a_head_that_replays_seen_contents_is_incorrect_by_the_probe_in_the_rounds(judged: Judged) -> None:
    case = judged.case("replay_seen")
    head = case["head"]
    assert head["status"] == "incorrect", head
    assert SEEN_CONTENTS in str(head.get("message") or ""), head.get("message")
    assert case["verdict"] == "incorrect"


def test_the_honest_head_is_correct_and_never_incorrect(judged: Judged) -> None:
    case = judged.case(CONTROL)
    for label in ("base", "head"):
        assert case[label]["status"] == "ok", case[label]
        assert len(case[label]["rounds_ms"]) >= DEFAULTS["rounds"]
    assert case["verdict"] != "incorrect"
    assert case["verdict"] in ("unchanged", "inconclusive", "slower", "faster"), case["verdict"]


def test_a_daemon_of_the_head_never_computes_while_the_judge_stages(judged: Judged) -> None:
    """daemon_stage's daemon, re-parented to the judge, would compute each answer during the
    judge's flush; every stray is ended before a CPU staging, so it never serves a call."""
    assert fired(judged, "daemon_stage") > 0, judged.fired
    assert not any(trick.startswith("daemon_stage_served") for trick in judged.fired), judged.fired
