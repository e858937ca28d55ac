#!/usr/bin/env bash
# The test command: every CPU test (GPU tests skip themselves without CUDA), then the offline
# linters for the action and workflows.
#   bash scripts/test.sh [pytest args]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/python -m pytest -q "$@"
status=$?
if [[ $status -eq 5 ]]; then
  echo "scripts/test.sh: pytest collected no tests — the test tree is missing or broken" >&2
  exit 1
fi
[[ $status -eq 0 ]] || exit $status
VIRTUAL_ENV="$PWD/.venv" bash .ci/lint
