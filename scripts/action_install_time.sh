#!/usr/bin/env bash
# How long the action's install step takes on a GPU runner that has a CUDA torch.
#   bash scripts/action_install_time.sh            # repository root, on the GPU machine
# It runs the `run:` block of action.yml's "Install kbench-ci into a virtual environment" step,
# exactly as written there, with the action's default inputs (python3, use-system-torch: auto),
# into a fresh RUNNER_TEMP, and prints the wall time and what the venv's python imports.
# The lent H200 reaches no package index: pip gets the wheels the system lacks (GitPython,
# nvidia-ml-py, setuptools for the build) from .carry/compare-aa (scripts/fetch_device_wheels.sh);
# a runner with an index resolves the same set there.
set -euo pipefail
root=$(pwd)
block=$(mktemp)
# The step's run block: the lines after its `run: |` up to the next step, unindented.
python3 - "$root/action.yml" >"$block" <<'EOF'
import re, sys, textwrap
text = open(sys.argv[1], encoding="utf-8").read()
step = text.split("- name: Install kbench-ci into a virtual environment", 1)[1].split("\n    - name:", 1)[0]
body = step.split("run: |\n", 1)[1]
print(textwrap.dedent(body))
EOF
runner_temp=$(mktemp -d)
github_output=$runner_temp/github_output
: >"$github_output"
echo "the step's script ($(wc -l <"$block") lines) from action.yml; RUNNER_TEMP=$runner_temp"
started=$(date +%s.%N)
env -u PYTHONPATH RUNNER_TEMP="$runner_temp" GITHUB_OUTPUT="$github_output" \
  KBENCH_PYTHON=python3 KBENCH_ACTION_PATH="$root" KBENCH_SYSTEM_TORCH=auto \
  PIP_FIND_LINKS="$root/.carry/compare-aa ${PIP_FIND_LINKS:-}" PIP_NO_INDEX="${PIP_NO_INDEX:-1}" \
  bash "$block"
ended=$(date +%s.%N)
python_path=$(sed -n 's/^python=//p' "$github_output")
echo "install step: $(python3 -c "print(f'{$ended - $started:.1f}')") s wall; step output python=$python_path"
env -u PYTHONPATH "$python_path" - <<'EOF'
import importlib.metadata as metadata
import kbench_ci
import torch
print(f"venv imports torch {torch.__version__} (CUDA {torch.version.cuda}) from {torch.__file__}")
print(f"kbench-ci {metadata.version('kbench-ci')} from {kbench_ci.__file__}")
EOF
du -sh "$runner_temp/kbench-ci-venv" | sed 's/^/venv size: /'
rm -rf "$runner_temp" "$block"
