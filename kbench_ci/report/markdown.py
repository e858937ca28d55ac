"""Results to markdown. Returns strings, never prints; the only place numbers are rounded."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tabulate import tabulate

from kbench_ci.results.controls import show_controls
from kbench_ci.results.model import BaselineSpeedup, CaseResult, OutsideClock, SpeedOfLight, VariantResult
from kbench_ci.results.outcome import BuildOutcome, CaseComparison, RunCase
from kbench_ci.stats import Summary, summarize

#: the rows of a summary table: a statistic's name and how to read it from a Summary
SUMMARY_STATS: tuple[tuple[str, Callable[[Summary], float]], ...] = (
    ("median", lambda s: s.median), ("mean", lambda s: s.mean), ("std", lambda s: s.std),
    ("min", lambda s: s.min), ("max", lambda s: s.max), ("p20", lambda s: s.p20), ("p80", lambda s: s.p80),
)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[str] | None = None) -> str:
    text: str = tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True, colalign=align)
    return text


def time_unit(values_ms: Sequence[float]) -> tuple[str, float]:
    """Microseconds for kernels under a millisecond (most of them), else milliseconds."""
    if values_ms and max(values_ms) < 1.0:
        return "us", 1e3
    return "ms", 1.0


def fmt(value: float | None, scale: float = 1.0, digits: int = 4) -> str:
    if value is None:
        return "—"
    return f"{value * scale:.{digits}g}"


def fmt_error(value: float) -> str:
    if value == float("inf"):
        return "inf"
    return f"{value:.3g}"


def environment_line(environment: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    if not environment:
        return [("GPU", "unknown (the worker did not report)")]
    if environment.get("gpu_name"):
        l2 = environment.get("l2_cache_bytes")
        gpu = (
            f"{environment['gpu_name']} ({environment.get('arch')}, {environment.get('sm_count')} SMs"
            + (f", {l2 / 2**20:.0f} MiB L2" if l2 else "")
            + f", {environment.get('device')})"
        )
    else:
        gpu = "none — CPU mode (PyTorch on CPU tensors, Triton under TRITON_INTERPRET=1)"
    # a worker reports these (in one process with the pull request's code): text, not markup
    rows = [("GPU", cell(gpu, 300))]
    if environment.get("gpu_name"):
        rows.append(("arch", cell(str(environment.get("arch")), 60)))
    rows.append((
        "driver / CUDA / torch / triton",
        cell(" / ".join(str(environment.get(k) or "—") for k in ("driver_version", "cuda_runtime", "torch_version", "triton_version")),
             300),
    ))
    libraries = environment.get("libraries") or {}
    if libraries:
        rows.append(("libraries", cell(", ".join(f"{k} {v}" for k, v in sorted(libraries.items())), 600)))
    return rows


def variant_summaries(case: CaseResult) -> dict[str, Summary]:
    return {v.label: summarize(v.samples_ms) for v in case.variants if v.timed}


def correctness_cell(variant: VariantResult) -> str:
    if variant.status == "unavailable":
        return "unavailable"
    if variant.status == "error":
        return "ERROR"
    if variant.correctness is None:
        return "—"
    n = len(variant.correctness.trials)
    if variant.status == "incorrect":
        return "FAIL"
    return f"PASS ({n} seed{'s' if n != 1 else ''})"


RUN_MARKERS = {"ok": "✅", "incorrect": "❌", "failed": "💥"}


def pct(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "—"
    return f"{(ratio - 1.0) * 100:+.2f}%"


def code(text: object) -> str:
    """A code span that holds ``text`` whatever backticks it has (a longer fence than any run of
    them in it): inside, GitHub draws every character as it is."""
    # one line: a name a worker reported may hold a newline; a bidi override or ESC would
    # still act inside the span, so they are shown as their escapes
    text = show_controls(" ".join(str(text).split()))
    if not text:  # two bare backticks would open a span that a later one closes
        return "—"
    fence = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    # in a table a pipe ends the cell even inside a code span; GitHub shows "\\|" there as "|"
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def _longest_backtick_run(text: str) -> int:
    """A fence longer than this (a code span's or a code block's) cannot be closed inside ``text``."""
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def code_cell(text: str, limit: int = 400) -> str:
    """:func:`code` of ``text`` cut at ``limit``: one table cell's line."""
    return code(_one_line(text, limit))


