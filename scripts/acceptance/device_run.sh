#!/usr/bin/env bash
# GPU acceptance work in one call of a lent GPU machine, part after part, inside one deadline:
#   bash scripts/acceptance/device_run.sh DEADLINE_S PART[:SECONDS] ...
# e.g. bash scripts/acceptance/device_run.sh 580 truth:240 redteam:200 bench
# The parts are listed in part_command below (scripts/acceptance/README.md says what each checks).
# `.carry/old` (judge-truth, cost, changed-old) is a folder holding an older revision's kbench_ci/
# (`git archive REV kbench_ci | tar -x -C .carry/old`), carried with the call.
# Each part's log goes to $OUT/<part>.log; the GPU's clocks, power and temperature every 500 ms
# to $OUT/clocks.csv (a power-limited matmul's figures are read against them); the result
# folders a part leaves under /tmp/kb_out go back as $OUT/results.tar.gz. A part stops at its own
# limit or at the deadline, whichever comes first, and the next one starts.
# A lent machine reaches no registry: GitPython and nvidia-ml-py come as wheels in .carry/compare-aa
# (scripts/fetch_device_wheels.sh), carried with the call (carry=[".carry"]).
set -uo pipefail
deadline=$(( $(date +%s) + ${1:?usage: device_run.sh DEADLINE_S PART[:SECONDS] ...} ))
shift
out=${OUT:-/tmp/device_out}
mkdir -p "$out" /tmp/kb_out
if compgen -G ".carry/compare-aa/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/compare-aa/*.whl 2>&1 | tail -2
fi
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 500 >"$out/clocks.csv" 2>/dev/null &
clocks=$!
trap 'kill $clocks 2>/dev/null' EXIT

# A judged run of scripts/acceptance/aa_and_regression.py and the judge's clock figures of its results:
#   judged PARTS RUNS FOLDER [VAR=VALUE ...]   (the knobs the run is to set, e.g. a judge setting)
judged() {
  local parts=$1 runs=$2 folder=/tmp/kb_out/$3
  shift 3
  echo "env KBENCH_CI_ISOLATION=judge $* python3 scripts/acceptance/aa_and_regression.py --runs $runs --time-budget 5 --parts $parts --workdir $folder --keep; python3 scripts/acceptance/clock_figures.py $folder"
}

