"""The outside clock's red team on the GPU: the heads of tests/fixtures/judge_clock (the same files as on
the CPU) against an honest base, on cuda, at two sizes: an fp16 matmul at 4096^3 (~180 us on an
H200, ``torch.matmul(a, b, out=c)``) and a float32 vector add of 2^20 elements (a few us), in one
``compare --isolation judge --threshold 0.01``. Each cheat must be ``incorrect`` or neither
``faster`` nor ``fixed``; the honest head under another name must stay correct and never be
``incorrect``. ``-s`` prints the table of verdicts, changes and messages.
"""

from __future__ import annotations

import pytest

from tests.support.judge_clock import (
    CHEATS,
    CONTROL,
    GPU_CHEATS,
    HEADS,
    SLOWER_LIARS,
    Judged,
    fired,
    judge,
    median_us,
    table,
)

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

SIZES = {"mm4096": {"M": 4096, "N": 4096, "K": 4096}, "add1m": {"N": 1 << 20}}
ALL_CHEATS = (*CHEATS, *GPU_CHEATS)
ALL_HEADS = (*HEADS, *GPU_CHEATS, *SLOWER_LIARS)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    cases = {f"{head}_{size}": (head, shape) for size, shape in SIZES.items() for head in ALL_HEADS}
    result = judge(tmp_path_factory.mktemp("judge-clock-gpu"), cases, {"correctness_trials": 3, "rounds": 8},
                   ["--threshold", "0.01", "--time-budget", "5"], timeout=1800)
    print(f"\ncompare exited {result.completed.returncode}\n{table(result)}")
    return result


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("head", ALL_CHEATS)
def test_no_cheat_reads_faster_or_fixed_on_the_gpu(judged: Judged, head: str, size: str) -> None:
    case = judged.case(f"{head}_{size}")
    assert case["base"]["status"] == "ok", case["base"]
    assert case["head"]["status"] in ("ok", "incorrect"), case["head"]
    assert case["verdict"] == "incorrect" or case["verdict"] not in ("faster", "fixed"), case


@pytest.mark.parametrize("head", ALL_CHEATS)
def test_every_cheat_played_its_trick_on_the_gpu(judged: Judged, head: str) -> None:
    assert fired(judged, head) > 0, judged.fired


@pytest.mark.parametrize("size", SIZES)
def test_the_honest_head_is_correct_and_never_incorrect_on_the_gpu(judged: Judged, size: str) -> None:
    case = judged.case(f"{CONTROL}_{size}")
    assert case["base"]["status"] == "ok" and case["head"]["status"] == "ok", case
    assert case["verdict"] != "incorrect"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("head", SLOWER_LIARS)
def test_a_head_slower_by_what_it_takes_off_its_clock_reads_slower_on_the_gpu(judged: Judged, head: str, size: str) -> None:
    """2.5 us a call more work and 2.5 us taken off its own events: below the 3 us a call the
    clock resolved with one call per handoff, so it had read as the base. The batches' interval
    resolves it: counted in its times (``slower``) or a finding (``incorrect``)."""
    case = judged.case(f"{head}_{size}")
    clock = case["head"].get("outside_clock") or {}
    print(head, size, case["verdict"], case.get("ratio"), clock.get("counted_us"), clock.get("resolution_us"),
          clock.get("batch_calls"))
    assert case["verdict"] in ("slower", "incorrect"), (case["verdict"], case.get("ratio"), clock.get("finding"))


@pytest.fixture(scope="module")
def in_one_process(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    """The same heads without the judge (``--isolation process``): what each gains where the
    kernel's own process keeps the clock. Run with KBENCH_JUDGE_GPU_CONTROL=1 (a second compare)."""
    import os

    if not os.environ.get("KBENCH_JUDGE_GPU_CONTROL"):
        pytest.skip("the control compare runs with KBENCH_JUDGE_GPU_CONTROL=1")
    cases = {f"{head}_{size}": (head, shape) for size, shape in SIZES.items() for head in HEADS}
    result = judge(tmp_path_factory.mktemp("judge-clock-gpu-control"), cases, {"correctness_trials": 3, "rounds": 8},
                   ["--threshold", "0.01", "--time-budget", "5", "--isolation", "process"], timeout=1800)
    print(f"\n--isolation process (control): compare exited {result.completed.returncode}\n{table(result)}")
    return result


def test_in_one_process_the_clock_lies_read_faster(in_one_process: Judged) -> None:
    """The defence is what stops them: where the kernel's process keeps the clock, the head that
    halves its own time reads faster at 4096^3."""
    assert in_one_process.case("rebind_timer_mm4096")["verdict"] == "faster"


@pytest.mark.parametrize("size", SIZES)
def test_the_base_beside_a_lingering_head_reads_as_it_does_beside_the_honest_one(judged: Judged, size: str) -> None:
    """The judge waits for a quiet GPU at every change of turn: the 50 ms spin the ``linger``
    head leaves running must not land in the base's calls (the same base worker times both
    cases). Sharing the GPU with the spin would multiply a base call's time; 10% leaves room for
    two cases' placements of a 5 us kernel."""
    beside = median_us(judged.case(f"linger_{size}")["base"])
    control = median_us(judged.case(f"{CONTROL}_{size}")["base"])
    print(f"{size}: base beside linger {beside:.2f} us, beside the honest head {control:.2f} us ({beside / control - 1:+.2%})")
    assert abs(beside / control - 1) < 0.10