_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
#: ``#123``, ``org/repo#123``, ``GH-123``: a reference GitHub links, and records in the issue it names
_REFERENCE = re.compile(r"#(?=[0-9])|(?i:\bGH)(?=-[0-9])")
#: where GitHub's extended autolinks begin (``www.``, ``https://``): one that begins outside a
#: code span runs on to the next space, through a backtick, and would end that span
_AUTOLINK = re.compile(r"(?i:www)(?=\.)|:(?=//)")
#: U+2060 WORD JOINER: invisible, and no part of a name or a link
_JOIN = "\u2060"
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _one_line(text: str, limit: int) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _segments(text: str) -> list[tuple[bool, str]]:
    """``text`` as (is a code span, its characters) pieces, split where GitHub's Markdown splits
    it: a run of backticks opens a code span that the next run of the same length closes; a
    backslash before punctuation (a backtick too) makes that character plain. A run that no
    run closes comes back escaped, so that no code span reaches past the text."""
    pieces: list[tuple[bool, str]] = []
    plain, index = "", 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 == len(text):
            plain += "\\\\"  # escaped: a backslash at the end would escape what follows the text
            break
        if char == "\\" and index + 1 < len(text) and text[index + 1] in _PUNCTUATION:
            plain += text[index : index + 2]
            index += 2
            continue
        if char != "`":
            plain += char
            index += 1
            continue
        end = index
        while end < len(text) and text[end] == "`":
            end += 1
        close = _closing_run(text, end, end - index)
        if close < 0:
            # escaped: left bare, it could open a code span with a backtick after this text
            plain += "\\`" * (end - index)
            index = end
            continue
        if plain:
            pieces.append((False, plain))
            plain = ""
        pieces.append((True, text[index : close + end - index]))
        index = close + end - index
    if plain:
        pieces.append((False, plain))
    return pieces


def _closing_run(text: str, start: int, length: int) -> int:
    """Where the next run of exactly ``length`` backticks from ``start`` begins, or -1."""
    index = start
    while index < len(text):
        if text[index] != "`":
            index += 1
            continue
        end = index
        while end < len(text) and text[end] == "`":
            end += 1
        if end - index == length:
            return index
        index = end
    return -1


def inert(text: str) -> str:
    """Text that a pull request's code or files wrote (its exceptions, its compiler's output,
    its files' names) made into text that GitHub's Markdown shows and does nothing with. A
    kernel's error message lands in the comment the action posts: as Markdown it could open a
    tag or a comment that hides the rows after it, draw an image or a link of its choosing, or
    @mention anyone (the notification comes from the action's token), or reference any issue
    (``org/repo#1``: GitHub records the mention there). Outside its code spans ``<``, ``>`` and
    ``&`` become entities, and a link's ``](``, a mention's ``@``, a reference's ``#`` (or
    ``GH``) and an autolink's ``www``/``:`` (before ``.``/``//``) are split by an invisible word
    joiner; inside them (where GitHub draws every character as it is)
    nothing changes. Control characters, a bidi override (U+202E) or ESC among them, are shown as
    their escapes (:func:`~kbench_ci.results.controls.show_controls`), code spans too: GitHub
    draws them as they are, and an override turns the rest of the line around. The text reads
    the same."""
    out = []
    for is_code, piece in _segments(show_controls(text)):
        if not is_code:
            piece = piece.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            piece = _MENTION.sub("@" + _JOIN, piece.replace("](", "]" + _JOIN + "("))
            piece = _REFERENCE.sub(lambda found: found.group(0) + _JOIN, piece)
            piece = _AUTOLINK.sub(lambda found: found.group(0) + _JOIN, piece)
        out.append(piece)
    return "".join(out)


# A judged case's timing description names the timer, the outside clock, the calibration, the
# sandbox layers and a re-measurement: about 900 characters in all, and each clause is a fact a
# reviewer needs (the comment's own size limit still applies, in github/comment.py).
_TIMING_TEXT_LIMIT = 1500


