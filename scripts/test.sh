#!/usr/bin/env bash
# The test command: every CPU test (GPU tests skip themselves without CUDA), the CLI tests once
# more under the judge (--isolation judge), then the offline linters for the action and workflows.
#   bash scripts/test.sh [pytest args]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JUDGE_CLI_TESTS=(
  tests/integration/cli tests/integration/gate/test_compare_cpu.py tests/integration/gate/test_bench_cpu.py
  tests/integration/gate/test_mistakes_early_cpu.py tests/integration/gate/test_user_blame_exit_cpu.py
  tests/integration/gate/test_output_folder.py
)
.venv/bin/python -m pytest -q "$@"
status=$?
if [[ $status -eq 5 ]]; then
  echo "scripts/test.sh: pytest collected no tests — the test tree is missing or broken" >&2
  exit 1
fi
[[ $status -eq 0 ]] || exit $status
# The existing CLI tests again, unmodified, with run and compare under the judge (the
# judge runs the same architecture on the CPU, and its commands behave as the in-process ones;
# bench reads no KBENCH_CI_ISOLATION, so its tests run here as in the first pass); the whole run
# only, not where pytest arguments pick tests
if [[ $# -eq 0 ]]; then
  KBENCH_CI_ISOLATION=judge .venv/bin/python -m pytest -q -p no:cacheprovider "${JUDGE_CLI_TESTS[@]}"
  status=$?
  [[ $status -eq 0 ]] || exit $status
fi
VIRTUAL_ENV="$PWD/.venv" bash .ci/lint
