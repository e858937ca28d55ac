"""The worker's entry module and its lifeline."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kbench_ci.wire.lifeline import exit_call


def test_nothing_imports_the_worker_entry_module() -> None:
    """`python -m kbench_ci.measure.worker` warns on stderr when the module was imported before it
    runs; stderr is what the parent quotes when a worker fails."""
    code = "import sys, kbench_ci.measure, kbench_ci.gate.bench, kbench_ci.cli.app; " \
           "print('kbench_ci.measure.worker' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_exit_calls_read_as_written() -> None:
    assert exit_call(None) == "sys.exit()"
    assert exit_call(3) == "sys.exit(3)"
    assert exit_call("done") == "sys.exit('done')"


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan may wait long to be reaped in a container)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_closed_lifeline_ends_the_whole_process_group() -> None:
    read_end, write_end = os.pipe()
    program = (
        "import subprocess, sys, time\n"
        "from kbench_ci.wire.lifeline import watch_lifeline\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(grandchild.pid, flush=True)\n"
        f"watch_lifeline({read_end})\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", program], pass_fds=(read_end,), start_new_session=True,
                             stdout=subprocess.PIPE, text=True)
    os.close(read_end)
    grandchild = None
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        time.sleep(0.3)
        assert child.poll() is None and _running(grandchild)
        os.close(write_end)  # what the kernel does when the parent dies, however it dies
        write_end = -1
        child.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _running(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(grandchild), "the kernel's own child outlived the worker"
    finally:
        if write_end >= 0:
            os.close(write_end)
        child.kill()
        if grandchild is not None and _running(grandchild):
            os.kill(grandchild, 9)


def test_the_lifeline_hands_on_each_whole_line_it_carries() -> None:
    """Jobs come down the lifeline pipe: whole lines only, however the writes split them."""
    read_end, write_end = os.pipe()
    program = (
        "import sys, time\n"
        "from kbench_ci.wire.lifeline import watch_lifeline\n"
        f"watch_lifeline({read_end}, lambda line: print(line.decode(), flush=True))\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", program], pass_fds=(read_end,), start_new_session=True,
                             stdout=subprocess.PIPE, text=True)
    os.close(read_end)
    try:
        os.write(write_end, b'{"job": 1}\n{"jo')
        time.sleep(0.2)
        os.write(write_end, b'b": 2}\n')
        assert child.stdout is not None
        assert child.stdout.readline().strip() == '{"job": 1}'
        assert child.stdout.readline().strip() == '{"job": 2}'
        os.close(write_end)
        write_end = -1
        child.wait(timeout=10)  # and end-of-file still ends it
    finally:
        if write_end >= 0:
            os.close(write_end)
        child.kill()
