"""The report's proof rows: the event time of the audited calls next to CUPTI's span, and what
the audit found, in every report that shows a timed variant; and their JSON round trip."""

from __future__ import annotations

import json

from kbench_ci.report.bench import render_bench
from kbench_ci.report.markdown import audit_rows
from kbench_ci.results.model import CaseResult, EscapeAudit, VariantResult
from kbench_ci.results.schema import to_jsonable, variant_from_json

PASSED = EscapeAudit(
    status="passed", event_ms=(0.1000, 0.1010, 0.0990), cupti_span_ms=(0.0980, 0.0990, 0.0985),
    escaped_ms=(0.0, 0.0, 0.0), streams=(7, 13), cost_s=0.21,
)
ESCAPED = EscapeAudit(
    status="escaped", event_ms=(0.0025,), cupti_span_ms=(2.7,), escaped_ms=(2.69,), streams=(13,),
    detail="2.69 ms of GPU work on stream 13 ended after the timer stopped (audited call 1 of 5, traced by CUPTI): join",
    cost_s=0.3,
)
UNAVAILABLE = EscapeAudit(status="unavailable", detail="RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", cost_s=0.01)


def variant(label: str, audit: EscapeAudit, status: str = "ok") -> VariantResult:
    return VariantResult(label=label, kind="pytorch", role="solution", status=status,  # type: ignore[arg-type]
                         rounds_ms=((0.1, 0.1, 0.1),), escape_audit=audit)


def test_a_passed_audit_shows_event_time_cupti_span_and_their_difference() -> None:
    text = audit_rows([("solution", variant("solution", PASSED))])
    assert text is not None
    row = next(line for line in text.splitlines() if line.startswith("| solution"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # timed median, calls, event median, CUPTI median, event vs CUPTI (+1.52%), streams, cost
    assert cells[1:8] == ["100 us", "3", "100 us", "98.5 us", "+1.52%", "7, 13", "0.21 s"]
    assert cells[8] == "all GPU work inside the timer"


def test_an_escape_and_an_unavailable_cupti_are_said_plainly() -> None:
    text = audit_rows([("base", variant("base", ESCAPED, "incorrect")), ("head", variant("head", UNAVAILABLE))])
    assert text is not None
    assert "❌ 2.69 ms of GPU work on stream 13 ended after the timer stopped" in text
    assert "⚠️ CUPTI unavailable, not audited: RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" in text


def test_no_audit_no_rows() -> None:
    plain = VariantResult(label="solution", kind="pytorch", role="solution", status="ok", rounds_ms=((0.1,),))
    assert audit_rows([("solution", plain), ("head", None)]) is None


def test_bench_report_carries_the_audit_section() -> None:
    case = CaseResult(case_id="c", dims={"N": 1}, seed=42, variants=(variant("solution", PASSED),), timing_method="cuda_event")
    report = render_bench(case, solution_name="k.py", ref_name="ref.py", implementation="pytorch", environment=None,
                          num_warmup=1, num_trials=3, discard_first=0, cache_mode="cold")
    assert "## GPU work audit (CUPTI)" in report and "| `solution` " in report.split("## GPU work audit (CUPTI)")[1]


def test_the_audit_survives_results_json() -> None:
    for audit in (PASSED, ESCAPED, UNAVAILABLE):
        original = variant("solution", audit)
        assert variant_from_json(json.loads(json.dumps(to_jsonable(original)))) == original


def test_bench_report_says_under_its_title_how_the_solution_ran() -> None:
    """Bench printed nothing about whether its solution ran apart from the checks."""
    case = CaseResult(case_id="c", dims={"N": 1}, seed=42, variants=(variant("solution", PASSED),), timing_method="cuda_event")
    common = {"solution_name": "k.py", "ref_name": "ref.py", "implementation": "pytorch", "environment": None,
              "num_warmup": 1, "num_trials": 3, "discard_first": 0, "cache_mode": "cold"}
    assert render_bench(case, **common).splitlines()[2].startswith("_Measured in one process (`--isolation process`)")
    assert render_bench(case, **common, isolation="judge").splitlines()[2].startswith("_Judged apart (`--isolation judge`)")
