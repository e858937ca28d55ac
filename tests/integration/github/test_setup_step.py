"""The action's setup step reuses the runner's torch when it is a CUDA build
(use-system-torch: auto, the default) and installs torch otherwise; the step's own bash from
action.yml, run with a stand-in python that records what it is asked."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.github.test_action_e2e import load_action

ROOT = Path(__file__).resolve().parents[3]

FAKE_PYTHON = """#!/bin/bash
# -c: the torch probe (a CUDA build when FAKE_CUDA=1) or the site-packages query (prints one);
# -m venv ARGS DIR: record ARGS, make DIR/bin/python (which answers the purelib query and records pip)
if [[ "$1" == "-c" ]]; then
  if [[ "$2" == *getsitepackages* ]]; then echo /runner/site-packages; exit 0; fi
  [[ "${FAKE_CUDA:-0}" == 1 ]]; exit $?
fi
if [[ "$1" == "-m" && "$2" == "venv" ]]; then
  shift 2; echo "$*" >> "$RECORD"; dir="${@: -1}"; mkdir -p "$dir/bin" "$dir/lib/site-packages"
  printf '#!/bin/bash\\nif [[ "$1" == -c ]]; then echo %s/lib/site-packages; exit 0; fi\\necho "pip $*" >> "$RECORD"\\n' "$dir" > "$dir/bin/python"
  chmod +x "$dir/bin/python"; exit 0
fi
exit 3
"""


def setup_script() -> str:
    (step,) = [step for step in load_action()["runs"]["steps"] if step.get("id") == "setup"]
    return step["run"]


def run_setup(tmp_path: Path, choice: str, cuda: bool) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    record = tmp_path / "record.txt"
    env = {**os.environ, "KBENCH_PYTHON": str(python), "KBENCH_ACTION_PATH": str(ROOT), "KBENCH_SYSTEM_TORCH": choice,
           "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(tmp_path / "output"), "RECORD": str(record),
           "FAKE_CUDA": "1" if cuda else "0"}
    done = subprocess.run(["bash", "-c", setup_script()], env=env, capture_output=True, text=True, timeout=60)
    return done, record.read_text().splitlines() if record.exists() else []


@pytest.mark.parametrize(("choice", "cuda", "system"), [
    ("auto", True, True), ("auto", False, False), ("true", False, True), ("false", True, False),
])
def test_the_venv_sees_the_runners_torch_only_when_it_is_a_cuda_build_or_asked(
    tmp_path: Path, choice: str, cuda: bool, system: bool
) -> None:
    done, record = run_setup(tmp_path, choice, cuda)
    assert done.returncode == 0, done.stdout + done.stderr
    # The runner's site-packages reach the venv through a .pth file (also when the runner's python
    # is itself a venv, where --system-site-packages would reach only the base interpreter's).
    assert "--system-site-packages" not in record[0]
    pth = tmp_path / "kbench-ci-venv" / "lib" / "site-packages" / "kbench-ci-runner-site.pth"
    assert pth.exists() is system
    if system:
        assert pth.read_text().split() == ["/runner/site-packages"]
    assert record[1] == f"pip -m pip install --disable-pip-version-check {ROOT}"
    if choice == "auto":
        assert ("reuses the runner's CUDA build of torch" if cuda else "installs torch into its venv") in done.stdout


def test_another_value_is_refused(tmp_path: Path) -> None:
    done, _ = run_setup(tmp_path, "maybe", True)
    assert done.returncode == 2 and "use-system-torch must be 'auto', 'true' or 'false'" in done.stdout
