"""Stopping a run from outside: SIGTERM and SIGHUP clean up like Ctrl-C, a
second signal does not cut the clean-up short, and a worker never outlives its parent, even one
killed with SIGKILL (the worker watches a pipe whose other end dies with the parent)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.signals import heed_stop_signals
from tests.support.suite_repo import make_suite_repo, suite_files

ROOT = Path(__file__).resolve().parents[3]
CHEATS = ROOT / "tests" / "fixtures" / "cheats_py"
_SHIM = "import sys; sys.argv[0] = 'kbench-ci'; from kbench_ci.cli.app import main; main()"


def _environment(tmpdir: Path | None = None) -> dict[str, str]:
    environment = dict(os.environ)
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    if tmpdir is not None:
        environment["TMPDIR"] = str(tmpdir)
    return environment


def _start(args: list[str], cwd: Path, tmpdir: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _SHIM, *args], cwd=cwd, env=_environment(tmpdir),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=heed_stop_signals,
    )


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan killed in a container may wait long to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _wait_for_worker(parent: subprocess.Popen[str], *, settle_s: float = 3.0) -> list[int]:
    """The parent's worker pids, once the worker has had time to reach the hanging kernel."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        listing = subprocess.run(
            ["pgrep", "-P", str(parent.pid), "-f", "kbench_ci.measure.worker"], capture_output=True, text=True,
        ).stdout.split()
        if listing:
            time.sleep(settle_s)
            return [int(pid) for pid in listing]
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.3)
    raise AssertionError("the worker never started")


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _running(pid)]
        if not alive:
            return []
        time.sleep(0.2)
    return [pid for pid in pids if _running(pid)]


def _bench_hanging(tmp_path: Path) -> subprocess.Popen[str]:
    return _start(
        ["bench", str(CHEATS / "hangs.py"), "--implementation=pytorch", f"--ref={CHEATS / 'ref.py'}",
         f"--output-dir={tmp_path / 'out'}", "--device=cpu", "--N=64"],
        ROOT,
    )


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGHUP, 129, "SIGHUP")])
def test_sigterm_and_sighup_stop_bench_and_its_worker(sig: signal.Signals, code: int, name: str, tmp_path: Path) -> None:
    process = _bench_hanging(tmp_path)
    try:
        workers = _wait_for_worker(process)
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == code, stderr
        assert f"kbench-ci: terminated ({name})" in stderr
        assert "Traceback" not in stderr
        assert _gone_within(workers, 5) == [], "the worker outlived its terminated parent"
    finally:
        process.kill()


def test_a_worker_dies_with_a_parent_killed_by_sigkill(tmp_path: Path) -> None:
    """SIGKILL runs no clean-up in the parent: only the worker's lifeline can end it."""
    process = _bench_hanging(tmp_path)
    workers: list[int] = []
    try:
        workers = _wait_for_worker(process)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        assert _gone_within(workers, 10) == [], "the worker of a SIGKILLed parent kept running its kernel"
    finally:
        process.kill()
        for pid in workers:  # only when the assertion failed: do not leave it spinning
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def test_sigterm_then_sigint_on_compare_removes_its_worktrees(tmp_path: Path) -> None:
    """The follow-up signal (GitHub: SIGINT, then SIGTERM 7.5 s later) must not cut the
    clean-up short: worktrees and temporary folders are gone, and results so far are kept."""
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}]}])
    repo.write({"kernels/scale.py": suite_files([{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}],
                                                   "variant": "hangs"}])["kernels/scale.py"]})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "out"
    process = _start(["compare", "--base", "main", "--device", "cpu", "--output-dir", str(out)], repo.root, scratch)
    try:
        workers = _wait_for_worker(process)
        # The base's worktree exists while the case runs. The worker is started early, while the
        # parent still prepares the base (a busy machine: no worktree yet 3 s
        # after the worker): wait for the case, not for a guess of how long that takes.
        deadline = time.monotonic() + 60
        while len(repo.worktrees()) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        assert len(repo.worktrees()) == 2, repo.worktrees()
        process.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 143, stderr
        assert "kbench-ci: terminated (SIGTERM); worktrees removed" in stderr
        assert "Traceback" not in stderr
        assert repo.worktrees() == [str(repo.root)]
        assert [p.name for p in scratch.iterdir() if p.name.startswith("kbench-")] == []
        assert _gone_within(workers, 5) == []
        assert (out / "results.json").is_file()  # the empty, incomplete report written at the start
    finally:
        process.kill()


