"""`bench --isolation judge` stops on SIGHUP as on SIGTERM (129 / 143, one
line, no traceback), and the judge and its side workers go with it. `bench` in process
isolation: tests/integration/gate/test_stop_signals.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.signals import heed_stop_signals

ROOT = Path(__file__).resolve().parents[3]
CHEATS = ROOT / "tests" / "fixtures" / "cheats_py"
_SHIM = "import sys; sys.argv[0] = 'kbench-ci'; from kbench_ci.cli.app import main; main()"


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        children = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split()
        found += [int(child) for child in children]
        pending += [int(child) for child in children]
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _side_workers(parent: subprocess.Popen[str]) -> list[int]:
    """The judge and its side workers, once the solution's side worker runs (the hanging call)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        tree = _descendants(parent.pid)
        sides = [pid for pid in tree if "kbench_ci.side.main" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
                 .replace("\0", " ")] if tree else []
        if sides:
            return tree
        assert parent.poll() is None, parent.communicate()
        time.sleep(0.3)
    raise AssertionError("no side worker started")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGHUP, 129), (signal.SIGTERM, 143)])
def test_bench_under_the_judge_stops_on_sighup_as_on_sigterm(sig: signal.Signals, code: int, tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _SHIM, "bench", str(CHEATS / "hangs.py"), "--implementation=pytorch",
         f"--ref={CHEATS / 'ref.py'}", f"--output-dir={tmp_path / 'out'}", "--device=cpu", "--N=64",
         "--isolation=judge"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=heed_stop_signals,
    )
    tree: list[int] = []
    try:
        tree = _side_workers(process)
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=30)
        assert process.returncode == code, stderr
        assert f"kbench-ci: terminated ({sig.name})" in stderr and "Traceback" not in stderr
        deadline = time.monotonic() + 10
        while any(_running(pid) for pid in tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [pid for pid in tree if _running(pid)] == [], "the judge or a side worker outlived bench"
    finally:
        process.kill()
        for pid in tree:
            if _running(pid):  # only when an assertion failed: do not leave them spinning
                os.kill(pid, signal.SIGKILL)
