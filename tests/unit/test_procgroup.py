"""The environment of processes that run code from the repository under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from kbench_ci.procgroup import user_code_environment


def test_the_environment_for_user_code_drops_step_files_and_every_actions_variable() -> None:
    given = {
        "PATH": "/usr/bin", "HOME": "/home/runner", "CUDA_VISIBLE_DEVICES": "0", "GITHUB_SHA": "abc",
        "GITHUB_ENV": "/e", "GITHUB_PATH": "/p", "GITHUB_OUTPUT": "/o", "GITHUB_STATE": "/s",
        "GITHUB_STEP_SUMMARY": "/m", "GITHUB_TOKEN": "t", "GH_TOKEN": "t", "ACTIONS_RUNTIME_TOKEN": "r",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "u", "ACTIONS_CACHE_URL": "c", "actions_runtime_url": "x",
    }
    assert user_code_environment(given) == {
        "PATH": "/usr/bin", "HOME": "/home/runner", "CUDA_VISIBLE_DEVICES": "0", "GITHUB_SHA": "abc",
    }


def test_descendants_and_strays_from_one_read_of_proc() -> None:
    """A shell whose child sleeps: both are found under the shell, from one read of /proc;
    end_strays ends the shell and its child and keeps what it is told to keep. (In a process of
    its own: end_strays ends every other child of the process that calls it.)"""
    script = textwrap.dedent("""
        import json, os, subprocess, time
        from kbench_ci.procgroup import children_of, descendants, end_strays, parents

        def zombie_or_gone(pid):
            try:
                with open(f"/proc/{pid}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                return True
            return stat[stat.rfind(b")") + 2:].split()[0] == b"Z"

        kept = subprocess.Popen(["sleep", "30"])
        tree = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
        deadline = time.monotonic() + 10
        while not descendants(tree.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        snapshot = parents()
        under = descendants(tree.pid, snapshot)
        children = children_of(os.getpid(), snapshot)
        ended = end_strays(keep={kept.pid})
        print(json.dumps({"under": under, "under_parent": [snapshot[p] for p in under], "tree": tree.pid, "kept": kept.pid,
                          "children": children, "ended": ended, "kept_alive": kept.poll() is None,
                          "under_gone": all(zombie_or_gone(p) for p in under)}))
        kept.kill()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(done.stdout)
    assert len(found["under"]) == 1 and found["under_parent"] == [found["tree"]]
    assert {found["kept"], found["tree"]} <= set(found["children"])
    assert found["tree"] in found["ended"] and found["kept"] not in found["ended"]
    assert found["kept_alive"] and found["under_gone"]


def test_killing_a_group_does_not_wait_for_a_pipe_held_outside_it() -> None:
    """The group's leader dies at once, but a process it started in a session of its own keeps
    the leader's stdout open: an unbounded wait for EOF kept a stopping parent alive."""
    import signal as signals
    import subprocess
    import sys
    import time

    from kbench_ci.procgroup import REAP_TIMEOUT_S, kill_process_group

    holder = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); "
        "print(p.pid, flush=True); time.sleep(60)"
    )
    leader = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, start_new_session=True)
    assert leader.stdout is not None
    outside = int(leader.stdout.readline())
    try:
        began = time.monotonic()
        kill_process_group(leader)
        waited = time.monotonic() - began
        assert leader.poll() is not None  # the leader itself is gone and reaped
        assert waited < REAP_TIMEOUT_S + 3.0, waited
    finally:
        os.kill(outside, signals.SIGKILL)
