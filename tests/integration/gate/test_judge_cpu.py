"""The judge's red team on the CPU: heads that reach for the verdict, against an honest base, in
one ``compare --isolation judge`` (tests/fixtures/judge says what each head does).

What is asserted is the architecture, not a timing bound (CI has 2 cores): a head that does
no work is ``incorrect`` however it rebinds the checks or forges results; no head is ``faster``
or ``fixed``; a head that slows "every other caller" leaves the base as fast as the honest
head's base (a 2x sabotage, in one process, would halve the ratio); the base is never stopped
by a head's signals; nothing a head writes lands outside its own folders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kbench_ci.side.harden import landlock_abi
from tests.support.suite_repo import FAST_DEFAULTS, TempRepo, make_suite_repo, suite_toml

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "judge"
CHEATS = ("rebind_checks", "sabotage_base", "setup_precompute", "gc_answers", "scan_memory", "forge_results", "signal_base",
          "escape_sandbox", "daemon_spawn", "daemon_burn", "turn_probe", "hold_lock")
#: cases whose base is not the honest matmul: the base is a probe or sensitive on purpose
BASES = {"turn_probe": "turn_probe", "daemon_burn": "turn_probe", "hold_lock": "lock_sensitive"}
#: heads that do no work of their own: only a harness that lets them reach the checks, the
#: expected outputs or the results channel would pass them
NO_WORK = ("rebind_checks", "gc_answers", "scan_memory", "forge_results")
SHAPE = {"M": 160, "N": 160, "K": 160}


def _suite(repo_root: Path, heads: dict[str, str]) -> TempRepo:
    repo = TempRepo(repo_root)
    honest = (FIXTURES / "honest.py").read_text()
    kernels = [{"name": name, "kind": "pytorch", "shapes": [SHAPE]} for name in ("honest", *CHEATS)]
    toml = suite_toml(kernels, {**FAST_DEFAULTS, "correctness_trials": 2, "rounds": 4})
    toml = "\n".join(
        'ref = "kernels/ref.py"' if line.startswith("ref = ") else line for line in toml.splitlines()
    ) + "\n"
    base = {"kbench.toml": toml, "kernels/ref.py": (FIXTURES / "ref.py").read_text(), "kernels/honest.py": honest}
    base.update({f"kernels/{name}.py": honest for name in CHEATS})
    base.update({f"kernels/{name}.py": (FIXTURES / f"{probe}.py").read_text() for name, probe in BASES.items()})
    repo.commit(base, "an honest matmul under eight names")
    repo.git("checkout", "-q", "-b", "cheats")
    repo.commit({f"kernels/{name}.py": text for name, text in heads.items()}, "heads that reach for the verdict")
    return repo


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("judge")
    repo = _suite(root / "repo", {name: (FIXTURES / f"{name}.py").read_text() for name in CHEATS})
    runner = root / "runner"
    (runner / "_runner_file_commands").mkdir(parents=True)
    step_file = runner / "_runner_file_commands" / "set_env_0f1e"
    step_file.write_text("")
    venv = root / "action-venv"
    venv.mkdir()
    (venv / "activate").write_text("# the action's venv\n")
    marks = Path(tempfile.mkdtemp(prefix="kbench-judge-test-", dir="/dev/shm"))
    environment = {**os.environ, "RUNNER_TEMP": str(runner), "KBENCH_JUDGE_TEST_TARGETS": str(venv),
                   "KBENCH_JUDGE_TEST_DAEMON": str(marks / "daemon"), "KBENCH_JUDGE_TEST_TURNS": str(marks / "turns"),
                   "KBENCH_JUDGE_TEST_BURNS": str(marks / "burns"), "KBENCH_JUDGE_TEST_SCANS": str(marks / "scans"),
                   "KBENCH_JUDGE_TEST_LOCK": str(marks / "lock"), "KBENCH_CI_JUDGE_OPEN_LOG": str(marks / "judge-opened")}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    out = root / "out"
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "compare", "--base", "main", "--device", "cpu", "--isolation", "judge",
         "--threshold", "0.05", "--output-dir", str(out), "--no-cache"],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=900,
    )
    assert (out / "results.json").is_file(), completed.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    return {"completed": completed, "results": results, "step_file": step_file, "venv": venv, "report": out / "benchmark.md",
            "marks": marks, "head_tree": repo.root}


def _case(judged: dict[str, object], name: str) -> dict:
    results = judged["results"]
    assert isinstance(results, dict)
    return next(case for case in results["cases"] if case["kernel"] == name)


def _variant(case: dict, label: str) -> dict:
    variant = case[label]
    assert isinstance(variant, dict), case
    return variant


@pytest.mark.parametrize("cheat", NO_WORK)
def test_a_head_that_does_no_work_is_incorrect_whatever_it_rebinds_or_forges(judged: dict[str, object], cheat: str) -> None:
    case = _case(judged, cheat)
    head = _variant(case, "head")
    print(cheat, case["verdict"], head["status"], head.get("message"))
    assert head["status"] == "incorrect", head
    assert case["verdict"] == "incorrect"
    assert _variant(case, "base")["status"] == "ok"


def test_a_head_that_reads_its_whole_process_memory_finds_no_answer(judged: dict[str, object]) -> None:
    """scan_memory.py finds an expected output hidden where torch does not know it (raw bytes,
    pygpubench's way) in its own process (tests/unit/judge/test_scan_memory_cheat.py); under the
    judge it read its anonymous and shared memory at every call and found nothing in any call
    the judge made: no expected output is in any process a side runs in.

    Its worker's first call is its load's, on its own setup()'s contents at a fixed seed,
    which the judge neither stages nor checks. There it may find an answer: the same contents'
    output left in the memory of a worker kept warm, by the last case's head (on a CPU it is
    found, and worth nothing: the judge's own calls draw their contents from the OS)."""
    marks = judged["marks"]
    assert isinstance(marks, Path)
    by_worker = {path.name: [line.split() for line in path.read_text().splitlines()] for path in marks.glob("scans.*")}
    print(f"scan_memory: by worker, bytes read and found: {by_worker}")
    assert by_worker, "scan_memory never ran"
    judged_calls = [scan for scans in by_worker.values() for scan in scans[1:]]
    assert judged_calls, by_worker  # it reached the judge's calls (its correctness trial at least)
    assert all(int(read) > 16 << 20 for scans in by_worker.values() for read, _ in scans), by_worker  # it did read
    assert all(found == "False" for _, found in judged_calls), by_worker


@pytest.mark.parametrize("cheat", CHEATS)
def test_no_head_reads_faster_or_fixed(judged: dict[str, object], cheat: str) -> None:
    case = _case(judged, cheat)
    print(cheat, case["verdict"], case.get("ratio"))
    assert case["verdict"] not in ("faster", "fixed")
    assert _variant(case, "base")["status"] == "ok", _variant(case, "base")


def _median(variant: dict) -> float:
    samples = sorted(s for round_ in variant["rounds_ms"] for s in round_)
    return samples[len(samples) // 2]


def test_a_head_that_slows_every_other_caller_cannot_slow_the_base(judged: dict[str, object]) -> None:
    """In one process the sabotage runs the base's matmul twice (base/head ~2); apart, the
    base runs as the honest case's base does. The bound is loose on purpose: a 2-core CI."""
    sabotaged = _median(_variant(_case(judged, "sabotage_base"), "base"))
    control = _median(_variant(_case(judged, "honest"), "base"))
    print(f"base median: {sabotaged:.4f} ms beside the sabotage, {control:.4f} ms beside the honest head")
    assert sabotaged < 1.5 * control


def test_a_head_that_precomputes_in_setup_is_timed_on_contents_it_never_made(judged: dict[str, object]) -> None:
    case = _case(judged, "setup_precompute")
    head = _variant(case, "head")
    assert head["status"] == "ok"
    assert "entropy" in head["fresh_inputs"]
    assert "the base's setup_precompute.py setup()" in head["fresh_inputs"]
    assert _median(head) > 0.5 * _median(_variant(case, "base"))


@pytest.mark.skipif(landlock_abi() < 6, reason="Landlock signal scoping needs ABI 6 (Linux 6.12); this kernel lacks it")
def test_a_head_cannot_stop_the_base_or_the_judge(judged: dict[str, object]) -> None:
    case = _case(judged, "signal_base")
    assert _variant(case, "base")["status"] == "ok"
    assert _variant(case, "head")["status"] == "ok"
    assert case["verdict"] not in ("faster", "fixed", "error")


@pytest.mark.skipif(landlock_abi() < 1, reason="Landlock is not offered by this kernel")
def test_a_head_writes_nothing_outside_its_own_folders(judged: dict[str, object]) -> None:
    assert judged["step_file"].read_text() == ""  # type: ignore[union-attr]
    assert (judged["venv"] / "activate").read_text() == "# the action's venv\n"  # type: ignore[operator]
    assert sorted(p.name for p in judged["venv"].iterdir()) == ["activate"]  # type: ignore[union-attr]


def test_the_report_names_the_sandbox_in_force(judged: dict[str, object]) -> None:
    case = _case(judged, "honest")
    assert "judged apart" in case["timing_description"]
    if landlock_abi() >= 1:
        assert "landlock-write" in case["timing_description"]


def test_the_honest_head_is_correct_and_timed(judged: dict[str, object]) -> None:
    case = _case(judged, "honest")
    for label in ("base", "head"):
        variant = _variant(case, label)
        assert variant["status"] == "ok"
        assert len(variant["rounds_ms"]) >= 4
    assert case["verdict"] in ("unchanged", "inconclusive", "slower", "faster")


def test_no_process_a_head_started_outlives_the_command(judged: dict[str, object]) -> None:
    marks = judged["marks"]
    assert isinstance(marks, Path)
    daemons = [int(path.read_text()) for path in marks.glob("daemon.*")]
    assert daemons, "the daemon fixture never ran"
    for pid in daemons:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue  # gone
        assert state == b"Z", f"daemon {pid} is still running (state {state!r})"


def test_a_daemon_a_head_double_forked_is_ended_before_the_other_side_is_timed(judged: dict[str, object]) -> None:
    """``daemon_burn``'s orphan burns every core whenever its worker is stopped. Pausing the
    worker does not stop an orphan; the judge (a child subreaper, so the orphan is its child)
    ends it at the first change of turn. Without that each daemon (one per measurement of the
    case: each loads the head afresh) burns in every one of the base's turns, at least the 4
    rounds; with it, at most once, cut short, as the first turn changes."""
    marks = judged["marks"]
    assert isinstance(marks, Path)
    burns = {path.name: len(path.read_text().splitlines()) for path in marks.glob("burns.*")}
    case = _case(judged, "daemon_burn")
    print(f"daemon_burn: burns by daemon {burns}; verdict {case['verdict']} {case.get('ratio')}")
    assert all(count <= 1 for count in burns.values()), burns
    assert _variant(case, "base")["status"] == "ok" and _variant(case, "head")["status"] == "ok"
    assert case["verdict"] not in ("faster", "fixed")


def test_while_a_side_has_the_turn_every_other_side_is_stopped(judged: dict[str, object]) -> None:
    """Every call of turn_probe.py (a base's, and daemon_burn's head's, which imports it)
    records the state of each other process of its worker's kind under the judge. Stopped, all
    of them, but one: a daemon the recording worker itself double-forked, which runs beside its
    own side's call until the next change of turn ends it (each daemon_burn daemon's owner is
    written down by the process that forked it). Seen running by another side's call, it
    would fail here (the head's own orphan was seen by the head's own load)."""
    marks = judged["marks"]
    assert isinstance(marks, Path)
    owners = {int(path.name.rsplit(".", 1)[1]): int(path.read_text()) for path in marks.glob("turns-owner.*")}
    calls = [(int(path.name.rsplit(".", 1)[1]), line) for path in marks.glob("turns.*") for line in path.read_text().splitlines()]
    assert len(calls) >= 8, calls  # both sides' calls were recorded
    entries = [(caller, int(entry.split(":")[0]), entry.split(":")[1]) for caller, line in calls for entry in line.split()]
    running = [(caller, pid, state) for caller, pid, state in entries if state != "T"]
    own = [(caller, pid, state) for caller, pid, state in running if owners.get(pid) == caller]
    print(f"{len(calls)} calls recorded the other processes' states: {sorted({state for _, _, state in entries})}; "
          f"not stopped: {len(own)} sighting(s) of the caller's own daemon, {len(running) - len(own)} of anything else")
    assert entries
    assert [entry for entry in running if entry not in own] == [], calls[:5]
    # and by one call of its own at most: the next change of turn ends it, so a daemon seen by
    # two calls of its worker outlived a turn
    assert len({(caller, pid) for caller, pid, _ in own}) == len(own), own


def test_a_base_that_fails_only_beside_the_head_is_an_error_never_fixed(judged: dict[str, object]) -> None:
    case = _case(judged, "hold_lock")
    head, base = _variant(case, "head"), _variant(case, "base")
    print(case["verdict"], base["status"], head["status"], head.get("message"))
    assert case["verdict"] not in ("fixed", "faster")
    assert base["status"] == "ok", base
    assert head["status"] == "error"
    assert "failed beside this head" in head["message"]


def test_the_judge_never_opens_a_file_of_the_heads_tree(judged: dict[str, object]) -> None:
    """The head is the working tree (branch ``cheats``); the base is a worktree kbench-ci made.
    Every file the judge opened (its audit hook's log) is outside the head's tree, and the
    base's ref.py is among them (the log is not empty by accident)."""
    marks, head_tree = judged["marks"], judged["head_tree"]
    assert isinstance(marks, Path) and isinstance(head_tree, Path)
    opened = [Path(line).resolve() for line in (marks / "judge-opened").read_text().splitlines() if line]
    assert any(path.name == "ref.py" for path in opened), opened[:20]
    inside = [str(path) for path in opened if path.is_relative_to(head_tree.resolve())]
    assert inside == [], inside[:10]


@pytest.mark.parametrize("variant", ["ok", "wrong"])
def test_without_a_trusted_setup_the_solution_makes_its_inputs_in_its_worker_and_the_report_says_so(
    tmp_path: Path, variant: str,
) -> None:
    """`run` of a Python solution whose ref.py has no setup(): its own setup() runs in its worker
    at seeds the judge draws; the judge still computes the expected outputs and checks."""
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 4096}], "variant": variant}])
    out = tmp_path / "out"
    environment = {**os.environ}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "run", "--device", "cpu", "--isolation", "judge", "--output-dir", str(out)],
        cwd=repo.root, env=environment, capture_output=True, text=True, timeout=600,
    )
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    solution = case["result"]
    print(completed.returncode, solution["status"], solution.get("message"), solution.get("notes"))
    assert any("the solution chose its inputs" in note for note in solution["notes"])
    assert "own setup(), run in its worker" in (solution.get("fresh_inputs") or "") or variant == "wrong"
    if variant == "ok":
        assert completed.returncode == 0, completed.stderr[-3000:]
        assert solution["status"] == "ok"
        assert all(len(seed_check["outputs"]) == 1 for seed_check in solution["correctness"]["trials"])
    else:
        assert completed.returncode == 1, completed.stderr[-3000:]
        assert solution["status"] == "incorrect"


