#!/usr/bin/env bash
# One `device` call of GPU acceptance work, in the order given, inside one deadline:
#   bash scripts/device_run.sh DEADLINE_S PART[:SECONDS] ...
# e.g. bash scripts/device_run.sh 580 truth:240 redteam:200 bench
# Each part's log goes to $OUT/<part>.log; the GPU's clocks, power and temperature every 500 ms
# to $OUT/clocks.csv (a power-limited matmul's figures are read against them); the result
# folders a part leaves under /tmp/kb_out go back as $OUT/results.tar.gz. A part stops at its own
# limit or at the deadline, whichever comes first, and the next one starts.
# The H200 reaches no registry: GitPython and nvidia-ml-py come as wheels in .carry/compare-aa
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

# A judged run of scripts/aa_and_regression.py and the judge's clock figures of its results:
#   judged PARTS RUNS FOLDER [VAR=VALUE ...]   (the knobs the run is to set, e.g. a judge setting)
judged() {
  local parts=$1 runs=$2 folder=/tmp/kb_out/$3
  shift 3
  echo "env KBENCH_CI_ISOLATION=judge $* python3 scripts/aa_and_regression.py --runs $runs --time-budget 5 --parts $parts --workdir $folder --keep; python3 scripts/probes/clock_figures.py $folder"
}

