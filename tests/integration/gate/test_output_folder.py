"""Output folders end to end: a bad folder fails before any work with one line
and exit 2, a failed run leaves no stale report beside its results, and a second run into a
folder in use is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.signals import heed_stop_signals
from tests.support.suite_repo import make_suite_repo

ROOT = Path(__file__).resolve().parents[3]
CHEATS = ROOT / "tests" / "fixtures" / "cheats_py"
USERFILES = ROOT / "tests" / "fixtures" / "userfiles"
_SHIM = "import sys; sys.argv[0] = 'kbench-ci'; from kbench_ci.cli.app import main; main()"


def _environment() -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    return environment


def kbench(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _SHIM, *args], cwd=cwd, env=_environment(), capture_output=True,
                          text=True, timeout=300)


def bench(solution: Path, out: Path, *extra: str) -> list[str]:
    return ["bench", str(solution), "--implementation=pytorch", f"--ref={CHEATS / 'ref.py'}", f"--output-dir={out}",
            "--device=cpu", "--N=64", "--num-warmup=0", "--num-trials=2", *extra]


def _one_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.startswith("kbench-ci: error:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_bench_into_a_file_fails_before_the_worker_starts(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("a file")
    done = kbench(ROOT, *bench(CHEATS / "honest.py", tmp_path / "out"))
    assert done.returncode == 2
    assert _one_error(done) == f"kbench-ci: error: --output-dir {tmp_path / 'out'} is a file, not a folder " \
                               "(pass a folder (it is created when missing))"
    assert "[solution]" not in done.stderr  # no worker ran, nothing measured was lost


@pytest.mark.parametrize("command", ["run", "compare"])
def test_run_and_compare_check_both_outputs_first(tmp_path: Path, command: str) -> None:
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}]}])
    base = ["--base", "main"] if command == "compare" else []
    (tmp_path / "file").write_text("")
    done = kbench(repo.root, command, *base, "--device", "cpu", "--output-dir", str(tmp_path / "file" / "out"))
    assert done.returncode == 2 and "cannot be created" in _one_error(done)
    summary = tmp_path / "summary"
    summary.mkdir()
    done = kbench(repo.root, command, *base, "--device", "cpu", "--output-dir", str(tmp_path / "out"),
                  "--json-summary", str(summary))
    assert done.returncode == 2
    assert _one_error(done) == f"kbench-ci: error: --json-summary {summary} is a folder, not a file " \
                               "(pass the path of a .json file)"
    assert not (tmp_path / "out" / "results.json").exists()  # refused before any case ran
    assert repo.worktrees() == [str(repo.root)]


def test_a_failed_bench_leaves_no_report_of_the_previous_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert kbench(ROOT, *bench(CHEATS / "honest.py", out)).returncode == 0
    assert "honest.py" in (out / "benchmark.md").read_text()
    done = kbench(ROOT, *bench(USERFILES / "bad_setup_return.py", out))
    assert done.returncode == 2, done.stderr
    assert json.loads((out / "results.json").read_text())["solution"].endswith("bad_setup_return.py")
    assert not (out / "benchmark.md").exists(), "honest.py's report beside bad_setup_return.py's results"


def test_a_second_run_into_a_folder_in_use_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = subprocess.Popen([sys.executable, "-c", _SHIM, *bench(CHEATS / "hangs.py", out)], cwd=ROOT,
                             env=_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=heed_stop_signals)
    try:
        deadline = time.monotonic() + 60
        while not subprocess.run(["pgrep", "-P", str(first.pid), "-f", "kbench_ci.measure.worker"],
                                 capture_output=True).stdout:
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.2)
        second = kbench(ROOT, *bench(CHEATS / "honest.py", out))
        assert second.returncode == 2
        assert _one_error(second) == f"kbench-ci: error: --output-dir {out} is being written by another kbench-ci " \
                                     "run (wait for that run to finish, or pass another --output-dir)"
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert kbench(ROOT, *bench(CHEATS / "honest.py", out)).returncode == 0  # free again
