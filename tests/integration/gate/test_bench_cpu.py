"""The whole `kbench-ci bench` path on CPU: real worker subprocesses, real PyTorch, Triton under
its interpreter. Each cheat must be caught; each bad input must give one clear line and its
exit code; nothing measured may be lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.signals import heed_stop_signals

ROOT = Path(__file__).resolve().parents[3]
CHEATS = ROOT / "tests" / "fixtures" / "cheats_py"
USERFILES = ROOT / "tests" / "fixtures" / "userfiles"
LAYERNORM = ROOT / "examples" / "layernorm_triton"


def kbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ)
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-m", "kbench_ci", *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=environment,
    )


def bench_cheat(name: str, tmp_path: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return kbench(
        "bench", str(CHEATS / f"{name}.py"), "--implementation=pytorch", f"--ref={CHEATS / 'ref.py'}",
        f"--output-dir={tmp_path}", "--device=cpu", "--N=4096", "--num-warmup=2", "--num-trials=10", *extra,
        timeout=timeout,
    )


def results(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "results.json").read_text())


def solution_of(tmp_path: Path) -> dict:
    return results(tmp_path)["case"]["variants"][0]


def test_triton_layernorm_end_to_end_on_cpu(tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(LAYERNORM / "layernorm.py"), "--implementation=triton", "--baselines=pytorch-eager",
        f"--ref={LAYERNORM / 'ref.py'}", f"--output-dir={tmp_path}", "--M=8", "--N=128",
        "--num-warmup=1", "--num-trials=3",
    )
    assert completed.returncode == 0, completed.stderr
    assert "no CUDA device found; running on CPU" in completed.stderr
    data = results(tmp_path)
    assert data["schema"] == "kbench-ci/bench" and data["schema_version"] == 1
    solution, eager = data["case"]["variants"]
    assert solution["status"] == "ok" and eager["status"] == "ok"
    assert len(solution["rounds_ms"][0]) == 3 and len(solution["discarded_ms"]) == 1
    assert all(sample > 0 for sample in solution["rounds_ms"][0])
    assert solution["correctness"]["passed"] is True
    assert [t["seed"] for t in solution["correctness"]["trials"]] == [42, 43, 44]
    assert solution["post_timing_check"] is True
    assert data["settings"]["timing_method"] == "host_time"
    report = (tmp_path / "benchmark.md").read_text()
    for needle in ("| solution", "layernorm.py", "M=8, N=128", "## Timing", "median", "95% CI of median",
                   "vs `pytorch-eager`", "## Correctness", "PASS (3 seeds)", "host_time"):
        assert needle in report, needle


def test_honest_pytorch_kernel_passes_with_all_cpu_baselines(tmp_path: Path) -> None:
    completed = bench_cheat("honest", tmp_path, "--baselines=pytorch-eager,torch-compile,flashinfer")
    assert completed.returncode == 0, completed.stderr
    variants = {v["label"]: v for v in results(tmp_path)["case"]["variants"]}
    assert variants["solution"]["status"] == "ok"
    assert variants["pytorch-eager"]["status"] == "ok"
    assert variants["torch-compile"]["status"] == "ok"
    # compile time is reported apart from the samples, and is much larger than a run
    assert variants["torch-compile"]["first_call_ms"] > max(variants["torch-compile"]["rounds_ms"][0])
    assert variants["flashinfer"]["status"] == "unavailable"
    report = (tmp_path / "benchmark.md").read_text()
    assert "`flashinfer` not timed: unavailable" in report


@pytest.mark.parametrize(
    ("cheat", "expected_message"),
    [
        # said as what it is, not "4096 of 4096 elements outside ..., max abs error inf"
        ("writes_nothing", "never written (still all NaN, as filled before the call)"),
        ("writes_half", "2048 of 4096 elements outside"),
        ("overwrites_input", "modified its input(s) x"),
        ("stale_output", "(seed 43)"),
        ("wrong_dtype", "dtype mismatch: kernel gives float64, reference gives float32"),
    ],
)
def test_cheating_kernels_are_caught_and_never_timed(cheat: str, expected_message: str, tmp_path: Path) -> None:
    completed = bench_cheat(cheat, tmp_path, "--baselines=pytorch-eager")
    assert completed.returncode == 1, completed.stderr
    solution = solution_of(tmp_path)
    assert solution["status"] == "incorrect"
    assert expected_message in solution["message"]
    assert solution["rounds_ms"] == []  # a wrong kernel is never timed
    report = (tmp_path / "benchmark.md").read_text()
    assert "**FAIL**" in report
    assert "No speedup is claimed" in report
    # the baseline's measurement is still there
    eager = results(tmp_path)["case"]["variants"][1]
    assert eager["status"] == "ok" and eager["rounds_ms"]


def test_kernel_honest_only_while_checked_is_caught_in_the_timed_calls(tmp_path: Path) -> None:
    """Right on the correctness trials, then stops computing: the first timed call's check names it."""
    completed = bench_cheat("skips_work_after_checks", tmp_path)
    assert completed.returncode == 1
    solution = solution_of(tmp_path)
    assert solution["status"] == "incorrect"
    assert solution["correctness"]["passed"] is True
    assert "was given new input contents and its output 'y' does not match the reference" in solution["message"]
    assert solution["message"].startswith("timed call ")