part_command() {
  case "$1" in
    truth) echo "python3 scripts/cupti_truth.py --bracket --out /tmp/kb_out/truth" ;;
    truth-placed) echo "python3 scripts/cupti_truth.py --placements 2 --out /tmp/kb_out/truth" ;;
    truth-vadd) echo "python3 scripts/cupti_truth.py --placements 2 --only vadd --out /tmp/kb_out/truth_vadd" ;;
    truth-cublas) echo "python3 scripts/cupti_truth.py --bracket --only cuBLAS --out /tmp/kb_out/truth_cublas" ;;
    redteam) echo "python3 -m pytest tests/gpu/test_redteam_gpu.py tests/gpu/test_why_gpu.py -q -rA -p no:cacheprovider" ;;
    redteam-only) echo "python3 -m pytest tests/gpu/test_redteam_gpu.py -q -rA -p no:cacheprovider" ;;
    truthtest-vadd) echo "python3 -m pytest 'tests/gpu/test_timing_truth_gpu.py::test_the_timed_median_reads_what_cupti_reads[vadd.cu 2^24]' 'tests/gpu/test_timing_truth_gpu.py::test_the_timed_median_reads_what_cupti_reads[vadd.cu 2^26]' -q -rA -s -p no:cacheprovider" ;;
    truthtest) echo "python3 -m pytest tests/gpu/test_timing_truth_gpu.py -q -rA -s -p no:cacheprovider" ;;
    why) echo "python3 -m pytest tests/gpu/test_why_gpu.py -q -rA -p no:cacheprovider" ;;
    bench) echo "python3 -m pytest tests/gpu/test_gpu_bench.py -q -rA -p no:cacheprovider" ;;
    aa) echo "python3 scripts/aa_and_regression.py --runs 5 --time-budget 5 --parts aa" ;;
    judge-redteam) echo "env KBENCH_JUDGE_GPU_CONTROL=1 python3 -m pytest tests/gpu/test_judge_gpu.py -q -rA -s -p no:cacheprovider" ;;
    judge-aa) judged aa 5 judge_aa ;;
    judge-aa-settle) judged aa 5 judge_aa_settle KBENCH_CI_JUDGE_SETTLE_US=5 ;;
    judge-aa-bare) judged aa 5 judge_aa_bare KBENCH_CI_JUDGE_TOUCH_STRIDE=0 KBENCH_CI_JUDGE_SETTLE_US=0 ;;
    judge-truth) echo "python3 scripts/judge_truth.py --old-code .carry/old37 --repeats 2 --ncu --out /tmp/kb_out/judge_truth" ;;
    judge-aa2) judged aa 2 judge_aa2 ;;
    judge-clock-redteam) echo "env KBENCH_JUDGE_GPU_CONTROL=1 python3 -m pytest tests/gpu/test_judge_clock_gpu.py -q -rA -s -p no:cacheprovider" ;;
    judge-clock-redteam-pool) echo "env KBENCH_JUDGE_GPU_CONTROL=1 KBENCH_CI_JUDGE_FRESH_MS=0 python3 -m pytest tests/gpu/test_judge_clock_gpu.py -q -rA -s -p no:cacheprovider" ;;
    judge-prof) echo "env KBENCH_CI_ISOLATION=judge KBENCH_PROFILE_DIR=$out/jprof PYTHONPATH=$PWD/scripts/probes/profile_site:\$PYTHONPATH python3 scripts/aa_and_regression.py --runs 1 --time-budget 5 --parts aa --workdir /tmp/kb_out/judge_prof --keep; python3 scripts/probes/profile_report.py $out/jprof --top 45 > $out/jprof_report.txt" ;;
    judge-regression5) judged regression 5 judge_reg ;;
    judge-regression) echo "env KBENCH_CI_ISOLATION=judge python3 scripts/aa_and_regression.py --runs 10 --time-budget 5 --parts regression" ;;
    process-aa2) echo "python3 scripts/aa_and_regression.py --runs 2 --time-budget 5 --parts aa --workdir /tmp/kb_out/process_aa --keep" ;;
    aa10) echo "python3 scripts/aa_and_regression.py --runs 10 --time-budget 5 --parts aa --workdir /tmp/kb_out/aa10 --keep" ;;
    regression) echo "python3 scripts/aa_and_regression.py --runs 10 --time-budget 5 --parts regression" ;;
    interleaved) echo "python3 scripts/interleaved_probe.py --extra 0.02" ;;
    cost) echo "python3 scripts/gate_wall_time.py --old-code .carry/old --time-budget 5" ;;
    staging) echo "python3 scripts/gate_wall_time.py --modes warm,cached,nostaging --time-budget 0" ;;
    changed) echo "python3 scripts/changed_only_wall.py --out /tmp/kb_out/changed" ;;
    changed-old) echo "python3 scripts/changed_only_wall.py --code $PWD/.carry/old37 --out /tmp/kb_out/changed_old" ;;
    judge-changed) echo "env KBENCH_CI_ISOLATION=judge python3 scripts/changed_only_wall.py --out /tmp/kb_out/judge_changed" ;;
    changed-prof) echo "KBENCH_PROFILE_DIR=$out/prof PYTHONPATH=$PWD/scripts/probes/profile_site:\$PYTHONPATH python3 scripts/changed_only_wall.py --out /tmp/kb_out/changed_prof; python3 scripts/probes/profile_report.py $out/prof --top 45 > $out/prof_report.txt" ;;
    changed-bytecode) echo "env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/kb_pycache python3 scripts/changed_only_wall.py --out /tmp/kb_out/changed_bytecode" ;;
    startup) echo "python3 scripts/probes/startup_probe.py" ;;
    sol) echo "python3 scripts/speed_of_light_truth.py --out /tmp/kb_out/sol" ;;
    probe) echo "python3 scripts/probes/calibration_probe.py" ;;
    meta) echo "python3 scripts/probes/kineto_metadata_probe.py" ;;
    install) echo "bash scripts/action_install_time.sh" ;;
    judge-quiet) echo "python3 -m pytest tests/gpu/test_judge_quiet_gpu.py -q -rA -s -p no:cacheprovider" ;;
    overheadspread) echo "python3 scripts/probes/side_overhead_spread.py --processes 8; python3 scripts/probes/side_overhead_spread.py --processes 4 --flush" ;;
    processbias2) echo "python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 40 --repeats 5 --rotate --touch; python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 40 --repeats 5 --rotate" ;;
    processbias3) echo "python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 60 --repeats 4 --rotate --variants plain,touch,settle,both; python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 40 --repeats 3 --rotate --variants plain,both --pin-numa" ;;
    processbias-so) echo "python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 60 --repeats 3 --rotate --kernel so --variants plain,copy,warm,settle; python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 60 --repeats 3 --rotate --variants plain,copy,warm" ;;
    processbias-cal) echo "python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 30 --repeats 5 --rotate --variants copy,empty" ;;
    judge-truth1) echo "python3 scripts/judge_truth.py --old-code .carry/old37 --repeats 1 --ncu --out /tmp/kb_out/judge_truth" ;;
    mps-clock) echo "bash scripts/probes/with_mps.sh python3 scripts/probes/outside_clock_probe.py --calls 100 --kinds spin8,vadd20,vadd24,mm4096 --cheats honest,halve" ;;
    mps-bias) echo "bash scripts/probes/with_mps.sh python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 60 --repeats 3 --rotate --kernel so --variants plain,copy,warm" ;;
    judge-aa-mps) echo "bash scripts/probes/with_mps.sh env KBENCH_CI_ISOLATION=judge python3 scripts/aa_and_regression.py --runs 3 --time-budget 5 --parts aa --workdir /tmp/kb_out/judge_aa_mps --keep; python3 scripts/probes/clock_figures.py /tmp/kb_out/judge_aa_mps" ;;
    harden) echo "python3 scripts/probes/harden_probe.py none all" ;;
    processbias-streams) echo "python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 48 --repeats 3 --rotate --streams 4; python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 48 --repeats 3 --rotate --streams 4 --variants touch" ;;
    processbias-sizes) echo "python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 60 --repeats 3 --rotate --sizes 18,20,22; python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 60 --repeats 3 --rotate --sizes 18,20,22 --variants touch" ;;
    processbias) echo "python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 40 --repeats 6 --rotate; python3 scripts/probes/process_bias_probe.py --workers 2 --arenas 4 --rounds 40 --repeats 6 --rotate --own-buffers" ;;
    clockprobe) echo "python3 scripts/probes/outside_clock_probe.py --calls 200" ;;
    clockprobe2) echo "for go in event value; do for hold in 300 1500; do python3 scripts/probes/outside_clock_probe.py --calls 100 --go \$go --hold-us \$hold --kinds spin8,vadd20,vadd24,mm4096 --cheats honest,halve; done; done" ;;
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
# Only the results, reports and logs: a part's repository, caches and built libraries made the
# archive too large to come back (eighteenth session: judge-changed's).
(cd /tmp && find kb_out \( -name repo -o -name cache -o -name '*.so' -o -name '.git' \) -prune -o -type f \
  \( -name '*.json' -o -name '*.md' -o -name '*.stderr' -o -name '*.log' -o -name '*.csv' \) -size -2M -print0 \
  | tar -czf "$out/results.tar.gz" --null -T - 2>/dev/null)