def cell(text: str | None, limit: int = 160) -> str:
    """One table cell (or one line of a note) of text that may be a pull request's: one line,
    long text cut (the details keep all of it), :func:`inert`, pipes escaped (a pipe ends a
    table cell even inside a code span; GitHub shows ``\\|`` as ``|``)."""
    if not text:
        return ""
    return inert(_one_line(str(text), limit)).replace("|", "\\|")


def timing_cell(method: str, description: str | None) -> str:
    """The case's timer and how it was used, whole (up to :data:`_TIMING_TEXT_LIMIT`)."""
    return cell(method + (f" — {description}" if description else ""), _TIMING_TEXT_LIMIT)


def median_ms(variant: VariantResult | None) -> float | None:
    if variant is None or not variant.timed:
        return None
    return summarize(variant.samples_ms).median


def with_unit(value_ms: float | None) -> str:
    if value_ms is None:
        return "—"
    unit, scale = time_unit([value_ms])
    return f"{fmt(value_ms, scale)} {unit}"


def speedup_text(ratio: float, digits: int = 2) -> str:
    """A speedup (baseline time / solution time) that reads at any size: ``1.84×``, ``2,350×``,
    and below 0.1 the slowdown it is, ``2,800× slower`` (``0.000×`` said nothing)."""
    if not math.isfinite(ratio) or ratio <= 0:
        return "—"
    if ratio < 0.1:
        slower = 1.0 / ratio
        return f"{slower:,.0f}× slower" if slower >= 100 else f"{slower:.1f}× slower"
    if ratio >= 100:
        return f"{ratio:,.0f}×"
    return f"{ratio:.{digits}f}×"


def relative_speed_text(ratio: float) -> str:
    """How much faster or slower the solution is than a baseline (ratio: baseline time /
    solution time), always in one form: ``1.84× faster``, ``2.86× slower``, ``2,637× slower``."""
    if not math.isfinite(ratio) or ratio <= 0:
        return "—"
    factor, word = (ratio, "faster") if ratio >= 1 else (1.0 / ratio, "slower")
    number = f"{factor:,.0f}" if factor >= 100 else f"{factor:.1f}" if factor >= 10 else f"{factor:.2f}"
    return f"{number}× {word}"


def baselines_cell(speedups: Sequence[BaselineSpeedup], solution: str = "head", separator: str = " · ") -> str:
    """``1.84× faster than `pytorch-eager` · `torch-compile`: unavailable``: the solution's (the
    head's) speed against each suite baseline, baseline median / solution median, one form for
    faster and slower (:func:`relative_speed_text`)."""
    if not speedups:
        return "—"
    parts = []
    for b in speedups:
        if b.speedup is not None:
            parts.append(f"{relative_speed_text(b.speedup)} than `{b.name}`")
        elif b.status == "ok":
            parts.append(f"`{b.name}`: {solution} not timed")
        else:
            parts.append(f"{code(b.name)}: {cell(b.status, 120)}")
    return separator.join(parts)


def throttle_notice(cases: Sequence[CaseComparison] | Sequence[RunCase]) -> list[str]:
    throttled = [c.case_id for c in cases if c.throttled]
    if not throttled:
        return []
    return [f"> ⚠️ Measured while the GPU was throttled: {', '.join(code(c) for c in throttled)}.", ""]


def result_facts(result: CaseResult) -> list[tuple[str, str]]:
    """What the worker saw around the case: GPU state before and after, the timer, incidents."""
    on_cpu = result.timing_method == "host_time" and not result.gpu_state_before and not result.gpu_state_after
    facts = [] if on_cpu else [  # a CPU run has no GPU state to show
        ("GPU before", gpu_state_text(result.gpu_state_before)),
        ("GPU after", gpu_state_text(result.gpu_state_after)),
    ]
    facts.append(("timing", timing_cell(result.timing_method, result.timing_description)))
    for variant in result.variants:
        if variant.speed_of_light is not None:
            facts.append((f"speed of light ({variant.label})", speed_of_light_text(variant.speed_of_light)))
    if result.error:
        facts.append(("worker incident", cell(result.error, 500)))
    return facts


def share_text(fraction: float) -> str:
    """A part of a whole as a whole percentage; "<1%" for what would round to 0%."""
    return "<1%" if fraction < 0.005 else f"{fraction:.0%}"


