"""The judge's clock in the reports: a row per judged variant, what it says of each."""

from __future__ import annotations

from dataclasses import replace

from kbench_ci.report.markdown import clock_rows
from kbench_ci.results.model import OutsideClock, VariantResult


def _variant(label: str, role: str, status: str = "ok", message: str | None = None, *, reference: float | None = 294.0,
             gap: float = 294.5, own_us: float = 7.2, source: str = "gpu-globaltimer") -> VariantResult:
    clock = OutsideClock(source=source, calls=110, gap_us=gap, pre_us=45.1, post_us=5.0, reference_gap_us=reference,
                         resolution_us=3.0 if reference is not None else None, reported_us=(own_us,) * 110,
                         reference="base" if reference is not None else None, finding=message if status == "incorrect" else None)
    return replace(VariantResult(label=label, kind="triton", role=role, status=status, message=message),  # type: ignore[arg-type]
                   outside_clock=clock)


def test_each_judged_variant_gets_a_row_that_says_what_the_clock_found() -> None:
    text = clock_rows([
        ("base", _variant("base", "solution", reference=None, gap=294.0)),
        ("head", _variant("head", "solution", "incorrect", "its process reported less time than the GPU spent: 3.6 us a call",
                          gap=297.6, own_us=3.6)),
        ("`solution`", _variant("solution", "solution", reference=None, gap=294.0)),
    ])
    assert text is not None
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "trusted: the reference" in rows["base"]
    assert "❌ its process reported less time than the GPU spent" in rows["head"] and "+3.60 us" in rows["head"]
    assert "not judged: nothing trusted was timed beside it" in rows["`solution`"]
    # a head incorrect for its outputs, not for anything the clock found, reads as within it
    wrong = clock_rows([("head", replace(_variant("head", "solution"), status="incorrect", message="output 'y' differs"))])
    assert wrong is not None and "within the resolution" in wrong
    assert "45.10 us / 5.00 us" in rows["head"]


def test_the_lead_in_a_heads_gain_must_pass_shows_beside_the_resolution() -> None:
    head = _variant("head", "solution")
    assert head.outside_clock is not None
    led = replace(head, outside_clock=replace(head.outside_clock, lead_us=6.9, reference_lead_us=7.1))
    text = clock_rows([("head", led)])
    assert text is not None and "3.00 us + 7.10 us lead-in" in text
    plain = clock_rows([("head", head)])
    assert plain is not None and "lead-in" not in plain


def test_a_cpu_run_shows_milliseconds_and_no_stamped_steps() -> None:
    text = clock_rows([("head", _variant("head", "solution", gap=11221.1, own_us=10736.3, source="host-monotonic"))])
    assert text is not None and "11.221 ms" in text and "10.736 ms" in text and "— (a CPU: not stamped)" in text


def test_no_table_where_nothing_was_judged() -> None:
    assert clock_rows([("base", VariantResult(label="base", kind="triton", role="solution", status="ok")), ("head", None)]) is None
