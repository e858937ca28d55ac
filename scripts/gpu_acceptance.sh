#!/usr/bin/env bash
# The GPU acceptance run behind the figures in the issue notes. On a GPU machine, repo root:
#   bash scripts/gpu_acceptance.sh engine|kinds|cutlass|rmsnorm|cute [OUTDIR]
# Wheels for packages the machine lacks may sit in .whl/ (flashinfer-python 0.5.3,
# apache-tvm-ffi, nvidia-cutlass) or .whl2/ (nvidia-cutlass-dsl 4.3.5); they are installed
# into /tmp/site first.
set -uo pipefail
part=${1:-engine}
out=${2:-${OUT:-gpu_out}}
mkdir -p "$out"
for dir in .whl .whl2; do
  if compgen -G "$dir/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$dir"/*.whl
  fi
done
# cutlass-dsl installed with --target: its .pth is not processed, so add its packages by hand.
export PYTHONPATH="/tmp/site:/tmp/site/nvidia_cutlass_dsl/python_packages:$PWD"
export PYTHONUNBUFFERED=1
kb() { python3 -m kbench_ci.cli "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
case "$part" in
  engine)
    kb build examples/softmax_cuda/softmax.cu 2>&1 | tail -1
    python3 scripts/timing_truth.py --suite engine --out /tmp/tt 2>&1 | grep -v Warning | tee "$out/timing_engine.log"
    python3 -m pytest tests/gpu -q -rA -p no:cacheprovider -k "stale or softmax" 2>&1 | tail -8 | tee "$out/gpu_tests.log"
    ;;
  kinds)
    bash "$0" cutlass "$out"
    bash "$0" rmsnorm "$out"
    ;;
  cutlass)
    kb build --cutlass examples/gemm_cutlass/gemm.cu 2>&1 | tee "$out/build.log"
    kb bench examples/gemm_cutlass/gemm.cu --implementation=cutlass --baselines=pytorch-eager,torch-compile \
      --ref=examples/gemm_cutlass/ref.py --output-dir=/tmp/gemm --M=4096 --N=4096 --K=4096 >/dev/null
    cp /tmp/gemm/benchmark.md "$out/gemm_cutlass.md"
    python3 scripts/timing_truth.py --suite kinds --only CUTLASS --out /tmp/tt 2>&1 | grep -v Warning | tee "$out/timing_cutlass.log"
    ;;
  rmsnorm)
    kb bench examples/rmsnorm_triton/rmsnorm.py --implementation=triton --baselines=pytorch-eager,torch-compile,flashinfer \
      --ref=examples/rmsnorm_triton/ref.py --output-dir=/tmp/rms --M=8192 --N=4096 >/dev/null
    cp /tmp/rms/benchmark.md "$out/rmsnorm_triton.md"
    python3 scripts/timing_truth.py --suite kinds --only Triton --out /tmp/tt 2>&1 | grep -v Warning | tee "$out/timing_rmsnorm.log"
    ;;
  cute)
    kb bench examples/cute_dsl/add.py --implementation=cute-dsl --baselines=pytorch-eager,torch-compile \
      --ref=examples/cute_dsl/ref.py --output-dir=/tmp/cute --M=8192 --N=8192 >/dev/null
    cp /tmp/cute/benchmark.md "$out/cute_dsl.md"
    python3 scripts/timing_truth.py --suite kinds --only CuTe --out /tmp/tt 2>&1 | grep -v Warning | tee "$out/timing_cute.log"
    ;;
esac
