"""Code from the repository under test gets none of the runner's step files or tokens: a
kernel that appends to $GITHUB_ENV would otherwise reach the later steps of the job,
the comment step and its write token among them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

NOSY_KERNEL = '''\
import json, os
from pathlib import Path

import torch

WATCHED = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_TOKEN",
           "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "KEEP_ME")


def setup(N, **_):
    (Path(__file__).parent / "seen.json").write_text(json.dumps(sorted(k for k in WATCHED if k in os.environ)))
    for name in ("GITHUB_ENV", "GITHUB_PATH"):
        if name in os.environ:
            with open(os.environ[name], "a") as handle:
                handle.write("PYTHONPATH=/tmp/evil\\n")
    x = torch.randn(N)
    return {"inputs": {"x": x, "y": torch.empty(N)}, "outputs": ["y"]}


def run_kernel(x, y, **_):
    torch.mul(x, 2.0, out=y)
'''
REF = "def reference(x, **_):\n    return x * 2.0\n"


def test_a_kernel_sees_no_runner_files_or_tokens(tmp_path: Path) -> None:
    (tmp_path / "nosy.py").write_text(NOSY_KERNEL)
    (tmp_path / "ref.py").write_text(REF)
    step_env, step_path = tmp_path / "github_env", tmp_path / "github_path"
    step_env.touch()
    step_path.touch()
    environment = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    environment.update({
        "GITHUB_ENV": str(step_env), "GITHUB_PATH": str(step_path), "GITHUB_OUTPUT": str(tmp_path / "out"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "GITHUB_TOKEN": "ghs_secret",
        "ACTIONS_RUNTIME_TOKEN": "rt", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc", "KEEP_ME": "1",
    })
    done = subprocess.run(
        [sys.executable, "-m", "kbench_ci", "bench", str(tmp_path / "nosy.py"), "--implementation=pytorch",
         f"--ref={tmp_path / 'ref.py'}", f"--output-dir={tmp_path / 'bench_out'}", "--device=cpu", "--N=64",
         "--num-warmup=0", "--num-trials=2"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "seen.json").read_text()) == ["KEEP_ME"]
    assert step_env.read_text() == "" and step_path.read_text() == ""

