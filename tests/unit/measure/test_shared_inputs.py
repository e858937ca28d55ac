"""Base and head are timed on the very same tensors when their setups agree (side bias).

A buffer's placement can make a kernel a few percent faster or slower; with one allocation per
side that difference reads as a fixed head/base bias that no statistic over rounds can see.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from kbench_ci.measure.child import run_case
from kbench_ci.measure.inputs import InputSet, same_inputs
from kbench_ci.results.model import MeasureSettings
from kbench_ci.wire.protocol import CaseJob, SideSpec, VariantDone, WorkerEvent

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cheats_py"

# A solution that records the data pointer of the tensors of each call, as a real user's
# kernel would see them, then does honest work.
RECORDING = '''
import json, os, torch

def setup(N, **_):
    return {"inputs": {"x": torch.randn(N), "y": torch.empty(N)}, "outputs": ["y"]}

def run_kernel(x, y, **_):
    with open(os.environ["KBENCH_TEST_LOG"], "a") as log:
        log.write(json.dumps({"side": __file__, "x": x.data_ptr(), "y": y.data_ptr()}) + "\\n")
    torch.mul(x, 2, out=y)
    y.add_(1)
'''


def _settings(rounds: int) -> MeasureSettings:
    return MeasureSettings(device="cpu", seed=42, correctness_trials=1, timing_method="host_time", num_warmup=1,
                           trials_per_round=3, discard_first=0, rounds=rounds, flush_l2=False)


def _inputs(seed: int, n: int = 8) -> InputSet:
    torch.manual_seed(seed)
    return InputSet(kwargs={"x": torch.randn(n), "y": torch.empty(n), "n": n}, output_names=("y",), seed=seed)


def test_same_inputs_compares_names_dtypes_shapes_and_values_but_not_outputs() -> None:
    assert same_inputs(_inputs(1), _inputs(1))
    assert not same_inputs(_inputs(1), _inputs(2))  # other values
    assert not same_inputs(_inputs(1, 8), _inputs(1, 16))  # other shape (and scalar)
    half = _inputs(1)
    half_kwargs = dict(half.kwargs, x=half.kwargs["x"].half())
    assert not same_inputs(_inputs(1), InputSet(half_kwargs, ("y",), 1))  # other dtype
    garbage = _inputs(1)
    garbage.kwargs["y"].fill_(123.0)  # output contents do not matter: every call overwrites them
    assert same_inputs(_inputs(1), garbage)


def _run_two_sides(tmp_path: Path, base_src: str, head_src: str, monkeypatch) -> tuple[list[dict], list[WorkerEvent]]:  # type: ignore[no-untyped-def]
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("KBENCH_TEST_LOG", str(log))
    sides = []
    for label, source in (("base", base_src), ("head", head_src)):
        folder = tmp_path / label
        folder.mkdir()
        (folder / "kernel.py").write_text(source)
        sides.append(SideSpec(label=label, solution=str(folder / "kernel.py"), ref=str(FIXTURES / "ref.py"), implementation="pytorch"))
    job = CaseJob(case_id="k[N=64]", dims={"N": 64}, sides=tuple(sides), baselines=(), settings=_settings(rounds=4))
    events: list[WorkerEvent] = []
    run_case(job, events.append)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return calls, events


def _timed_pointers(calls: list[dict], side: str) -> set[tuple[int, int]]:
    return {(c["x"], c["y"]) for c in calls if f"/{side}/" in c["side"]}


def test_base_and_head_with_identical_setup_are_timed_on_the_same_tensors(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls, events = _run_two_sides(tmp_path, RECORDING, RECORDING, monkeypatch)
    results = [e.result for e in events if isinstance(e, VariantDone)]
    assert [r.status for r in results] == ["ok", "ok"]
    # The last calls of each side are the timing rounds and the post-timing check: all of them
    # on one pair of tensors, shared by both sides.
    base_tail = [(c["x"], c["y"]) for c in calls if "/base/" in c["side"]][-8:]
    head_tail = [(c["x"], c["y"]) for c in calls if "/head/" in c["side"]][-8:]
    assert len(set(base_tail[:-1])) == 1, base_tail
    assert set(base_tail[:-1]) == set(head_tail[:-1])


def test_sides_with_different_inputs_keep_their_own_tensors(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    other = RECORDING.replace("torch.randn(N)", "torch.randn(N) + 1")
    calls, _ = _run_two_sides(tmp_path, RECORDING, other, monkeypatch)
    base_tail = [(c["x"], c["y"]) for c in calls if "/base/" in c["side"]][-8:-1]
    head_tail = [(c["x"], c["y"]) for c in calls if "/head/" in c["side"]][-8:-1]
    assert set(base_tail).isdisjoint(head_tail)


def test_each_sample_says_which_version_of_the_inputs_its_call_was_given(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Kept so that whether a time depends on the inputs' version (a trimodal case on an H200:
    # 32.8-33.4 / 33.8-34.8 / 35.2-35.5 us at one size) can be read off the raw data.
    _, events = _run_two_sides(tmp_path, RECORDING, RECORDING, monkeypatch)
    base, head = (e.result for e in events if isinstance(e, VariantDone))
    assert [len(r) for r in base.round_versions] == [len(r) for r in base.rounds_ms] == [3, 3, 3, 3]
    # one set and one order per round for both sides
    assert base.round_versions == head.round_versions
    indices = [index for round_versions in base.round_versions for index in round_versions]
    assert len(set(indices)) > 1 and min(indices) >= 0
    assert all(a != b for round_versions in base.round_versions for a, b in zip(round_versions, round_versions[1:], strict=False))
