#!/usr/bin/env bash
# Download the wheels the lent H200 lacks (it reaches no registry) into git-ignored folders,
# for `device` runs of scripts/acceptance/gpu_acceptance.sh and scripts/acceptance/aa_and_regression.py:
#   .whl/   flashinfer-python 0.5.3 + apache-tvm-ffi + nvidia-cutlass (headers)  ~17 MB
#   .whl2/  nvidia-cutlass-dsl 4.3.5 (one 58 MB wheel: carry it in a call of its own)
#   .carry/compare-aa/  GitPython and its deps and nvidia-ml-py (core dependencies the H200 lacks)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
platforms=(--python-version 3.12 --implementation cp --only-binary=:all: --no-deps
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform any)
python3 -m pip download -q "${platforms[@]}" -d .whl flashinfer-python==0.5.3 'apache-tvm-ffi<0.2' nvidia-cutlass
python3 -m pip download -q "${platforms[@]}" -d .whl2 nvidia-cutlass-dsl==4.3.5
python3 -m pip download -q "${platforms[@]}" -d .carry/compare-aa gitpython gitdb smmap nvidia-ml-py
ls -la .whl .whl2 .carry/compare-aa