def speed_of_light_text(figures: SpeedOfLight) -> str:
    """Achieved bandwidth and FLOP/s, as a share of the GPU's measured ceilings where known."""
    parts = []
    if figures.bytes_per_s is not None:
        share = f" = {share_text(figures.bandwidth_fraction)} of the measured copy bandwidth" if figures.bandwidth_fraction else ""
        parts.append(f"{figures.bytes_per_s / 1e9:,.4g} GB/s{share}")
    if figures.flops_per_s is not None:
        share = (f" = {share_text(figures.flops_fraction)} of the measured {cell(str(figures.matmul_dtype), 40)} matmul rate"
                 if figures.flops_fraction else "")
        parts.append(f"{figures.flops_per_s / 1e12:,.4g} TFLOP/s{share}")
    work = ", ".join(
        text for text in (f"{figures.bytes:,} bytes" if figures.bytes else "", f"{figures.flops:,} FLOPs" if figures.flops else "")
        if text
    )
    source = "declared" if figures.source == "declared" else "inferred: inputs read once, outputs written once"
    ceilings = "" if figures.copy_bytes_per_s or figures.matmul_flops_per_s else "; no ceilings measured on this device"
    floor = f"; floor {figures.floor_ms * 1e3:.4g} us" if figures.floor_ms is not None else ""
    return "; ".join(parts) + f" ({work}, {source}){floor}{ceilings}"


def compiler_output(build: BuildOutcome | None, title: str) -> list[str]:
    """A failed build's compiler output (its last 6000 characters), or nothing. The output is the
    pull request's to shape (its source lines, which the compiler echoes; its own build
    command's prints): the fence is longer than any run of backticks in it, so no line of it
    can close the block and have the rest read as Markdown."""
    if build is None or build.ok or not build.compiler_output:
        return []
    output = show_controls(build.compiler_output.rstrip()[-6000:])
    fence = "`" * max(3, _longest_backtick_run(output) + 1)
    return [title, "", fence, output, fence, ""]


def gpu_state_text(state: Mapping[str, Any] | None) -> str:
    if not state:
        return "not read (no nvidia-smi, or the CPU)"
    parts = []
    if state.get("sm_clock_mhz") is not None:
        parts.append(f"SM {state['sm_clock_mhz']:g} MHz")
    if state.get("memory_clock_mhz") is not None:
        parts.append(f"memory {state['memory_clock_mhz']:g} MHz")
    if state.get("temperature_c") is not None:
        parts.append(f"{state['temperature_c']:g} °C")
    if state.get("power_w") is not None:
        parts.append(f"{state['power_w']:g} W")
    reasons = state.get("throttle_reasons") or []
    parts.append("throttled: " + cell(", ".join(map(str, reasons)), 300) if reasons else "not throttled")
    return ", ".join(parts)


def summary_rows(variants: Sequence[tuple[str, VariantResult | None]]) -> str | None:
    summaries: dict[str, Summary] = {
        label: summarize(v.samples_ms) for label, v in variants if v is not None and v.timed
    }
    if not summaries:
        return None
    unit, scale = time_unit([s.median for s in summaries.values()])
    labels = list(summaries)
    rows = []
    for name, getter in SUMMARY_STATS:
        rows.append([f"{name} ({unit})", *(fmt(getter(summaries[label]), scale) for label in labels)])
    rows.append([f"95% CI of median ({unit})", *(
        f"[{fmt(summaries[label].ci_low, scale)}, {fmt(summaries[label].ci_high, scale)}]" for label in labels
    )])
    rows.append(["samples", *(str(summaries[label].n) for label in labels)])
    by_label = dict(variants)
    rows.append(["rounds × samples", *(
        f"{len(by_label[label].rounds_ms)} × {len(by_label[label].rounds_ms[0]) if by_label[label].rounds_ms else 0}"  # type: ignore[union-attr]
        for label in labels
    )])
    rows.append(["first call (ms)", *(fmt(by_label[label].first_call_ms) for label in labels)])  # type: ignore[union-attr]
    return table(["", *labels], rows, align=["left", *("right" for _ in labels)])


