"""``compare --changed-only``: which kernels a pull request's change can reach, from the files
each kernel depends on (suite/affected.py), so a pull request pays for what it changes.

Both sides run on this one runner with one kbench-ci, so a change of toolchain shows up only as
a change of the repository's own toolchain files (requirements, pyproject, lock files,
Dockerfiles, workflows): any of those changed measures everything.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from kbench_ci import __version__
from kbench_ci.cuda.build import header_dependencies
from kbench_ci.git import GitRepo
from kbench_ci.results.outcome import ChangedSelection
from kbench_ci.suite.affected import AffectedPlan, Side, affected_kernels
from kbench_ci.suite.model import Suite

#: files that say what builds and runs the kernels: a change to one can move every kernel
TOOLCHAIN_FILES = (
    "requirements*.txt", "*/requirements*.txt", "pyproject.toml", "setup.py", "setup.cfg", "*.lock", "uv.lock",
    "environment*.yml", "environment*.yaml", "Dockerfile*", "*/Dockerfile*", ".github/workflows/*",
)


def toolchain_changes(changed: frozenset[str]) -> tuple[str, ...]:
    """The changed paths that are toolchain files."""
    return tuple(sorted(path for path in changed if any(fnmatch.fnmatch(path, pattern) for pattern in TOOLCHAIN_FILES)))


def changed_selection(
    repo: GitRepo, base_sha: str, head_sha: str | None, base: tuple[Path, Suite | None], head: tuple[Path, Suite | None]
) -> AffectedPlan:
    """The plan for a comparison of ``base_sha`` with ``head_sha`` (None: the working tree),
    each side's tree and suite as the comparison read them."""
    changed = repo.changed_paths(base_sha, head_sha)
    toolchain = toolchain_changes(changed)
    said = ", ".join(toolchain)
    return affected_kernels(
        Side(base[0], base[1], f"the base's {said}" if toolchain else "unchanged", __version__),
        Side(head[0], head[1], f"the head's {said}" if toolchain else "unchanged", __version__),
        changed, scan_headers=header_dependencies,
    )


def selection_record(plan: AffectedPlan) -> ChangedSelection:
    """What the report says of the plan."""
    return ChangedSelection(
        not_affected=plan.not_affected,
        reasons={change.name: change.reasons for change in plan.affected},
        everything_reason=plan.everything_reason, notes=plan.notes,
    )
