"""GitHub: the REST client and the sticky pull request comment (the action's steps: kbench_ci.github.action)."""

# kbench_ci.github.action is deliberately not imported here: action.yml runs it with
# `python -m kbench_ci.github.action`, and a package that imports the module it is about to run
# as __main__ makes runpy warn and gives the process two copies of that module.

from kbench_ci.github.client import GitHubClient, Repository
from kbench_ci.github.comment import (
    COMMENT_LIMIT,
    Gate,
    build_body,
    decide,
    fit_body,
    has_marker,
    load_gate,
    marker,
    parse_mode,
    run_comment,
)

__all__ = [
    "COMMENT_LIMIT",
    "Gate",
    "GitHubClient",
    "Repository",
    "build_body",
    "decide",
    "fit_body",
    "has_marker",
    "load_gate",
    "marker",
    "parse_mode",
    "run_comment",
]