def test_error_figures_are_reported_for_a_wrong_kernel(tmp_path: Path) -> None:
    bench_cheat("writes_half", tmp_path)
    trial = solution_of(tmp_path)["correctness"]["trials"][0]
    output = trial["outputs"][0]
    assert output["mismatched"] == 2048
    assert output["max_abs_error"] == "inf"  # NaN poison left in place counts as infinitely wrong
    report = (tmp_path / "benchmark.md").read_text()
    assert "| `solution`      | FAIL" in report or "FAIL" in report.split("## Correctness")[1]


def test_raising_kernel_exits_1_and_names_the_error(tmp_path: Path) -> None:
    completed = bench_cheat("raises", tmp_path, "--baselines=pytorch-eager")
    assert completed.returncode == 1
    solution = solution_of(tmp_path)
    assert solution["status"] == "error"
    assert "RuntimeError: kernel launch failed" in solution["message"]
    assert "raises.py:" in solution["message"]


@pytest.mark.parametrize(("fixture", "expected"), [
    ("exits_in_run_kernel", "solution called sys.exit(3) during its first (untimed) call: user code must return "
                            "(or raise), not end the worker process"),
    ("os_exit_in_run_kernel", "solution ended the worker process (exit status 0) during its first (untimed) call "
                              "without an error: does its code call os._exit() or exit()?"),
    ("os_exit_at_import", "solution ended the worker process (exit status 5) while loading os_exit_at_import.py / "
                          "ref.py (their top-level code) without an error"),
])
def test_a_kernel_that_ends_the_process_is_named_for_what_it_did(fixture: str, expected: str, tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(USERFILES / f"{fixture}.py"), "--implementation=pytorch", "--baselines=pytorch-eager",
        f"--ref={CHEATS / 'ref.py'}", f"--output-dir={tmp_path}", "--device=cpu", "--N=64", "--num-warmup=0",
        "--num-trials=2",
    )
    assert completed.returncode == 1, completed.stderr
    variants = {v["label"]: v for v in results(tmp_path)["case"]["variants"]}
    assert variants["solution"]["status"] == "error"
    assert expected in variants["solution"]["message"]
    assert "the worker stopped before reaching it" not in completed.stderr
    if fixture != "os_exit_at_import":  # the baseline needs the solution's setup() for its inputs
        assert variants["pytorch-eager"]["status"] == "ok"  # rerun in a fresh worker: its result survives
    assert f"kbench-ci: solution ERROR: {expected}" in completed.stderr


def test_segfaulting_kernel_is_blamed_and_the_baseline_result_survives(tmp_path: Path) -> None:
    completed = bench_cheat("segfault", tmp_path, "--baselines=pytorch-eager")
    assert completed.returncode == 1
    data = results(tmp_path)
    solution, eager = data["case"]["variants"]
    assert solution["status"] == "error" and "SIGSEGV" in solution["message"]
    assert eager["status"] == "ok" and len(eager["rounds_ms"][0]) == 10
    assert "SIGSEGV" in data["case"]["error"]


def test_hanging_kernel_times_out_and_the_baseline_result_survives(tmp_path: Path) -> None:
    completed = bench_cheat("hangs", tmp_path, "--baselines=pytorch-eager", "--timeout=20")
    assert completed.returncode == 1
    solution, eager = results(tmp_path)["case"]["variants"]
    assert solution["status"] == "error" and "timed out after 20 s" in solution["message"]
    assert eager["status"] == "ok"


def test_cheat_defaults_match_the_documented_flags(tmp_path: Path) -> None:
    completed = bench_cheat("honest", tmp_path, "--seed=7", "--correctness-trials=2", "--discard-first=2")
    assert completed.returncode == 0, completed.stderr
    data = results(tmp_path)
    solution = data["case"]["variants"][0]
    assert [t["seed"] for t in solution["correctness"]["trials"]] == [7, 8]
    assert len(solution["discarded_ms"]) == 2 and len(solution["rounds_ms"][0]) == 10
    assert data["settings"]["seed"] == 7


