"""The environment of processes that run code from the repository under test (issue 12, item 5)."""

from __future__ import annotations

from kbench_ci.procgroup import user_code_environment


def test_the_environment_for_user_code_drops_step_files_and_every_actions_variable() -> None:
    given = {
        "PATH": "/usr/bin", "HOME": "/home/runner", "CUDA_VISIBLE_DEVICES": "0", "GITHUB_SHA": "abc",
        "GITHUB_ENV": "/e", "GITHUB_PATH": "/p", "GITHUB_OUTPUT": "/o", "GITHUB_STATE": "/s",
        "GITHUB_STEP_SUMMARY": "/m", "GITHUB_TOKEN": "t", "GH_TOKEN": "t", "ACTIONS_RUNTIME_TOKEN": "r",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "u", "ACTIONS_CACHE_URL": "c", "actions_runtime_url": "x",
    }
    assert user_code_environment(given) == {
        "PATH": "/usr/bin", "HOME": "/home/runner", "CUDA_VISIBLE_DEVICES": "0", "GITHUB_SHA": "abc",
    }
