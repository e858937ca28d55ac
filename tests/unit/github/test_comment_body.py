"""fit_body, the marker, the gate reader and the comment-mode decision (pure functions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbench_ci.errors import UsageError
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
)

ZERO = dict.fromkeys(
    ("slower", "faster", "unchanged", "incorrect", "failed", "inconclusive", "fixed", "added", "removed"), 0
)


def gate(passed: bool = True, **counts: int) -> Gate:
    return Gate(passed=passed, summary="s", counts={**ZERO, **counts})


# -- fit_body -----------------------------------------------------------------------------------


def test_short_body_is_untouched() -> None:
    text = "## kbench-ci\n\n<details><summary>x</summary>\nraw\n</details>\n"
    assert fit_body(text) == (text, False)


def test_details_are_folded_first_and_the_rest_is_kept() -> None:
    head = "## Result\n\n| case | verdict |\n|---|---|\n| gemm | slower |\n\n"
    details = "<details><summary>Raw <b>samples</b></summary>\n\n```\n" + "1.0 ms\n" * 20000 + "```\n</details>\n"
    tail = "\nEnvironment: H100\n"
    text, truncated = fit_body(head + details + tail)
    assert truncated
    assert len(text) <= COMMENT_LIMIT
    assert text.startswith(head)
    assert "Environment: H100" in text  # nothing outside the details block was lost
    assert "1.0 ms" not in text
    assert "_(details of 'Raw samples' left out to fit the size limit; see the full report)_" in text
    assert text.rstrip().endswith("(`benchmark.md`)._")


def test_largest_details_block_goes_first() -> None:
    small = "<details><summary>small</summary>\n" + "s\n" * 100 + "</details>\n"
    big = "<details><summary>big</summary>\n" + "b" * 3000 + "\n</details>\n"
    text, truncated = fit_body(small + big, limit=2000)
    assert truncated
    assert "s\ns\n" in text  # the small block survived
    assert "details of 'big' left out" in text
    assert len(text) <= 2000


def test_truncates_at_a_line_boundary_with_a_note() -> None:
    lines = [f"| case {i:05d} | unchanged |" for i in range(10000)]
    text, truncated = fit_body("\n".join(lines))
    assert truncated
    assert len(text) <= COMMENT_LIMIT
    body, _, note = text.partition("\n\n---\n")
    assert all(line in lines for line in body.splitlines())
    assert "job summary" in note and "artifact" in note


def test_safety_margin_is_kept() -> None:
    text, truncated = fit_body("x\n" * (COMMENT_LIMIT // 2))  # exactly at the limit
    assert truncated
    assert len(text) <= COMMENT_LIMIT - 1000


def test_open_code_fence_is_closed_when_cut() -> None:
    text, truncated = fit_body("intro\n```\n" + "line\n" * 5000, limit=1000)
    assert truncated
    body = text.partition("\n\n---\n")[0]
    assert body.count("```") == 2
    assert len(text) <= 1000


def test_a_single_huge_line_is_cut_by_characters() -> None:
    text, truncated = fit_body("y" * 10000, limit=1000)
    assert truncated
    assert len(text) <= 1000
    assert text.startswith("yyyy")


def test_measure_counts_bytes_when_asked() -> None:
    def utf8(s: str) -> int:
        return len(s.encode())

    text, truncated = fit_body("é—" * 5000, limit=4096, measure=utf8, note="cut")
    assert truncated
    assert utf8(text) <= 4096
    assert text.rstrip().endswith("cut")


def test_limit_must_be_positive() -> None:
    with pytest.raises(UsageError):
        fit_body("x", limit=0)


def test_build_body_starts_with_the_marker_and_fits() -> None:
    body, truncated = build_body("z\n" * 40000, "gemm")
    assert truncated
    assert body.startswith("<!-- kbench-ci:comment id=gemm -->\n")
    assert len(body) <= COMMENT_LIMIT


# -- marker ---------------------------------------------------------------------------------


def test_marker_format() -> None:
    assert marker() == "<!-- kbench-ci:comment id=default -->"
    assert has_marker("\n" + marker("a") + "\nbody", "a")
    assert not has_marker(marker("a") + "\nbody", "ab")
    assert not has_marker(marker("ab") + "\nbody", "a")
    assert not has_marker("quoted: " + marker("a"), "a")


@pytest.mark.parametrize("bad", ["", "x -->", "a b", "-lead", "x" * 65, "<b>", "é"])
def test_bad_marker_ids(bad: str) -> None:
    with pytest.raises(UsageError):
        marker(bad)


# -- gate ---------------------------------------------------------------------------------------


def test_gate_properties() -> None:
    assert not gate(unchanged=5).changed
    # Inconclusive is no change (a noisy runner would comment on every PR)
    assert not gate(unchanged=5, inconclusive=1).changed
    assert gate(unchanged=5, inconclusive=1, slower=1).changed
    assert gate(added=1).changed
    assert gate(passed=False, slower=2, incorrect=1, failed=1, faster=3).regressions == 4


def test_load_gate(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({
        "schema": "kbench-ci/compare", "schema_version": 1, "cases": [],
        "gate": {"passed": False, "summary": "2 slower — gate FAILED", "counts": {**ZERO, "slower": 2}},
    }))
    loaded = load_gate(path)
    assert loaded.passed is False
    assert loaded.regressions == 2
    assert loaded.summary == "2 slower — gate FAILED"


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"schema": "other"},
        {"schema": "kbench-ci/compare"},
        {"schema": "kbench-ci/compare", "gate": {"passed": "yes"}},
        {"schema": "kbench-ci/compare", "gate": {"passed": True, "counts": {"slower": -1}}},
        {"schema": "kbench-ci/compare", "gate": {"passed": True, "counts": {"slower": True}}},
    ],
)
def test_malformed_results(tmp_path: Path, data: object) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError):
        load_gate(path)


def test_missing_or_broken_results(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no results"):
        load_gate(tmp_path / "results.json")
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(UsageError, match="cannot read"):
        load_gate(tmp_path / "results.json")


# -- modes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "g", "existing", "post"),
    [
        ("always", gate(unchanged=3), False, True),
        ("always", None, False, True),
        ("never", gate(passed=False, slower=1), True, False),
        ("on-change", gate(unchanged=3), False, False),
        ("on-change", gate(unchanged=3), True, True),
        ("on-change", gate(faster=1), False, True),
        ("on-change", gate(fixed=1), False, True),
        ("on-change", gate(removed=1), False, True),
        ("on-change", gate(inconclusive=1), False, False),
        ("on-change", gate(inconclusive=1), True, True),
        ("on-change", Gate(passed=True, summary="1 slower (accepted) — gate passed", counts={}, accepted=1), False, True),
        ("on-change", None, False, False),
        ("on-regression", gate(faster=2), False, False),
        ("on-regression", gate(passed=False, slower=1), False, True),
        ("on-regression", gate(passed=False, incorrect=1), False, True),
        ("on-regression", gate(unchanged=2), True, True),
    ],
)
def test_decide(mode: str, g: Gate | None, existing: bool, post: bool) -> None:
    decision = decide(parse_mode(mode), g, existing=existing)
    assert decision.post is post
    assert mode in decision.reason


def test_parse_mode() -> None:
    assert parse_mode(" On-Change ") == "on-change"
    with pytest.raises(UsageError, match="always, on-change, on-regression, never"):
        parse_mode("sometimes")


# -- links ------------------------------------------------------------------


def test_links_to_the_run_and_the_artifact(tmp_path: Path) -> None:
    from kbench_ci.github.comment import links_line, run_url

    env = {"GITHUB_SERVER_URL": "https://ghe.example.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "12",
           "KBENCH_ARTIFACT_NAME": "kbench-ci-report-gemm"}
    assert run_url(env) == "https://ghe.example.com/o/r/actions/runs/12"
    # Without upload-artifact's URL, the run page's artifact list.
    assert links_line(env) == ("[Workflow run](https://ghe.example.com/o/r/actions/runs/12) · "
                               "[Report artifact `kbench-ci-report-gemm`](https://ghe.example.com/o/r/actions/runs/12#artifacts)")
    with_url = {**env, "KBENCH_ARTIFACT_URL": "https://ghe.example.com/o/r/actions/runs/12/artifacts/9"}
    assert links_line(with_url).endswith("(https://ghe.example.com/o/r/actions/runs/12/artifacts/9)")  # type: ignore[union-attr]
    # The fork recipe's comment job links the benchmark run from its workflow_run payload.
    payload = tmp_path / "event.json"
    payload.write_text(json.dumps({"workflow_run": {"html_url": "https://github.com/o/r/actions/runs/77"}}))
    fork = {"GITHUB_EVENT_NAME": "workflow_run", "GITHUB_EVENT_PATH": str(payload), "GITHUB_RUN_ID": "78",
            "GITHUB_REPOSITORY": "o/r"}
    assert run_url(fork) == "https://github.com/o/r/actions/runs/77"
    # Outside a workflow, or with values that are no URL, there are no links.
    assert links_line({}) is None
    assert run_url({"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "1)](javascript:x"}) is None
    payload.write_text(json.dumps({"workflow_run": {"html_url": "javascript:alert(1)"}}))
    assert run_url(fork) is None
