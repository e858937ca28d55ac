#!/usr/bin/env bash
# Set-up on a fresh machine: a venv in .venv with kbench-ci (editable) and its test tools, then
# the main job on an example: `kbench-ci bench` on the Triton LayerNorm (CPU mode without a GPU).
#   bash scripts/bootstrap.sh
# On a GPU machine, install the CUDA torch build you want into .venv first (or set
# KBENCH_TORCH_SPEC, e.g. KBENCH_TORCH_SPEC=torch==2.11.0); the default pins the CPU wheel
# that the project's CI uses.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
# Torch first and pinned: a bare `torch` requirement would pull a multi-GB CUDA build.
if ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q "${KBENCH_TORCH_SPEC:-torch==2.13.0}"
fi
# Triton pinned to the version the GPU machines run (CPU torch does not bring one).
if ! python -c "import triton" 2>/dev/null; then
  python -m pip install -q "triton==3.6.0"
fi
# numpy<2.4: Triton 3.6's interpreter (CPU mode) breaks on tl.dot loops with numpy 2.4.
# The cutlass and cute extras let the CPU tests compile the CUTLASS and CuTe DSL examples.
python -m pip install -q -e '.[test,lint,cutlass,cute,history]' 'numpy<2.4'
kbench-ci bench examples/layernorm_triton/layernorm.py --implementation=triton --baselines=pytorch-eager \
  --ref=examples/layernorm_triton/ref.py --output-dir=bench_out --M=256 --N=1024