def correctness_rows(variants: Sequence[tuple[str, VariantResult | None]]) -> str:
    rows = []
    for label, variant in variants:
        if variant is None:
            rows.append([label, "not run", "", "", "", ""])
            continue
        c = variant.correctness
        rows.append([
            label,
            correctness_cell(variant),
            ", ".join(str(t.seed) for t in c.trials) if c else "—",
            tolerance_text(variant),
            ("yes" if variant.post_timing_check else ("no" if variant.post_timing_check is False else "—"))
            + (f"; {cell(variant.fresh_inputs, 300)}" if variant.fresh_inputs else ""),
            cell(variant.message, 300) if variant.status != "ok" else "",
        ])
    return table(["side", "correctness", "seeds", "tolerance", "re-checked after timing", "message"], rows)


def tolerance_text(variant: VariantResult) -> str:
    """The tolerance the outputs were checked at, and where it came from ("—" if none was)."""
    c = variant.correctness
    checks = [check for trial in c.trials for check in trial.outputs] if c else []
    seen: dict[tuple[float, float, str], None] = {(o.atol, o.rtol, o.tolerance_source): None for o in checks}
    return "; ".join(f"atol={atol:g} rtol={rtol:g} ({cell(source, 120)})" for atol, rtol, source in seen) or "—"


def notes_lines(variants: Sequence[tuple[str, VariantResult | None]]) -> list[str]:
    """One line per variant with notes (pointer sizes chosen, torch settings its code changed)."""
    lines = [f"**{label} notes:** {cell('; '.join(v.notes), 2000)}" for label, v in variants if v is not None and v.notes]
    return [*lines, ""] if lines else []


#: what the judge's clock table shows, for a reader who meets it first in a report
CLOCK_EXPLAINED = (
    "Each call, or each batch of calls, was stamped by the judge's own GPU clock, from its go to the side's end "
    "signal, outside the process that ran the calls; figures are a call's (a batch's divided by its calls). The "
    "gap is that span less the side's own time: the handoff between the two processes and, in a batch, the "
    "side's cache flushes between its calls, plus anything the side's own clock left out. A gap beyond the trusted "
    "sides' by more than the resolution (the interval of the two medians) is counted in the side's times; beyond "
    "the clock's floor it is a lie about time (`incorrect`), as is a batch's gap short of theirs by its flush. "
    "docs/isolation.md, \"The outside clock\"."
)


def _micro(value_us: float | None) -> str:
    """Microseconds as the clock's table shows them: us below a millisecond, ms above."""
    if value_us is None:
        return "—"
    return f"{value_us:.2f} us" if abs(value_us) < 1000 else f"{value_us / 1000:.3f} ms"


def _resolution(clock: OutsideClock) -> str:
    """The clock's resolution, and the trusted sides' lead-in a head's gain must also pass."""
    if clock.resolution_us is None or not clock.reference_lead_us:
        return _micro(clock.resolution_us)
    return f"{_micro(clock.resolution_us)} + {_micro(clock.reference_lead_us)} lead-in"


