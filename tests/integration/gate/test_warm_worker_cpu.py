"""The warm worker on the CPU: one process serves every case of a suite; a case that
crashes or hangs it is blamed alone and the next case goes on in a fresh one; nothing a case
leaves behind reaches the next. Real worker subprocesses, ``compare`` and ``run`` in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kbench_ci.errors import EnvironmentProblem, ExitCode
from kbench_ci.gate.compare import run_compare
from kbench_ci.gate.progress import SuiteProgress
from kbench_ci.gate.run import run_suite
from kbench_ci.results.outcome import CompareRequest, RunRequest
from kbench_ci.suite.settings import Execution
from kbench_ci.wire.protocol import CaseFinished, CaseStarted
from tests.support.suite_repo import TempRepo, make_suite_repo, suite_files

FOUR_CASES = [
    {"name": "vadd", "kind": "triton", "shapes": [{"N": 1024}, {"N": 2048}]},
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}, {"N": 512}]},
]


def _started(progress: list[SuiteProgress]) -> dict[str, list[CaseStarted]]:
    """Every CaseStarted a worker reported, by case id (more than one: the case was retried)."""
    seen: dict[str, list[CaseStarted]] = {}
    for update in progress:
        if isinstance(update.event, CaseStarted):
            seen.setdefault(update.case_id, []).append(update.event)
    return seen


def _compare(repo: TempRepo, out: Path, execution: Execution, *, kernels: tuple[str, ...] = ()) -> tuple:
    progress: list[SuiteProgress] = []
    outcome = run_compare(
        CompareRequest(start=repo.root, base="main", device="cpu", output_dir=out, kernels=kernels),
        on_progress=progress.append, execution=execution,
    )
    return outcome, progress


def test_all_cases_of_a_four_case_compare_run_in_one_worker_process(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", FOUR_CASES)
    outcome, progress = _compare(repo, tmp_path / "out", Execution(warm_worker=True, cache_dir=tmp_path / "cache"))
    started = _started(progress)
    assert len(started) == 4
    calls = [event for update in progress if isinstance(event := update.event, CaseStarted)]
    pids = {event.worker_pid for event in calls}
    assert len(pids) == 1, f"one warm worker expected, saw {pids}"
    # ... serving the calls one after another (a remeasured case makes two), each after the
    # cleanup that ended the one before.
    assert [event.served_before for event in calls] == list(range(len(calls)))
    finished = [u.event for u in progress if isinstance(u.event, CaseFinished)]
    assert len(finished) == len(calls) and not any(event.retire for event in finished)
    assert all(case.verdict.value != "failed" for case in outcome.cases), [c.message for c in outcome.cases]


def test_fresh_worker_starts_a_process_per_case(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", FOUR_CASES[1:])
    _, progress = _compare(repo, tmp_path / "out", Execution(warm_worker=False, cache_dir=None))
    started = _started(progress)
    assert len({events[0].worker_pid for events in started.values()}) == 2
    assert all(events[0].served_before == 0 for events in started.values())


CRASHING = '''\
import os
import torch


def setup(N, **_):
    x = torch.randn(N)
    return {"inputs": {"x": x, "out": torch.empty(N)}, "outputs": ["out"]}


def run_kernel(x, out, **_):
    os.abort()  # a segfault would read the same: the worker dies by a signal
'''


def test_a_case_that_crashes_the_worker_is_blamed_and_the_next_runs_in_a_new_one(tmp_path: Path) -> None:
    kernels = [
        {"name": "first", "kind": "pytorch", "shapes": [{"N": 256}]},
        {"name": "crash", "kind": "pytorch", "shapes": [{"N": 256}]},
        {"name": "after", "kind": "pytorch", "shapes": [{"N": 256}]},
    ]
    repo = make_suite_repo(tmp_path / "repo", kernels)
    files = suite_files(kernels)
    files["kernels/crash.py"] = CRASHING
    repo.write(files)  # the head (working tree) crashes; the base is fine
    outcome, progress = _compare(repo, tmp_path / "out", Execution(warm_worker=True))
    by_case = {case.kernel: case for case in outcome.cases}
    crash = by_case["crash"]
    assert crash.verdict.value == "failed", crash.message
    assert "head crashed the worker (SIGABRT)" in (crash.message or "") + str(crash.result and crash.result.error)
    assert crash.result is not None and crash.result.variant("base").status == "ok", "the base was rerun and measured"
    assert by_case["first"].verdict.value != "failed" and by_case["after"].verdict.value != "failed"
    started = _started(progress)
    first_pid = started["first[N=256]"][0].worker_pid
    crash_pids = [event.worker_pid for event in started["crash[N=256]"]]
    after_pid = started["after[N=256]"][0].worker_pid
    # The crash case started in the warm worker and was retried (without the head) in a fresh one,
    # which then served the next case.
    assert crash_pids[0] == first_pid and len(crash_pids) == 2 and crash_pids[1] != first_pid
    assert after_pid == crash_pids[1]


def test_a_hanging_case_times_out_alone(tmp_path: Path) -> None:
    kernels = [
        {"name": "hang", "kind": "pytorch", "shapes": [{"N": 256}], "timeout": 20},
        {"name": "after", "kind": "pytorch", "shapes": [{"N": 256}, {"N": 512}]},
    ]
    repo = make_suite_repo(tmp_path / "repo", kernels)
    repo.write({"kernels/hang.py": suite_files([{**kernels[0], "variant": "hangs"}])["kernels/hang.py"]})
    outcome, progress = _compare(repo, tmp_path / "out", Execution(warm_worker=True))
    by_case = {case.case_id: case for case in outcome.cases}
    hang = by_case["hang[N=256]"]
    assert hang.verdict.value == "failed"
    assert "timed out after 20 s" in str(hang.result.error if hang.result else hang.message)
    assert all(by_case[c].verdict.value != "failed" for c in ("after[N=256]", "after[N=512]"))
    started = _started(progress)
    # The two later cases share the worker that replaced the hung one.
    assert started["after[N=256]"][0].worker_pid == started["after[N=512]"][0].worker_pid
    assert started["after[N=256]"][0].worker_pid not in {e.worker_pid for e in started["hang[N=256]"][:1]}


LEAKY = '''\
"""Records, at the first setup() of each case, what earlier cases may have left behind; then
leaves some of it behind itself."""
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
import leak_helper  # noqa: E402  (a module outside the kernel's folder, found through sys.path)

IMPORT_DTYPE = str(torch.get_default_dtype())
torch.set_default_dtype(torch.float64)  # at import: put back by the worker, and noted
CALLS = 0
LOG = Path(__file__).resolve().parents[1] / "seen.jsonl"


def setup(N, **_):
    record = {
        "N": N, "pid": os.getpid(), "calls_before": CALLS, "helper_hits": leak_helper.HITS,
        "env": os.environ.get("KBENCH_LEAK"), "import_dtype": IMPORT_DTYPE,
        "path_entries": sum(1 for p in sys.path if p.endswith("helpers")),
        "triton_cache": os.environ.get("TRITON_CACHE_DIR"),
    }
    with open(LOG, "a") as handle:
        handle.write(json.dumps(record) + "\\n")
    leak_helper.HITS += 1
    os.environ["KBENCH_LEAK"] = "set by an earlier case"
    x = torch.randn(N, dtype=torch.float32)
    return {"inputs": {"x": x, "out": torch.empty(N, dtype=torch.float32)}, "outputs": ["out"]}


def run_kernel(x, out, **_):
    global CALLS
    CALLS += 1
    torch.mul(x, 2.0, out=out)
'''


def test_nothing_a_case_leaves_behind_reaches_the_next_case(tmp_path: Path) -> None:
    # Sizes whose calls take tens of microseconds: at 256-1024 elements (a few us) a busy machine
    # once made the memoisation probe read an honest call as 1.7x faster on repeated content.
    sizes = (1 << 16, 1 << 17, 1 << 18)
    kernels = [{"name": "leaky", "kind": "pytorch", "shapes": [{"N": n} for n in sizes]}]
    repo = make_suite_repo(tmp_path / "repo", kernels)
    repo.write({"kernels/leaky.py": LEAKY, "helpers/leak_helper.py": "HITS = 0\n"})
    progress: list[SuiteProgress] = []
    outcome = run_suite(
        RunRequest(start=repo.root, device="cpu", output_dir=tmp_path / "out"), on_progress=progress.append,
        execution=Execution(warm_worker=True, cache_dir=tmp_path / "cache"),
    )
    assert [case.status for case in outcome.cases] == ["ok", "ok", "ok"], [c.message for c in outcome.cases]
    records = [json.loads(line) for line in (repo.root / "seen.jsonl").read_text().splitlines()]
    assert len({record["pid"] for record in records}) == 1, "the three cases must share one warm worker"
    firsts = [next(r for r in records if r["N"] == n) for n in sizes]
    for first in firsts:
        # A fresh import of the user's module and its helper, a clean environment and sys.path,
        # and torch's default dtype as torch sets it.
        assert first["calls_before"] == 0, first
        assert first["helper_hits"] == 0, first
        assert first["env"] is None, first
        assert first["path_entries"] == 1, first
        assert first["import_dtype"] == "torch.float32", first
    # Triton's on-disk cache is in the cache folder (TorchInductor's too), not ~/.triton.
    assert {r["triton_cache"] for r in records} == {str(tmp_path / "cache" / "triton")}
    # Within a case the module is the same one: its state is the case's own business.
    assert any(r["calls_before"] > 0 for r in records)


def test_a_gpu_the_workers_torch_cannot_use_stops_the_run_with_exit_3(tmp_path: Path) -> None:
    # The parent asks the driver, not torch; were it to pick a GPU this torch cannot use (here a
    # CPU build asked for cuda:0), the worker says so: the run stops as the machine's problem
    # (exit 3) with torch's reason, instead of every case failing as a crash.
    if torch.cuda.is_available():
        pytest.skip("this torch can use CUDA")
    repo = make_suite_repo(tmp_path / "repo", FOUR_CASES[1:])
    with pytest.raises(EnvironmentProblem) as info:
        run_compare(
            CompareRequest(start=repo.root, base="main", device="cuda:0", output_dir=tmp_path / "out"),
            execution=Execution(warm_worker=True, cache_dir=tmp_path / "cache"),
        )
    assert info.value.exit_code is ExitCode.ENVIRONMENT
    assert "in the worker cannot use cuda:0" in info.value.message
    assert "CUDA build of torch" in (info.value.hint or "")