def test_a_signal_ignored_on_purpose_stays_ignored(tmp_path: Path) -> None:
    """`nohup kbench-ci ...` must survive the terminal closing (SIGHUP)."""
    process = subprocess.Popen(
        ["nohup", sys.executable, "-c", _SHIM, "bench", str(CHEATS / "hangs.py"), "--implementation=pytorch",
         f"--ref={CHEATS / 'ref.py'}", f"--output-dir={tmp_path / 'out'}", "--device=cpu", "--N=64"],
        cwd=tmp_path, env=_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        workers = _wait_for_worker(process)
        process.send_signal(signal.SIGHUP)
        time.sleep(2)
        assert process.poll() is None, process.communicate()
        assert all(_running(pid) for pid in workers)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == 143, stderr
        assert _gone_within(workers, 5) == []
    finally:
        process.kill()


def test_compare_dies_with_its_step_shell_killed_by_sigkill(tmp_path: Path) -> None:
    """The runner SIGKILLs a cancelled step's shell; compare (re-parented)
    must stop as on SIGTERM: its worker killed, its worktrees and temporary folders removed."""
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}]}])
    repo.write({"kernels/scale.py": suite_files([{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}],
                                                   "variant": "hangs"}])["kernels/scale.py"]})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    environment = {**_environment(scratch), "KBENCH_CI_EXIT_WITH_PARENT": "1"}
    out = tmp_path / "out"
    command = " ".join([sys.executable, "-c", repr(_SHIM), "compare", "--base", "main", "--device", "cpu",
                        "--output-dir", str(out)])
    step = subprocess.Popen(["bash", "-c", f"{command} & wait"], cwd=repo.root, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=heed_stop_signals)
    try:
        deadline = time.monotonic() + 90
        compare: list[str] = []
        while not compare and time.monotonic() < deadline:
            compare = subprocess.run(["pgrep", "-P", str(step.pid)], capture_output=True, text=True).stdout.split()
            time.sleep(0.2)
        assert compare, "compare never started"
        compare_pid = int(compare[0])
        fake_parent = type("P", (), {"pid": compare_pid, "poll": lambda self: None, "communicate": lambda self: ""})()
        workers = _wait_for_worker(fake_parent)  # type: ignore[arg-type]
        assert len(repo.worktrees()) == 2
        step.kill()  # SIGKILL: the shell runs nothing more
        step.wait(timeout=10)
        assert _gone_within([compare_pid, *workers], 30) == [], "compare or its worker outlived the step"
        assert repo.worktrees() == [str(repo.root)]
        assert [p.name for p in scratch.iterdir() if p.name.startswith("kbench-")] == []
    finally:
        step.kill()
        subprocess.run(["pkill", "-f", str(out)], check=False)


def test_folders_left_by_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    """A run killed with SIGKILL leaves its folders; the next run removes
    those whose owner is gone and leaves a running one's alone."""
    from kbench_ci.scratch import OWNER_FILE, remove_stale

    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / "kbench-worker-abc"
    stale.mkdir()
    (stale / OWNER_FILE).write_text(f"{dead.pid} 1")
    live = tmp_path / "kbench-build-def"
    live.mkdir()
    start = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (live / OWNER_FILE).write_text(f"{os.getpid()} {start}")
    reused = tmp_path / "kbench-build-pid-reused"
    reused.mkdir()
    (reused / OWNER_FILE).write_text(f"{os.getpid()} 1")  # same pid, another start time
    old_unowned = tmp_path / "kbench-worker-old"
    old_unowned.mkdir()
    os.utime(old_unowned, (time.time() - 2 * 86400, time.time() - 2 * 86400))
    new_unowned = tmp_path / "kbench-worker-new"
    new_unowned.mkdir()
    other = tmp_path / "not-ours"
    other.mkdir()
    removed = remove_stale(tmp_path)
    assert sorted(p.name for p in removed) == ["kbench-build-pid-reused", "kbench-worker-abc", "kbench-worker-old"]
    assert live.is_dir() and new_unowned.is_dir() and other.is_dir()