@pytest.mark.parametrize(("solution", "status", "code"), [("rebind_checks", "incorrect", 1), ("honest", "ok", 0)])
def test_bench_under_the_judge(tmp_path: Path, solution: str, status: str, code: int) -> None:
    """`bench --isolation judge` with a baseline: the head that rebinds the checks (PASS and
    ~40x faster than eager in one process on this CPU) fails; the honest matmul passes."""
    environment = {**os.environ}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(FIXTURES / f"{solution}.py"), "--implementation=pytorch",
         f"--ref={FIXTURES / 'ref.py'}", "--M=128", "--N=128", "--K=128", "--device=cpu", "--baselines=pytorch-eager",
         "--isolation", "judge", "--num-trials=10", f"--output-dir={tmp_path / 'out'}"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600,
    )
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    variants = {variant["label"]: variant for variant in results["case"]["variants"]}
    print(solution, completed.returncode, variants["solution"]["status"], variants["solution"].get("message"))
    assert completed.returncode == code, completed.stderr[-3000:]
    assert variants["solution"]["status"] == status
    assert variants["pytorch-eager"]["status"] == "ok"
    assert "judged apart" in results["case"]["timing_description"]


def test_a_remeasured_case_is_measured_in_new_processes(judged: dict[str, object]) -> None:
    """A process's own bias lasts its whole life (docs/statistics.md): a re-measurement in the
    same warm workers only measured it again. The judge starts every worker of a re-measured
    case anew, and the case's timing description says so; a case measured once says nothing."""
    results = judged["results"]
    assert isinstance(results, dict)
    cases = [case for case in results["cases"] if case.get("timing_description")]
    again = [case for case in cases if case.get("remeasured")]
    assert again, "no case was re-measured: the suite no longer reaches the re-measurement"
    for case in cases:
        said = "measured again in new processes" in case["timing_description"]
        assert said == bool(case.get("remeasured")), (case["kernel"], case["timing_description"])