# --- bad input: one clear line, a distinct exit code ---------------------------------------

BAD_INPUTS = [
    # (arguments after `bench`, exit code, text the one-line error must contain)
    (["missing.py", f"--ref={CHEATS / 'ref.py'}", "--N=8"], 2, "solution file not found"),
    ([str(CHEATS / "honest.py"), "--ref=nope/ref.py", "--N=8"], 2, "ref file not found"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--implementation=fortran", "--N=8"], 2, "unknown implementation 'fortran'"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--baselines=pytorch-eager,tvm", "--N=8"], 2, "unknown baseline 'tvm'"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=abc"], 2, "dimension --N must be a positive integer, got 'abc'"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--timing-method=wallclock"], 2, "unknown --timing-method"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--num-trails=5"], 2, "did you mean --num-trials"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--device=tpu"], 2, "unknown --device"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--implementation=cuda-cpp"], 2, "needs a .cu solution"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}"], 2, "needs 'N'"),
    ([str(USERFILES / "no_setup.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--implementation=pytorch"], 2, "does not define setup()"),
    ([str(USERFILES / "syntax_error.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--implementation=pytorch"], 2, "syntax error at line 1"),
    ([str(USERFILES / "bad_setup_return.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--implementation=pytorch"], 2, "must return {'inputs'"),
    ([str(CHEATS / "honest.py"), f"--ref={USERFILES / 'ref_without_reference.py'}", "--N=8", "--implementation=pytorch"], 2, "does not define reference()"),
    ([str(CHEATS / "honest.py"), f"--ref={USERFILES / 'ref_wrong_arity.py'}", "--N=8", "--implementation=pytorch"], 2, "returned 2 values but there are 1 outputs"),
    ([str(ROOT / "examples" / "softmax_cuda" / "softmax.cu"), f"--ref={ROOT / 'examples' / 'softmax_cuda' / 'ref.py'}", "--M=8", "--N=8"], 3, "needs a CUDA GPU"),
    # bad values are usage errors, never a kernel error
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=1024.5"], 2, "dimension --N must be a positive integer, got '1024.5'"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=1e3"], 2, "got '1e3' (write --N=1000)"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=-5"], 2, "dimension --N must be a positive integer, got '-5'"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=0"], 2, "dimension --N must be a positive integer, got '0'"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--timeout", "0"], 2, "--timeout must be a positive number of seconds, got 0"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--timeout=-1"], 2, "--timeout must be a positive number of seconds, got -1"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--trials=5"], 2, "unknown option '--trials' (did you mean --num-trials?"),
    ([str(CHEATS / "honest.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--atol", "inf"], 2, "--atol must be a finite number >= 0, got inf"),
    ([str(CHEATS / "honest.py"), f"--ref={USERFILES / 'ref_atol_inf.py'}", "--N=8", "--implementation=pytorch"], 2, "ref_atol_inf.py: atol must be a finite number >= 0, got inf"),
    ([str(CHEATS / "honest.py"), f"--ref={USERFILES / 'ref_exits_at_import.py'}", "--N=8", "--implementation=pytorch"], 2, "ref ref_exits_at_import.py called sys.exit('done') while loading"),
    ([str(USERFILES / "exits_at_import.py"), f"--ref={CHEATS / 'ref.py'}", "--N=8", "--implementation=pytorch"], 2, "solution exits_at_import.py called sys.exit(0) while loading"),
]


@pytest.mark.parametrize(("args", "code", "message"), BAD_INPUTS, ids=[m for _, _, m in BAD_INPUTS])
def test_bad_input_gives_one_clear_line_and_exit_code(args: list[str], code: int, message: str, tmp_path: Path) -> None:
    completed = kbench("bench", f"--output-dir={tmp_path}", "--device=cpu", "--num-trials=2", "--num-warmup=0", *args)
    assert completed.returncode == code, (completed.stdout, completed.stderr)
    error_lines = [line for line in completed.stderr.splitlines() if line.startswith("kbench-ci: error:")]
    assert len(error_lines) == 1, completed.stderr
    assert message in error_lines[0]
    assert "Traceback" not in completed.stderr


def test_interrupting_the_parent_kills_the_worker(tmp_path: Path) -> None:
    """Ctrl-C in the parent must not leave a worker (own session) running a hung kernel."""
    import signal
    import time

    process = subprocess.Popen(
        [sys.executable, "-m", "kbench_ci", "bench", str(CHEATS / "hangs.py"), "--implementation=pytorch",
         f"--ref={CHEATS / 'ref.py'}", f"--output-dir={tmp_path}", "--device=cpu", "--N=64"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=heed_stop_signals,
    )
    try:
        deadline = time.monotonic() + 60
        workers: list[str] = []
        while time.monotonic() < deadline and not workers:
            time.sleep(0.5)
            # Only this parent's own worker: other kbench-ci runs on the machine are not ours.
            listing = subprocess.run(
                ["pgrep", "-P", str(process.pid), "-f", "kbench_ci.measure.worker"], capture_output=True, text=True,
            ).stdout
            workers = listing.split()
        assert workers, "the worker never started"
        time.sleep(3)  # let it reach the hanging kernel
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        time.sleep(0.5)
        alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
        assert alive == [], f"worker(s) {alive} outlived the interrupted parent"
    finally:
        process.kill()


@pytest.mark.parametrize("cheat", ["replays_by_identity", "replays_by_pointer"])
def test_results_replayed_from_a_cache_are_incorrect(cheat: str, tmp_path: Path) -> None:
    completed = bench_cheat(cheat, tmp_path)
    assert completed.returncode == 1, completed.stderr
    solution = solution_of(tmp_path)
    assert solution["status"] == "incorrect"
    if cheat == "replays_by_identity":
        # Right on every fresh tensor: only the checks of the timed calls can see it. (A pointer
        # cache may already fail correctness: a fresh tensor can reuse a freed one's address.)
        assert solution["correctness"]["passed"] is True
        assert "was given new input contents" in solution["message"]
        assert "remembers results" in solution["message"]
    report = (tmp_path / "benchmark.md").read_text()
    assert "incorrect" in report.lower()


def test_an_honest_kernel_passes_every_timed_check_and_the_report_says_how(tmp_path: Path) -> None:
    completed = bench_cheat("honest", tmp_path)
    assert completed.returncode == 0, completed.stderr
    solution = solution_of(tmp_path)
    assert solution["status"] == "ok"
    fresh = solution["fresh_inputs"]
    assert "8 versions of the inputs" in fresh and "from setup(seed) at other seeds" in fresh
    assert "outputs of all 11 timed calls checked against the reference" in fresh
    assert "memoisation probe: new content vs the same content one call before" in fresh
    assert fresh in (tmp_path / "benchmark.md").read_text()


def test_backend_and_implementation_with_different_values_is_an_error(tmp_path: Path) -> None:
    """Click would keep the last one silently."""
    completed = kbench("bench", str(CHEATS / "honest.py"), "--ref", str(CHEATS / "ref.py"), "--backend", "triton",
                       "--implementation", "pytorch", "--device", "cpu", "--output-dir", str(tmp_path / "out"), "--N=64")
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip() == (
        "kbench-ci: error: --implementation pytorch and --backend triton name different implementations "
        "(give one of pytorch, triton (--backend is another name for --implementation))"
    )
    assert not (tmp_path / "out").exists()  # refused before anything was written
    # The same value twice, or the alias alone, is fine.
    same = kbench("bench", str(CHEATS / "honest.py"), "--ref", str(CHEATS / "ref.py"), "--backend", "pytorch",
                  "--implementation", "pytorch", "--device", "cpu", "--output-dir", str(tmp_path / "same"), "--N=64",
                  "--num-trials", "5", "--num-warmup", "1", "--correctness-trials", "1")
    assert same.returncode == 0, same.stderr
    assert json.loads((tmp_path / "same" / "results.json").read_text())["implementation"] == "pytorch"


@pytest.mark.parametrize(("body", "message"), [
    ('    raise ValueError("the reference is broken")\n',
     "reference() raised ValueError: the reference is broken at broken_ref.py:2 (seed 42)"),
    ("    return (2 * x + 1).reshape(-1, 2)\n",
     "reference() returned 'y' of shape (2048, 2), but the output buffer 'y' has shape (4096,)"),
])
def test_a_broken_reference_is_blamed_on_the_reference_with_exit_2(body: str, message: str, tmp_path: Path) -> None:
    """A reference that raises, or returns another shape, was the solution's
    error (exit 1) or its shape mismatch."""
    ref = tmp_path / "broken_ref.py"
    ref.write_text("def reference(x, y, **_):\n" + body)
    completed = kbench("bench", str(CHEATS / "honest.py"), "--implementation=pytorch", f"--ref={ref}",
                       f"--output-dir={tmp_path / 'out'}", "--device=cpu", "--N=4096")
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip().splitlines()[-1].startswith(f"kbench-ci: error: broken_ref.py {message}")
