"""Blame where it belongs: a broken reference, a setup() that raises, or a shape
too large for 64-bit sizes is the user's (exit 2, or named), never the solution's."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench_ci.measure.child import run_case
from kbench_ci.measure.parent import WorkerOutcome, _Cursor, _incident
from kbench_ci.results.model import MeasureSettings, VariantResult
from kbench_ci.wire.protocol import CaseJob, LoadError, ReferenceCall, SideSpec, VariantDone, WorkerEvent

HONEST = Path(__file__).parents[2] / "fixtures" / "cheats_py" / "honest.py"
INT64_MAX = 2**63 - 1

#: reference() that counts its calls and raises from call ``{fail_from}`` on
COUNTING_REF = '''\
CALLS = [0]


def reference(x, y, **_):
    CALLS[0] += 1
    if CALLS[0] >= {fail_from}:
        raise ValueError("reference gave up on call %d" % CALLS[0])
    return 2 * x + 1
'''


def _settings(**overrides: object) -> MeasureSettings:
    base: dict[str, object] = dict(device="cpu", seed=42, correctness_trials=2, timing_method="host_time", num_warmup=1,
                                   trials_per_round=3, discard_first=0, rounds=1, flush_l2=False)
    return MeasureSettings(**{**base, **overrides})  # type: ignore[arg-type]


def _run(solution: Path, ref: Path, *, dims: dict[str, int] | None = None) -> tuple[VariantResult, list[WorkerEvent]]:
    side = SideSpec(label="solution", solution=str(solution), ref=str(ref), implementation="pytorch")
    events: list[WorkerEvent] = []
    job = CaseJob(case_id="k", dims=dims or {"N": 64}, sides=(side,), baselines=(), settings=_settings())
    run_case(job, events.append)
    done = [e.result for e in events if isinstance(e, VariantDone)]
    assert len(done) == 1
    return done[0], events


def _load_errors(events: list[WorkerEvent]) -> list[LoadError]:
    return [e for e in events if isinstance(e, LoadError)]


def _ref(tmp_path: Path, text: str, name: str = "ref_broken.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _assert_blames_reference(result: VariantResult, events: list[WorkerEvent], needle: str) -> None:
    assert result.status == "error", result
    assert result.message is not None and needle in result.message, result.message
    errors = _load_errors(events)
    assert len(errors) == 1, events
    assert errors[0].exit_code == 2
    assert needle in errors[0].message


def test_the_counting_reference_is_honest_when_it_never_fails(tmp_path: Path) -> None:
    """The control of the tests below: the same reference, never failing, passes the solution."""
    result, events = _run(HONEST, _ref(tmp_path, COUNTING_REF.format(fail_from=10**9)))
    assert result.status == "ok", result.message
    assert not _load_errors(events)


def test_a_reference_that_raises_when_the_timed_inputs_are_prepared_is_blamed(tmp_path: Path) -> None:
    # Calls 1 and 2 are the correctness trials; call 3 is the timed inputs' original version.
    result, events = _run(HONEST, _ref(tmp_path, COUNTING_REF.format(fail_from=3)))
    _assert_blames_reference(result, events, "ref_broken.py reference() raised ValueError: reference gave up on call 3")
    assert "preparing the timed inputs" not in (result.message or "")


def test_a_reference_that_raises_only_in_the_post_timing_recheck_is_blamed(tmp_path: Path) -> None:
    # Every call before the re-check succeeds (correctness, timed inputs and their versions).
    ref = tmp_path / "ref_broken.py"
    ref.write_text('''\
import sys


def reference(x, y, **_):
    # The re-check after timing is the only call made from _post_timing_check.
    if any(frame.f_code.co_name == "_post_timing_check" for frame in _frames()):
        raise ValueError("reference fails in the re-check")
    return 2 * x + 1


def _frames():
    frame = sys._getframe()
    while frame is not None:
        yield frame
        frame = frame.f_back
''')
    result, events = _run(HONEST, ref)
    _assert_blames_reference(result, events, "ref_broken.py reference() raised ValueError: reference fails in the re-check")
    assert result.post_timing_check is None
    assert result.status != "incorrect"


def test_a_reference_returning_a_list_of_names_is_blamed_not_a_worker_crash(tmp_path: Path) -> None:
    result, events = _run(HONEST, _ref(tmp_path, "def reference(x, y, **_):\n    return ['y']\n"))
    _assert_blames_reference(result, events, "ref_broken.py reference() returned a str for 'y'")


def test_a_reference_returning_float64_for_a_float32_buffer_is_blamed(tmp_path: Path) -> None:
    result, events = _run(HONEST, _ref(tmp_path, "def reference(x, y, **_):\n    return (2 * x + 1).double()\n"))
    _assert_blames_reference(result, events, "returned 'y' as float64, but the output buffer 'y' is float32")


def test_a_setup_that_raises_is_named_not_read_as_a_failed_first_call(tmp_path: Path) -> None:
    solution = tmp_path / "bad_setup.py"
    solution.write_text(HONEST.read_text().replace(
        "def setup(N, **_):\n", "def setup(N, **_):\n    raise KeyError('no such table')\n"))
    result, events = _run(solution, HONEST.parent / "ref.py")
    assert result.status == "error"
    assert result.message is not None
    assert result.message.startswith("bad_setup.py setup() raised KeyError: 'no such table' at bad_setup.py:"), result.message
    assert "first call failed" not in result.message


def test_a_shape_too_large_for_64_bit_sizes_is_the_settings_fault(tmp_path: Path) -> None:
    result, events = _run(HONEST, HONEST.parent / "ref.py", dims={"N": INT64_MAX})
    errors = _load_errors(events)
    assert len(errors) == 1, events
    assert errors[0].exit_code == 2
    line = errors[0].message + (f" ({errors[0].hint})" if errors[0].hint else "")
    assert f"N={INT64_MAX}" in line
    assert "use a smaller N" in line
    assert "first call failed" not in line
    assert result.status == "error"


def test_a_reference_call_is_announced_so_a_hang_in_it_is_the_references(tmp_path: Path) -> None:
    """The parent blames the variant of the last Begin, unless a reference call is running."""
    _, events = _run(HONEST, HONEST.parent / "ref.py")
    calls = [e for e in events if isinstance(e, ReferenceCall)]
    # correctness (2 trials), the timed inputs and the re-check after timing: each call announced and closed
    assert len(calls) >= 2 * 4
    assert all(e.variant == "solution" for e in calls)
    assert [e.running for e in calls] == [True, False] * (len(calls) // 2)


class _Stopped:
    returncode: int | None = -9


@pytest.mark.parametrize("timed_out", [True, False])
def test_a_worker_that_hung_or_crashed_inside_the_reference_blames_the_reference(tmp_path: Path, timed_out: bool) -> None:
    side = SideSpec(label="solution", solution=str(HONEST), ref=str(tmp_path / "ref_hangs.py"), implementation="pytorch")
    job = CaseJob(case_id="k", dims={"N": 64}, sides=(side,), baselines=(), settings=_settings())

    class _Worker:
        process = _Stopped()
        stderr_path = tmp_path / "stderr"

    (tmp_path / "stderr").write_text("")
    outcome = WorkerOutcome()
    blamed, incident = _incident(job, _Cursor(variant="solution", phase="correctness", in_reference=True), _Worker(),  # type: ignore[arg-type]
                                 0, timed_out=timed_out, timeout_s=5.0, outcome=outcome)
    assert incident is not None
    assert incident.startswith("ref_hangs.py reference() ")
    assert ("timed out after 5 s" in incident) == timed_out
    assert outcome.load_error is not None and outcome.load_error.exit_code == 2


@pytest.mark.parametrize("timed_out", [True, False])
def test_a_judge_that_hung_or_crashed_in_a_trusted_turn_blames_no_side(tmp_path: Path, timed_out: bool) -> None:
    """The judge runs no variant's code: its crash or hang in the base's turn (a head that left
    it a zombie to wait for, or filled its disk) is the base's no more than the head's. Blaming
    the variant of the turn made such a head read `fixed`."""
    base = SideSpec(label="base", solution=str(HONEST), ref=str(HONEST), implementation="pytorch")
    head = SideSpec(label="head", solution=str(HONEST), ref=str(HONEST), implementation="pytorch")
    job = CaseJob(case_id="k", dims={"N": 64}, sides=(base, head), baselines=(), settings=_settings())

    class _Worker:
        process = _Stopped()
        stderr_path = tmp_path / "stderr"

    (tmp_path / "stderr").write_text("")
    cursor = _Cursor(variant="base", phase="correctness")
    blamed, incident = _incident(job, cursor, _Worker(), 0, timed_out=timed_out, timeout_s=5.0,  # type: ignore[arg-type]
                                 outcome=WorkerOutcome(), judge=True)
    assert blamed is None
    assert incident is not None and incident.startswith("the judge (which runs no pull-request code; no side is blamed)")
    assert "base's turn" in incident
    # the in-process worker, where the base's code does run: the base is blamed
    blamed, _ = _incident(job, cursor, _Worker(), 0, timed_out=timed_out, timeout_s=5.0,  # type: ignore[arg-type]
                          outcome=WorkerOutcome())
    assert blamed == "base"
    # in the head's turn the head is blamed, as in process (the base is then checked without it)
    blamed, _ = _incident(job, _Cursor(variant="head", phase="timing"), _Worker(), 0, timed_out=timed_out,  # type: ignore[arg-type]
                          timeout_s=5.0, outcome=WorkerOutcome(), judge=True)
    assert blamed == "head"