part_command() {
  case "$1" in
    # A/A and the 2% change (aa_and_regression.py), in process and under the judge
    aa) echo "python3 scripts/acceptance/aa_and_regression.py --runs 5 --time-budget 5 --parts aa" ;;
    aa10) echo "python3 scripts/acceptance/aa_and_regression.py --runs 10 --time-budget 5 --parts aa --workdir /tmp/kb_out/aa10 --keep" ;;
    regression) echo "python3 scripts/acceptance/aa_and_regression.py --runs 10 --time-budget 5 --parts regression" ;;
    judge-aa) judged aa 5 judge_aa ;;
    judge-aa-settle) judged aa 5 judge_aa_settle KBENCH_CI_JUDGE_SETTLE_US=5 ;;
    judge-aa-bare) judged aa 5 judge_aa_bare KBENCH_CI_JUDGE_TOUCH_STRIDE=0 KBENCH_CI_JUDGE_SETTLE_US=0 ;;
    judge-regression5) judged regression 5 judge_reg ;;
    judge-regression) echo "env KBENCH_CI_ISOLATION=judge python3 scripts/acceptance/aa_and_regression.py --runs 10 --time-budget 5 --parts regression" ;;
    # timing truth: the timed median against CUPTI, the judge against ncu, % of peak against ncu
    truth) echo "python3 scripts/acceptance/cupti_truth.py --bracket --out /tmp/kb_out/truth" ;;
    truth-placed) echo "python3 scripts/acceptance/cupti_truth.py --placements 2 --out /tmp/kb_out/truth" ;;
    truth-vadd) echo "python3 scripts/acceptance/cupti_truth.py --placements 2 --only vadd --out /tmp/kb_out/truth_vadd" ;;
    truth-cublas) echo "python3 scripts/acceptance/cupti_truth.py --bracket --only cuBLAS --out /tmp/kb_out/truth_cublas" ;;
    truthtest) echo "python3 -m pytest tests/gpu/test_timing_truth_gpu.py -q -rA -s -p no:cacheprovider" ;;
    judge-truth) echo "python3 scripts/acceptance/judge_truth.py --old-code .carry/old --repeats 2 --ncu --out /tmp/kb_out/judge_truth" ;;
    sol) echo "python3 scripts/acceptance/speed_of_light_truth.py --out /tmp/kb_out/sol" ;;
    # the red team and the other GPU tests
    redteam) echo "python3 -m pytest tests/gpu/test_redteam_gpu.py tests/gpu/test_why_gpu.py -q -rA -p no:cacheprovider" ;;
    judge-redteam) echo "env KBENCH_JUDGE_GPU_CONTROL=1 python3 -m pytest tests/gpu/test_judge_gpu.py -q -rA -s -p no:cacheprovider" ;;
    judge-clock-redteam) echo "env KBENCH_JUDGE_GPU_CONTROL=1 python3 -m pytest tests/gpu/test_judge_clock_gpu.py -q -rA -s -p no:cacheprovider" ;;
    judge-quiet) echo "python3 -m pytest tests/gpu/test_judge_quiet_gpu.py -q -rA -s -p no:cacheprovider" ;;
    why) echo "python3 -m pytest tests/gpu/test_why_gpu.py -q -rA -p no:cacheprovider" ;;
    bench) echo "python3 -m pytest tests/gpu/test_gpu_bench.py -q -rA -p no:cacheprovider" ;;
    # cost: a compare's wall time and its split, a pull request that changes one kernel, install
    cost) echo "python3 scripts/acceptance/gate_wall_time.py --old-code .carry/old --time-budget 5" ;;
    staging) echo "python3 scripts/acceptance/gate_wall_time.py --modes warm,cached,nostaging --time-budget 0" ;;
    changed) echo "python3 scripts/acceptance/changed_only_wall.py --out /tmp/kb_out/changed" ;;
    changed-old) echo "python3 scripts/acceptance/changed_only_wall.py --code $PWD/.carry/old --out /tmp/kb_out/changed_old" ;;
    judge-changed) echo "env KBENCH_CI_ISOLATION=judge python3 scripts/acceptance/changed_only_wall.py --out /tmp/kb_out/judge_changed" ;;
    install) echo "bash scripts/action_install_time.sh" ;;
    *) return 1 ;;
  esac
}

for spec in "$@"; do
  part=${spec%%:*}
  limit=${spec#*:}
  [ "$limit" = "$spec" ] && limit=600
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -lt 20 ]; then
    echo "$part: not run, the deadline is reached" | tee -a "$out/skipped.log"
    continue
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  command=$(part_command "$part") || { echo "unknown part: $part" >&2; exit 2; }
  start=$(date +%s)
  echo "== $part ($(date +%H:%M:%S), limit ${limit}s): $command" | tee "$out/$part.log"
  timeout --kill-after=5 "$limit" bash -c "$command" >>"$out/$part.log" 2>&1
  rc=$?
  echo "== $part: rc $rc after $(( $(date +%s) - start ))s" | tee -a "$out/$part.log"
done
# Only the results, reports and logs: a part's repository, caches and built libraries make the
# archive too large to come back (judge-changed's, for one).
(cd /tmp && find kb_out \( -name repo -o -name cache -o -name '*.so' -o -name '.git' \) -prune -o -type f \
  \( -name '*.json' -o -name '*.md' -o -name '*.stderr' -o -name '*.log' -o -name '*.csv' \) -size -2M -print0 \
  | tar -czf "$out/results.tar.gz" --null -T - 2>/dev/null)