def clock_rows(variants: Sequence[tuple[str, VariantResult | None]]) -> str | None:
    """The judge's own clock over each variant's timed calls (``--isolation judge``): its own
    median next to what the judge's clock saw beyond it (the gap), against the trusted sides'
    gap, and the judge's own staging and snapshot steps; None when no variant was judged."""
    judged = [(label, v, v.outside_clock) for label, v in variants if v is not None and v.outside_clock is not None]
    if not judged:
        return None
    rows = []
    for label, variant, clock in judged:
        own = sorted(clock.reported_us)[len(clock.reported_us) // 2] if clock.reported_us else None
        excess = clock.unexplained_us
        if clock.finding is not None:
            result = "❌ " + cell(clock.finding.split(":")[0], 120)
        elif clock.reference_gap_us is None:
            trusted = variant.role == "baseline" or label.strip("`") == "base"
            result = "trusted: the reference" if trusted else "not judged: nothing trusted was timed beside it"
        elif clock.counted_us > 0:
            result = f"{_micro(clock.counted_us)} a call counted in its times"
        else:
            result = "within the resolution"
        on_gpu = clock.source == "gpu-globaltimer"
        rows.append([
            label, _micro(own), str(clock.calls) + (f" ({clock.batch_calls} a span)" if clock.batch_calls > 1 else ""),
            _micro(clock.gap_us), _micro(clock.reference_gap_us),
            ("+" if excess is not None and excess >= 0 else "") + _micro(excess), _resolution(clock),
            f"{_micro(clock.pre_us)} / {_micro(clock.post_us)}" if on_gpu else "— (a CPU: not stamped)", result,
        ])
    return table(
        ["variant", "own median", "judged calls", "gap (judge's span less its own time)", "trusted sides' gap", "excess",
         "resolution", "judge's staging / snapshot", "result"],
        rows,
    )


def audit_rows(variants: Sequence[tuple[str, VariantResult | None]]) -> str | None:
    """The proof behind the samples: per variant, the event time of the calls audited under
    CUPTI next to CUPTI's span of the same calls (first GPU activity to last), and whether any
    GPU work ran outside the timer; None when no variant was audited."""
    audited = [(label, v, v.escape_audit) for label, v in variants if v is not None and v.escape_audit is not None]
    if not audited:
        return None
    rows = []
    for label, variant, audit in audited:
        event, span = audit.event_median_ms, audit.cupti_median_ms
        difference = pct(event / span) if event is not None and span else "—"
        if audit.status == "passed":
            result = "all GPU work inside the timer"
        elif audit.status == "escaped":
            result = "❌ " + cell(audit.detail, 300)
        else:
            result = "⚠️ CUPTI unavailable, not audited: " + cell(audit.detail, 200)
        rows.append([
            label,
            with_unit(median_ms(variant)),
            str(len(audit.event_ms)) if audit.event_ms else "0",
            with_unit(event),
            with_unit(span),
            difference,
            ", ".join(str(s) for s in audit.streams) or "—",
            f"{audit.cost_s:.2f} s",
            result,
        ])
    return table(
        ["variant", "timed median", "audited calls", "event time", "CUPTI span", "event vs CUPTI", "streams", "audit cost", "result"],
        rows,
        align=["left", "right", "right", "right", "right", "right", "left", "right", "left"],
    )


AUDIT_EXPLAINED = (
    "Each timed variant's call was made again under CUPTI after its timing rounds: _event time_ is what the "
    "CUDA events measured for those calls (the run's event overhead subtracted), _CUPTI span_ the time from "
    "their first GPU activity to their last, on any stream. Their difference, the median over the case, has "
    "also been taken off the _timed median_ (see the timing row), so the timed median reads CUPTI's time. GPU "
    "work before the start event or after the end event fails the variant."
)


def isolation_line(isolation: str) -> str:
    """How the cases were judged, under the verdict (so in the PR comment and in the lines the
    command prints): a reviewer must know whether the kernels' code could reach their checks."""
    if isolation == "judge":
        return ("_Judged apart (`--isolation judge`): each kernel ran in a process of its own; a judge that runs none "
                "of their code made the inputs, checked every output and held each one's times to its own clock._")
    return ("_Measured in one process (`--isolation process`): the kernels ran in the process that checks and times "
            "them, so a kernel that rebinds the checks or the clock can pass; `--isolation judge` runs them apart "
            "(docs/isolation.md)._")


def seeds_notice(isolation: str, seeds: Sequence[int]) -> list[str]:
    """Under the isolation line where ``--seeds`` chose the correctness trials' seeds: they are
    a local run's, made to check a report's failing contents again; under the judge they were
    chosen, not drawn, so a kernel could have known them and its verdict is no judged one."""
    if not seeds:
        return []
    given = ",".join(str(seed) for seed in seeds)
    known = (", not drawn by the judge from the OS's entropy: a kernel could have known them in advance"
             if isolation == "judge" else "")
    return [f"> ⚠️ **Seeds chosen (`--seeds {given}`):** one correctness trial at each seed given on the command "
            f"line{known}. A local debugging aid that checks those contents again; a CI run never passes it.", ""]


def seeds_range(seeds: Sequence[int]) -> str:
    """Trial seeds in a sentence: ``42…44`` where they follow each other (the suite's), else each."""
    if len(seeds) > 2 and all(later == earlier + 1 for earlier, later in zip(seeds, seeds[1:], strict=False)):
        return f"{seeds[0]}…{seeds[-1]}"
    return ", ".join(str(seed) for seed in seeds)