def test_a_stopped_process_s_own_folders_are_removed_by_the_one_that_stopped_it(tmp_path: Path) -> None:
    """A judge makes its scratch folder itself and ends by SIGKILL (its lifeline): the parent
    that stopped it removes that folder, and nothing of another process's."""
    from kbench_ci.scratch import OWNER_FILE, remove_left_by

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    start = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    its = tmp_path / "kbench-judge-abc"
    (its / "side-head").mkdir(parents=True)
    (its / OWNER_FILE).write_text(f"{child.pid} {start}")
    mine = tmp_path / "kbench-worker-def"
    mine.mkdir()
    me = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (mine / OWNER_FILE).write_text(f"{os.getpid()} {me}")
    assert remove_left_by(child.pid, tmp_path) == []  # it still runs: its folder stays
    child.kill()
    child.wait()
    assert remove_left_by(child.pid, tmp_path) == [its] and not its.exists()
    assert mine.is_dir() and remove_left_by(os.getpid(), tmp_path) == []  # a running owner's stays


def test_the_action_step_compare_and_its_worker_end_when_the_runner_is_killed(tmp_path: Path) -> None:
    """The runner's worker (a .NET process) starts the compare step, which
    `exec`s ``python -m kbench_ci.github.action compare``, which runs ``kbench-ci compare``.
    SIGKILL of the runner re-parents only the step: compare's parent (the step) lives on, so
    the step itself must notice and stop compare as on SIGTERM. Within a few seconds the step,
    compare and its worker are gone, the worktrees and temporary folders removed, and the
    results written so far kept."""
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}]}])
    repo.write({"kernels/scale.py": suite_files([{"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}],
                                                   "variant": "hangs"}])["kernels/scale.py"]})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    out = tmp_path / "report"
    cli = tmp_path / "kbench-ci"
    cli.write_text(f"#!{sys.executable}\n{_SHIM.replace('; ', chr(10))}\n")
    cli.chmod(0o755)
    environment = {
        **_environment(scratch), "GITHUB_ACTIONS": "true", "KBENCH_CLI": str(cli), "KBENCH_BASE": "main",
        "KBENCH_REPORT_DIR": str(out), "RUNNER_TEMP": str(runner_temp),
        "GITHUB_OUTPUT": str(runner_temp / "output"), "KBENCH_EXTRA_ARGS": "--device cpu",
    }
    environment.pop("KBENCH_CI_EXIT_WITH_PARENT", None)
    # The runner's worker stand-in: it starts the step and waits, as the runner does.
    runner = subprocess.Popen(
        ["bash", "-c", f"{sys.executable} -m kbench_ci.github.action compare & wait"], cwd=repo.root,
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=heed_stop_signals,
    )
    step_pid: int | None = None
    compare_pid: int | None = None
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while not workers and time.monotonic() < deadline:
            children = subprocess.run(["pgrep", "-P", str(runner.pid)], capture_output=True, text=True).stdout.split()
            step_pid = int(children[0]) if children else None
            if step_pid is not None:
                below = subprocess.run(["pgrep", "-P", str(step_pid)], capture_output=True, text=True).stdout.split()
                compare_pid = int(below[0]) if below else None
            if compare_pid is not None:
                workers = [int(pid) for pid in subprocess.run(
                    ["pgrep", "-P", str(compare_pid), "-f", "kbench_ci.measure.worker"],
                    capture_output=True, text=True,
                ).stdout.split()]
            assert runner.poll() is None, runner.communicate()
            time.sleep(0.3)
        assert step_pid is not None and compare_pid is not None and workers, "the worker never started"
        time.sleep(3.0)  # the worker reaches the hanging kernel
        assert len(repo.worktrees()) == 2
        runner.kill()  # SIGKILL: the runner runs nothing more
        runner.wait(timeout=10)
        assert _gone_within([step_pid, compare_pid, *workers], 10) == [], (
            "the step, compare or its worker outlived the runner"
        )
        assert repo.worktrees() == [str(repo.root)]
        assert [p.name for p in scratch.iterdir() if p.name.startswith("kbench-")] == []
        assert (out / "results.json").is_file()  # what was written before the stop is kept
    finally:
        runner.kill()
        for pid in [p for p in (step_pid, compare_pid, *workers) if p is not None]:
            if _running(pid):  # only when the assertion failed: do not leave them spinning
                os.kill(pid, signal.SIGKILL)
