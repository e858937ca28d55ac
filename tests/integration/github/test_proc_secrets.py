"""A pull request's kernel that walks /proc/PID/environ up its parent
processes during the action's compare step must find none of the step's files or tokens.

The step runs here as root without the capabilities that let a process read the /proc entries
of a non-dumpable process of its own user (CAP_SYS_PTRACE, and on this kernel CAP_SYS_ADMIN and
CAP_PERFMON too: each alone allows it), dropped from its bounding set before it starts, so no
process below it can have them: as a runner's non-root user has none of them.
A runner user that holds it (root) can read any process's memory, and nothing in kbench-ci can
fence that (docs/action.md).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.suite_repo import make_suite_repo, suite_files

ROOT = Path(__file__).resolve().parents[3]
SECRET = "sekrit-0f1e2d3c"
_PR_CAPBSET_DROP = 24
#: CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON: found one by one to open a non-dumpable
#: process's /proc/PID/environ (Linux 6.18)
_READ_ANY_PROC = (19, 21, 38)


def _without_ptrace_capability() -> None:
    """In the child before exec: the capabilities out of the bounding set, for it and all below."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in _READ_ANY_PROC:
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {capability}) failed")

PROBE = '''\
import json
import os

import torch

REPORT = {report!r}


def _walk():
    found = []
    pid = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{{pid}}/stat") as handle:
                stat = handle.read()
            with open(f"/proc/{{pid}}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\\0", b" ").decode(errors="replace")[:200]
        except OSError:
            break
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as handle:
                environ = handle.read().decode(errors="replace")
            found.append({{"pid": pid, "command": command, "readable": True, "secret": {secret!r} in environ,
                          "names": sorted(e.split("=", 1)[0] for e in environ.split("\\0") if e)}})
        except OSError as exc:
            found.append({{"pid": pid, "command": command, "readable": False, "error": type(exc).__name__}})
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    with open(REPORT, "a") as handle:
        handle.write(json.dumps(found) + "\\n")


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    return {{"inputs": {{"x": x, "out": torch.empty(N, dtype=torch.float32)}}, "outputs": ["out"]}}


def run_kernel(x, out, **_):
    if not os.path.exists(REPORT):
        _walk()
    torch.mul(x, 2.0, out=out)
'''


def test_a_kernel_walking_proc_up_its_parents_finds_no_secret(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test drops CAP_SYS_PTRACE and needs to start as root (as CI does)")
    world = tmp_path
    report = world / "probe.json"
    kernel = {"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}]}
    repo = make_suite_repo(world / "repo", [kernel])
    base = repo.git("rev-parse", "HEAD")
    head = repo.commit({**suite_files([kernel]), "kernels/scale.py": PROBE.format(report=str(report), secret=SECRET)},
                       "a kernel that reads its parents' environments")
    runner_files = world / "_runner_file_commands"
    runner_files.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(world), "PYTHONPATH": str(ROOT),
        "GITHUB_ACTIONS": "true", "GITHUB_ENV": str(runner_files / f"set_env_{SECRET}"),
        "GITHUB_OUTPUT": str(runner_files / f"set_output_{SECRET}"), "ACTIONS_RUNTIME_TOKEN": SECRET,
        "GITHUB_TOKEN": SECRET, "KBENCH_VENV_PYTHON": sys.executable,
        "KBENCH_BASE": base, "KBENCH_HEAD": head, "KBENCH_REPORT_DIR": str(world / "report"), "KBENCH_CACHE": "false",
        "KBENCH_EXTRA_ARGS": "--device cpu",
    }
    # As action.yml runs it: the step's shell execs the step.
    done = subprocess.run(["bash", "-c", 'exec "$KBENCH_VENV_PYTHON" -m kbench_ci.github.action compare'],
                          cwd=repo.root, env=env, preexec_fn=_without_ptrace_capability,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert report.is_file(), f"the probe kernel did not run:\n{done.stdout}\n{done.stderr}"
    (walk,) = [json.loads(line) for line in report.read_text().splitlines()][:1]
    print(json.dumps(walk, indent=1))
    assert not [entry for entry in walk if entry.get("secret")], "a process above the kernel showed the secret"
    step = [entry for entry in walk if "kbench_ci.github.action compare" in entry["command"]]
    assert step and step[0]["readable"] is False  # non-dumpable: its environment is out of reach
    compare = [entry for entry in walk if " compare --base " in entry["command"]]
    assert compare and compare[0]["readable"] is True  # readable, and holds nothing of the runner's
    assert not {"GITHUB_ENV", "GITHUB_OUTPUT", "ACTIONS_RUNTIME_TOKEN", "GITHUB_TOKEN"} & set(compare[0]["names"])
    # Only the processes this test started: above it, CI's own shells may be anything.
    pids = [entry["pid"] for entry in walk]
    assert os.getpid() in pids, "the walk did not pass through this test's process"
    below_test = walk[: pids.index(os.getpid())]
    assert not [entry for entry in below_test if entry["command"].startswith("bash -c")]  # the step's shell exec'd it
