#!/usr/bin/env bash
# The figures of docs/bench.md (bench on each implementation kind, cross-checked against CUPTI
# by timing_truth.py) and the engine's GPU tests. On a GPU machine, repo root:
#   bash scripts/acceptance/gpu_acceptance.sh engine|kinds|cutlass|rmsnorm|cute [OUTDIR]
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
kb() { python3 -m kbench_ci "$@"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
# bench_example NAME TIMING_TRUTH_FILTER BENCH_ARGS...: `kbench-ci bench` into /tmp/NAME, keep its
# benchmark.md, then cross-check the same kernel against CUPTI with timing_truth.py.
bench_example() {
  local name=$1 only=$2
  shift 2
  kb bench "$@" --output-dir="/tmp/$name" >/dev/null
  cp "/tmp/$name/benchmark.md" "$out/$name.md"
  python3 scripts/acceptance/timing_truth.py --suite kinds --only "$only" --out /tmp/tt 2>&1 | grep -v Warning | tee "$out/timing_$name.log"
}
cutlass() {
  kb build --cutlass examples/gemm_cutlass/gemm.cu 2>&1 | tee "$out/build.log"
  bench_example gemm_cutlass CUTLASS examples/gemm_cutlass/gemm.cu --implementation=cutlass \
    --baselines=pytorch-eager,torch-compile --ref=examples/gemm_cutlass/ref.py --M=4096 --N=4096 --K=4096
}
rmsnorm() {
  bench_example rmsnorm_triton Triton examples/rmsnorm_triton/rmsnorm.py --implementation=triton \
    --baselines=pytorch-eager,torch-compile,flashinfer --ref=examples/rmsnorm_triton/ref.py --M=8192 --N=4096
}
cute() {
  bench_example cute_dsl CuTe examples/cute_dsl/add.py --implementation=cute-dsl \
    --baselines=pytorch-eager,torch-compile --ref=examples/cute_dsl/ref.py --M=8192 --N=8192
}
case "$part" in
  engine)
    kb build examples/softmax_cuda/softmax.cu 2>&1 | tail -1
    python3 scripts/acceptance/timing_truth.py --suite engine --out /tmp/tt 2>&1 | grep -v Warning | tee "$out/timing_engine.log"
    python3 -m pytest tests/gpu -q -rA -p no:cacheprovider -k "stale or softmax" 2>&1 | tail -8 | tee "$out/gpu_tests.log"
    ;;
  kinds) cutlass; rmsnorm ;;
  cutlass) cutlass ;;
  rmsnorm) rmsnorm ;;
  cute) cute ;;
  *) echo "usage: bash scripts/acceptance/gpu_acceptance.sh engine|kinds|cutlass|rmsnorm|cute [OUTDIR]" >&2; exit 2 ;;
esac
