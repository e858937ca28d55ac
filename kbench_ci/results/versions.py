"""The schema ids and versions of kbench-ci's JSON files (documented in docs/results-schema.md).

A module of constants on the standard library alone: :mod:`kbench_ci.results.load` reads
results.json in the fork recipe's comment workflow, which installs nothing (``python -S``), so it
cannot reach :mod:`kbench_ci.results.schema` (the model types, and numpy through ``stats``).
"""

from __future__ import annotations

BENCH_SCHEMA = "kbench-ci/bench"
BENCH_SCHEMA_VERSION = 1
RUN_SCHEMA = "kbench-ci/run"
RUN_SCHEMA_VERSION = 1
COMPARE_SCHEMA = "kbench-ci/compare"
COMPARE_SCHEMA_VERSION = 1

#: the newest version of each schema this kbench-ci reads (and writes)
SCHEMA_VERSIONS: dict[str, int] = {
    BENCH_SCHEMA: BENCH_SCHEMA_VERSION,
    RUN_SCHEMA: RUN_SCHEMA_VERSION,
    COMPARE_SCHEMA: COMPARE_SCHEMA_VERSION,
}

#: the small JSON of ``--json-summary`` (compare, run, merge): its first key, so that the file,
#: written inside a repository, is known as kbench-ci's own and never makes the tree dirty
SUMMARY_SCHEMA = "kbench-ci/summary"
