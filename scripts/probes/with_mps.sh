#!/usr/bin/env bash
# Run a command with every CUDA process it starts a client of an MPS server of its own:
#   bash scripts/probes/with_mps.sh COMMAND ...
# Why (an experiment, docs/statistics.md "The bias follows the process"): under the judge the GPU
# switches context (time slices) at every handed-over call, ~300 us a call and a cold start for
# the side's kernel (a 5 us kernel reads several percent apart in two processes). Under MPS the
# judge's and the sides' work share one server context: no switch, separate address spaces still.
# Needs no root: the control daemon runs as this user with a pipe and log folder of its own.
# Prints one line and exits 3 where MPS cannot start (no nvidia-cuda-mps-control, a GPU in
# exclusive mode held by another, a container without it).
set -uo pipefail
control=$(command -v nvidia-cuda-mps-control || true)
if [ -z "$control" ]; then
  echo "with_mps: no nvidia-cuda-mps-control on PATH: MPS cannot be tried here" >&2
  exit 3
fi
folder=$(mktemp -d /tmp/kbench-mps.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY="$folder/pipe" CUDA_MPS_LOG_DIRECTORY="$folder/log"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if ! "$control" -d; then
  echo "with_mps: nvidia-cuda-mps-control -d failed (see $CUDA_MPS_LOG_DIRECTORY)" >&2
  exit 3
fi
stop() { echo quit | "$control" >/dev/null 2>&1; sleep 1; tail -5 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null; }
trap stop EXIT
echo "with_mps: MPS control daemon up ($CUDA_MPS_PIPE_DIRECTORY); running: $*"
"$@"
