"""A pull request's own words in the reports: a kernel's exception text, its compiler's output,
its build command. The action posts benchmark.md as a PR comment with its own token, so text
that GitHub's Markdown reads as markup would be the kernel's to shape: a tag or comment that
hides what follows, an image or link of its choosing, an @mention that notifies anyone, a pipe
or a fence that breaks out of its table cell or code block to forge a row.

Each case below is the text a cheating head would want in the comment; each test checks the
markdown that would reach GitHub, not a rendering."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from kbench_ci.report.bench import render_bench
from kbench_ci.report.compare import render_compare
from kbench_ci.report.markdown import cell, code, code_cell, compiler_output
from kbench_ci.results.model import CaseResult, VariantResult
from kbench_ci.results.outcome import BuildOutcome
from kbench_ci.stats import Verdict
from tests.unit.report.comment_suite import suite_cases, suite_outcome

#: what a cheating head raises: closes the details, draws an image, links a "re-run", pings a
#: team (as text and as an entity), opens a comment to hide the rest, adds table cells
HOSTILE = ("RuntimeError: </details><img src=https://e.invalid/x.png> [re-run](https://e.invalid/r) "
           "@kbench-org/maintainers &#64;admin kbench-org/private#1 <!-- | 🟢 faster | −42% | ✅ \\| and more")


def _markup_left(markdown: str) -> list[str]:
    """Whatever in ``markdown`` GitHub would still read as markup from HOSTILE."""
    found = []
    for pattern in (r"<img", r"</details><", r"<!--", r"\]\(https://e\.invalid", r"@kbench-org", r"&#64;admin", r"private#1"):
        if re.search(pattern, markdown):
            found.append(pattern)
    return found


def _cells(row: str) -> list[str]:
    """A table row's cells as GitHub's table extension splits them: at every pipe that no
    backslash comes just before (cmark-gfm 0.29: ``\\\\|`` does not split either)."""
    text = row.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    cells, current, previous = [], "", ""
    for char in text:
        if char == "|" and previous != "\\":
            cells.append(current)
            current = ""
        else:
            current += char
        previous = char
    return [*cells, current]


def _tables_keep_their_columns(markdown: str) -> None:
    rows: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            rows.append(line)
            continue
        if rows:
            widths = {len(_cells(row)) for row in rows}
            assert len(widths) == 1, f"a row with another number of cells: {rows}"
            rows = []


def test_a_cell_keeps_the_text_and_drops_the_markup() -> None:
    text = cell(HOSTILE, 1000)
    assert _markup_left(text) == []
    assert "\n" not in cell("a\nb") and cell("a\nb") == "a b"
    assert len(_cells(f"| x | {text} |")) == 2  # the pipes, and the escaped one, stay in the cell
    # what a reader sees is the same words: the entities and invisible joiners aside
    shown = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("\u2060", "")
    assert shown.replace("\\|", "|") == HOSTILE


def test_an_incorrect_heads_message_reaches_the_comment_inert(tmp_path: Path) -> None:
    cases = suite_cases(3)
    cases[0] = replace(cases[0], message=HOSTILE)
    head = replace(cases[0].measurement.result.variants[1], message=HOSTILE)  # type: ignore[union-attr]
    result = replace(cases[0].measurement.result, variants=(cases[0].measurement.result.variants[0], head))  # type: ignore[union-attr]
    cases[0] = replace(cases[0], measurement=replace(cases[0].measurement, result=result))  # type: ignore[type-var]
    markdown = render_compare(suite_outcome(cases, tmp_path))
    assert cases[0].verdict is Verdict.INCORRECT and "RuntimeError" in markdown
    assert _markup_left(markdown) == []
    _tables_keep_their_columns(markdown)


def test_a_bench_reports_a_failing_solutions_message_inert() -> None:
    case = CaseResult(case_id="k", dims={"N": 4}, seed=42, timing_method="host_time", timing_description=HOSTILE, variants=(
        VariantResult(label="solution", kind="pytorch", role="solution", status="error", message=HOSTILE),
    ))
    report = render_bench(case, solution_name="k.py", ref_name="ref.py", implementation="pytorch",
                          environment={"gpu_name": None}, num_warmup=1, num_trials=3, discard_first=0, cache_mode="cold")
    assert "RuntimeError" in report
    assert _markup_left(report) == []
    _tables_keep_their_columns(report)


def test_compiler_output_cannot_close_its_code_block() -> None:
    output = "kernel.cu(3): error: identifier is undefined\n  ```\n<img src=https://e.invalid/x.png> @kbench-org/maintainers\n````"
    build = BuildOutcome(side="head", kernel="k", ok=False, duration_s=1.0, command="nvcc k.cu", message="nvcc failed",
                         compiler_output=output)
    lines = compiler_output(build, "Compiler output:")
    fence = lines[2]
    assert fence == lines[-2] and set(fence) == {"`"} and len(fence) == 5
    # no line inside is a fence of that length or more, so none can close the block
    inside = lines[3].splitlines()
    assert not any(line.strip().startswith(fence) for line in inside)


def test_a_code_span_holds_any_backticks() -> None:
    assert code("vadd") == "`vadd`"
    assert code("make `x` <img>") == "``make `x` <img>``"
    assert code("`start") == "`` `start ``"
    assert code_cell("make a | b") == "`make a \\| b`"


def test_code_spans_in_a_message_stay_as_written_and_none_reaches_past_it() -> None:
    # a message's own code spans are drawn as they are: nothing to escape inside them
    assert cell("wrote `std::vector<float>&` at `@torch.jit`") == "wrote `std::vector<float>&` at `@torch.jit`"
    # a backtick that nothing in the text closes is escaped: two texts side by side in one
    # paragraph cannot pair theirs (the second's "code span" would otherwise start in the first)
    first, second = cell("it failed `"), cell("x` <img src=https://e.invalid/y.png> `z")
    assert first == "it failed \\`" and second == "x` <img src=https://e.invalid/y.png> `z"
    from kbench_ci.report.markdown import _segments
    plain = [piece for is_code, piece in _segments(f"{first} {second}") if not is_code]
    assert not any("<img" in piece for piece in plain)


def test_names_a_worker_reported_reach_why_it_changed_as_code() -> None:
    from kbench_ci.report.why import launch_changes
    from kbench_ci.results.model import KernelLaunch

    def launch(name: str, registers: int) -> KernelLaunch:
        return KernelLaunch(name=name, per_call=1, share=1.0, mean_us=10.0, grid=(1, 1, 1), block=(32, 1, 1),
                            registers=registers, shared_bytes=0, blocks_per_sm=1.0, occupancy_pct=50)

    hostile = "k` <img src=https://e.invalid/x.png> @kbench-org/team <!--"
    lines = launch_changes((launch("k", 32),), (launch("k", 32), launch(hostile, 40)))
    text = " ".join(lines)
    assert "img" in text
    from kbench_ci.report.markdown import _segments
    plain = [piece for is_code, piece in _segments(text) if not is_code]
    assert not any("<img" in piece or "@kbench-org" in piece for piece in plain), text


def test_an_autolink_cannot_swallow_a_code_spans_backtick() -> None:
    # GitHub's extended autolink runs from "www." or "https://" to the next space, through a
    # backtick: the "code span" after it would be Markdown again (found by a second reviewer)
    from kbench_ci.report.markdown import _AUTOLINK, _segments
    for text in ("www.a.com/` <img src=https://e.invalid/x.png> @kbench-org/team `",
                 "HTTPS://a.b/`<img src=x>`", "ftp://a.b/`<!--`"):
        safe = cell(text)
        plain = "".join(piece for is_code, piece in _segments(safe) if not is_code)
        assert not _AUTOLINK.search(plain), safe  # no autolink begins outside a code span


def test_references_a_trailing_backslash_and_an_empty_name() -> None:
    assert "GH-12" not in cell("see GH-12") and "gh-3" not in cell("gh-3")
    assert cell("ends with \\") == "ends with \\\\"  # it would escape what follows the text
    assert code("") == "—" and code("  ") == "—"  # "``" would open a span a later one closes


def test_controls_of_a_heads_text_are_shown_as_escapes_in_cells_code_and_compiler_output() -> None:
    """A bidi override turns the rest of a line of the comment around (inside a
    code span too: GitHub draws it as it is), ESC and the other controls reach the job summary."""
    hostile = "RuntimeError: \u202etxt.exe\u2067 \x1b[2J\x00"
    shown = "RuntimeError: \\u202etxt.exe\\u2067 \\x1b[2J\\x00"
    assert cell(hostile) == shown
    assert code(hostile) == f"`{shown}`"
    assert code_cell(f"`{hostile}`") == f"`` `{shown}` ``"
    build = BuildOutcome(side="head", kernel="k", ok=False, duration_s=1.0, command="nvcc k.cu", message="nvcc failed",
                         compiler_output=f"k.cu(1): error\n{hostile}\tat col 2")
    lines = compiler_output(build, "Compiler output:")
    assert lines[3] == f"k.cu(1): error\n{shown}\tat col 2"  # its lines and tabs stay
