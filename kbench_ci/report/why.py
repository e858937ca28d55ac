"""Why a case's time moved: what the head's calls launch, next to what the base's launched.

Pure text from the launch anatomy each side's CUPTI audit recorded (results.model.KernelLaunch):
kernels that appeared or went away, and for a kernel on both sides the launch shape and
resources that differ ("registers 168 → 207, occupancy 50% → 38%") and its GPU time per call.
A kernel whose full name changed only in its parameters or template arguments (a C++ kernel given
``float4`` pointers to load 16 elements a thread) is the same kernel reshaped, not one gone and
one new: the reader's question is what its grid, registers and time did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kbench_ci.report.markdown import cell, code, share_text, table
from kbench_ci.results.model import CompiledKernel, KernelLaunch, VariantResult
from kbench_ci.results.outcome import SideProfile

#: a kernel whose GPU time per call moved less than this (relative) is not named for its time alone
TIME_CHANGE = 0.02
#: changes named in the one line under a case; the rest are in its details
MAX_IN_LINE = 3
#: longest kernel name shown (CUTLASS and cuBLAS names run to hundreds of characters)
MAX_NAME = 60


def short_kernel_name(name: str) -> str:
    """A kernel's name without its return type and parameter list, cut to :data:`MAX_NAME`."""
    text = name.strip()
    if text.startswith("void "):
        text = text[len("void "):]
    if text.endswith(")"):
        depth = 0
        for index in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[index], 0)
            if depth == 0:
                text = text[:index] if index else text
                break
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"


@dataclass(frozen=True, slots=True)
class _Kernel:
    """One kernel name on one side: its largest launch shape, and all its launches together."""

    main: KernelLaunch
    share: float
    per_call: float
    us_per_call: float


def _by_name(launches: Sequence[KernelLaunch]) -> dict[str, _Kernel]:
    grouped: dict[str, list[KernelLaunch]] = {}
    for launch in launches:
        grouped.setdefault(launch.name, []).append(launch)
    return {
        name: _Kernel(
            main=max(entries, key=lambda e: e.share),
            share=sum(e.share for e in entries),
            per_call=sum(e.per_call for e in entries),
            us_per_call=sum(e.mean_us * e.per_call for e in entries),
        )
        for name, entries in grouped.items()
    }


def _base_name(name: str) -> str:
    """A kernel's name without return type, parameters or template arguments."""
    return short_kernel_name(name).split("<", 1)[0].strip()


def _triple(value: tuple[int, int, int] | None) -> str:
    if value is None:
        return "—"
    used = [str(v) for v in value]
    while len(used) > 1 and used[-1] == "1":
        used.pop()
    return "×".join(used)


def _shape_changes(base: _Kernel, head: _Kernel) -> list[str]:
    b, h = base.main, head.main
    changes: list[str] = []
    if b.registers != h.registers and None not in (b.registers, h.registers):
        changes.append(f"registers {b.registers} → {h.registers}")
    if b.shared_bytes != h.shared_bytes and None not in (b.shared_bytes, h.shared_bytes):
        changes.append(f"shared memory {b.shared_bytes:,} → {h.shared_bytes:,} B")
    if b.block != h.block:
        changes.append(f"block {_triple(b.block)} → {_triple(h.block)}")
    if b.grid != h.grid:
        changes.append(f"grid {_triple(b.grid)} → {_triple(h.grid)}")
    if b.occupancy_pct != h.occupancy_pct and None not in (b.occupancy_pct, h.occupancy_pct):
        changes.append(f"occupancy {b.occupancy_pct}% → {h.occupancy_pct}%")
    if abs(base.per_call - head.per_call) > 1e-9:
        changes.append(f"launches per call {base.per_call:g} → {head.per_call:g}")
    return changes


def launch_changes(
    base: Sequence[KernelLaunch], head: Sequence[KernelLaunch], said: Mapping[str, set[str]] | None = None
) -> list[str]:
    """What differs between the two sides' launches, most GPU time first: one phrase per kernel.
    ``said``: phrases already given per kernel name (the compiler's), not repeated for a launch
    of that kernel (``matmul_kernel<128, 256>`` is the compiler's ``matmul_kernel``)."""
    base_kernels, head_kernels = _by_name(base), _by_name(head)
    reshaped = _renamed_pairs(base_kernels.keys() - head_kernels.keys(), head_kernels.keys() - base_kernels.keys())
    weighed: list[tuple[float, str]] = []
    for base_name, head_name in reshaped.items():
        old, new = base_kernels[base_name], head_kernels[head_name]
        changes = [*_shape_changes(old, new), _time_change(old, new)]
        weighed.append((max(old.share, new.share),
                        f"{code(_base_name(head_name))} reshaped (the same kernel): " + ", ".join(changes)))
    paired = set(reshaped) | set(reshaped.values())
    for name in (base_kernels.keys() | head_kernels.keys()) - paired:
        shown = code(short_kernel_name(name))
        was, now = base_kernels.get(name), head_kernels.get(name)
        if was is None and now is not None:
            weighed.append((now.share, f"a new kernel {shown} ({share_text(now.share)} of the time)"))
        elif now is None and was is not None:
            weighed.append((was.share, f"{shown} no longer launched (was {share_text(was.share)} of the time)"))
        elif was is not None and now is not None:
            changes = _shape_changes(was, now)
            repeated = (said or {}).get(_base_name(name), set())
            changes = [change for change in changes if change not in repeated]
            if _moved(was, now) >= TIME_CHANGE:
                changes.append(_time_change(was, now))
            if changes:
                weighed.append((max(was.share, now.share), f"{shown}: " + ", ".join(changes)))
    return [text for _, text in sorted(weighed, key=lambda item: (-item[0], item[1]))]


def _renamed_pairs(gone: Iterable[str], new: Iterable[str]) -> dict[str, str]:
    """Base-only names paired with head-only names of the same kernel (equal without return type,
    parameters and template arguments), where exactly one on each side has that name: two
    instances of a template on one side cannot be told apart, and stay gone and new."""
    def by_base_name(names: Iterable[str]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {}
        for name in names:
            grouped.setdefault(_base_name(name), []).append(name)
        return grouped

    was, now = by_base_name(gone), by_base_name(new)
    return {was[key][0]: now[key][0] for key in was.keys() & now.keys() if len(was[key]) == len(now[key]) == 1}


def _moved(was: _Kernel, now: _Kernel) -> float:
    return abs(now.us_per_call / was.us_per_call - 1) if was.us_per_call > 0 else 0.0


def _time_change(was: _Kernel, now: _Kernel) -> str:
    moved = now.us_per_call / was.us_per_call - 1 if was.us_per_call > 0 else 0.0
    return f"{was.us_per_call:.3g} → {now.us_per_call:.3g} us per call ({moved * 100:+.1f}%)"


_COMPILED_FIELDS = (
    # ptxas counts spills in bytes, Triton in its own unit: no unit shown
    ("registers", "registers", ""), ("spill_stores", "spill stores", ""), ("spill_loads", "spill loads", ""),
    ("stack_bytes", "stack", " B"), ("shared_bytes", "shared memory", " B"), ("num_warps", "warps", ""),
    ("num_stages", "stages", ""),
)


def _compiled_pairs(base: Sequence[CompiledKernel], head: Sequence[CompiledKernel]) -> list[tuple[CompiledKernel, CompiledKernel]]:
    """Each base kernel with its head counterpart: by symbol, else (a C++ kernel whose parameters
    changed has a new mangled symbol) the one kernel of that name left on each side."""
    head_by_key = {kernel.key: kernel for kernel in head}
    pairs = [(was, head_by_key[was.key]) for was in base if was.key in head_by_key]
    base_left = {kernel.key: kernel for kernel in base if kernel.key not in head_by_key}
    base_keys = {kernel.key for kernel in base}
    head_left = {kernel.key: kernel for kernel in head if kernel.key not in base_keys}
    renamed = _renamed_pairs(_names(base_left), _names(head_left))
    by_name_base = {kernel.name: kernel for kernel in base_left.values()}
    by_name_head = {kernel.name: kernel for kernel in head_left.values()}
    return pairs + [(by_name_base[was], by_name_head[now]) for was, now in sorted(renamed.items())]


def _names(kernels: Mapping[str, CompiledKernel]) -> list[str]:
    """The names of kernels left unmatched, a name held by two of them given once per kernel (so
    :func:`_renamed_pairs` sees it twice and pairs neither)."""
    return [kernel.name for kernel in kernels.values()]


def compiled_changes(base: Sequence[CompiledKernel], head: Sequence[CompiledKernel]) -> list[str]:
    """What the compiler did differently, per kernel on both sides: ptxas's or Triton's figures,
    and the autotuner's pick."""
    changes = []
    for was, now in _compiled_pairs(base, head):
        parts = [
            f"{label} {getattr(was, field):,}{unit} → {getattr(now, field):,}{unit}"
            for field, label, unit in _COMPILED_FIELDS
            if getattr(was, field) != getattr(now, field) and None not in (getattr(was, field), getattr(now, field))
        ]
        if was.autotune_pick != now.autotune_pick and None not in (was.autotune_pick, now.autotune_pick):
            parts.append(f"autotuner picked {code(was.autotune_pick)} on base, {code(now.autotune_pick)} on head")
        if parts:
            changes.append(f"compiled {code(short_kernel_name(was.name))}: " + ", ".join(parts))
    return changes


def _compiled_phrases(base: Sequence[CompiledKernel], head: Sequence[CompiledKernel]) -> dict[str, set[str]]:
    """The register changes the compiler's line already names, by kernel name."""
    said: dict[str, set[str]] = {}
    for was, now in _compiled_pairs(base, head):
        if None not in (was.registers, now.registers) and was.registers != now.registers:
            said.setdefault(_base_name(was.name), set()).add(f"registers {was.registers} → {now.registers}")
    return said


def _autotuned_pairs(base: VariantResult | None, head: VariantResult | None) -> list[tuple[CompiledKernel, CompiledKernel]]:
    """Each kernel both sides compiled under one key, where both sides' autotuners picked."""
    if base is None or head is None:
        return []
    head_by_key = {kernel.key: kernel for kernel in head.compiled}
    return [
        (was, now) for was in base.compiled
        if (now := head_by_key.get(was.key)) is not None and was.autotune_pick is not None and now.autotune_pick is not None
    ]


def autotune_split(base: VariantResult | None, head: VariantResult | None) -> str | None:
    """The autotuner's picks where base and head picked differently (one phrase), else None."""
    for was, now in _autotuned_pairs(base, head):
        if was.autotune_pick != now.autotune_pick:
            return (f"{code(short_kernel_name(was.name))}: the autotuner picked {code(was.autotune_pick)} on base and "
                    f"{code(now.autotune_pick)} on head; the times compare two configs, not two sources")
    return None


def autotune_sharing(base: VariantResult | None, head: VariantResult | None) -> list[str]:
    """Per autotuned kernel that both sides compiled under one key: whether they share one pick
    or tuned apart. A side that tuned holds one compiled version per config tried; a side that
    read the pick from Triton's autotune cache (kbench-ci sets TRITON_CACHE_AUTOTUNING, keyed by
    the kernel's source) holds only the pick's."""
    said = []
    for was, now in _autotuned_pairs(base, head):
        name = short_kernel_name(was.name)
        if was.autotune_pick != now.autotune_pick:
            said.append(f"{code(name)}: tuned apart, base picked {code(was.autotune_pick)} and head {code(now.autotune_pick)}")
        elif min(was.versions or 1, now.versions or 1) <= 1:
            said.append(f"{code(name)}: one pick shared through the autotune cache, {code(was.autotune_pick)}")
        else:
            said.append(f"{code(name)}: tuned apart ({was.versions} and {now.versions} versions compiled), "
                        f"both picked {code(was.autotune_pick)}")
    return said


def why_line(base: VariantResult | None, head: VariantResult | None) -> str | None:
    """One line for a changed case: what its launches and compiled kernels did, or None where
    neither side's trace nor compiler figures are there to compare."""
    base_launches = base.escape_audit.launches if base is not None and base.escape_audit is not None else ()
    head_launches = head.escape_audit.launches if head is not None and head.escape_audit is not None else ()
    compiled = compiled_changes(base.compiled, head.compiled) if base is not None and head is not None else []
    traced = bool(base_launches and head_launches)
    if not traced and not compiled:
        return None
    said = _compiled_phrases(base.compiled, head.compiled) if base is not None and head is not None else {}
    changes = compiled + (launch_changes(base_launches, head_launches, said) if traced else [])
    if not changes:
        return "same kernels, launch shapes and resources as the base: the change is inside the kernel code"
    more = f"; {len(changes) - MAX_IN_LINE} more in the details" if len(changes) > MAX_IN_LINE else ""
    return "; ".join(changes[:MAX_IN_LINE]) + more


def launch_rows(side: str, launches: Sequence[KernelLaunch]) -> list[list[str]]:
    """The details' table rows of one side's launches."""
    return [
        [
            side, code(short_kernel_name(launch.name)), f"{launch.per_call:g}", share_text(launch.share),
            f"{launch.mean_us:.3g}", _triple(launch.grid), _triple(launch.block),
            "—" if launch.registers is None else str(launch.registers),
            "—" if launch.shared_bytes is None else f"{launch.shared_bytes:,}",
            "—" if launch.blocks_per_sm is None or launch.blocks_per_sm != launch.blocks_per_sm
            else f"{launch.blocks_per_sm:.3g}",
            "—" if launch.occupancy_pct is None else f"{launch.occupancy_pct}%",
        ]
        for launch in launches
    ]


def compiled_rows(side: str, kernels: Sequence[CompiledKernel]) -> list[list[str]]:
    """The details' table rows of what the compiler made of one side's kernels."""
    def number(value: int | None) -> str:
        return "—" if value is None else f"{value:,}"

    return [
        [side, code(short_kernel_name(kernel.name)), cell(kernel.source, 60), number(kernel.registers),
         f"{number(kernel.spill_stores)} / {number(kernel.spill_loads)}", number(kernel.stack_bytes),
         number(kernel.shared_bytes), number(kernel.num_warps), number(kernel.num_stages),
         cell_text(kernel.autotune_pick), number(kernel.versions)]
        for kernel in kernels
    ]


def cell_text(value: str | None) -> str:
    return "—" if value is None else code(str(value))


COMPILED_HEADERS = ["side", "kernel", "from", "registers", "spill stores / loads", "stack B", "shared B", "warps",
                    "stages", "autotune pick", "compiled versions"]

#: "grid ÷ SMs" is CUPTI's "blocks per SM": the grid's blocks over the SM count, not the blocks
#: resident on an SM at once (the occupancy says that); headed "blocks/SM", 496 read as the latter
LAUNCH_HEADERS = ["side", "kernel", "per call", "GPU time", "us each", "grid", "block", "registers",
                  "shared B", "grid ÷ SMs", "occupancy (est.)"]


def _weighted(profile: SideProfile, field: str) -> float | None:
    """A percentage over the call's kernels, each weighted by its duration."""
    pairs = [(getattr(k, field), k.duration_ns) for k in profile.kernels if getattr(k, field) is not None and k.duration_ns]
    total = sum(weight for _, weight in pairs)
    return sum(value * weight for value, weight in pairs) / total if total else None


def _total(profile: SideProfile, field: str) -> float | None:
    values = [getattr(k, field) for k in profile.kernels if getattr(k, field) is not None]
    return sum(values) if values else None


_PROFILE_ROWS: tuple[tuple[str, Callable[[SideProfile], float | None], float, str], ...] = (
    ("GPU time of the call (us)", lambda p: _total(p, "duration_ns"), 1e-3, "{:,.2f}"),
    ("DRAM read (MB)", lambda p: _total(p, "dram_read_bytes"), 1e-6, "{:,.2f}"),
    ("DRAM written (MB)", lambda p: _total(p, "dram_write_bytes"), 1e-6, "{:,.2f}"),
    ("achieved occupancy (%)", lambda p: _weighted(p, "occupancy_pct"), 1.0, "{:.1f}"),
    ("SM throughput (% of peak)", lambda p: _weighted(p, "sm_throughput_pct"), 1.0, "{:.1f}"),
    ("memory throughput (% of peak)", lambda p: _weighted(p, "memory_throughput_pct"), 1.0, "{:.1f}"),
)


def profile_lines(profiles: Sequence[SideProfile]) -> list[str]:
    """``--profile``: ncu's figures of base and head side by side, and why a side has none."""
    if not profiles:
        return []
    lines = ["ncu, one warm call per side (`--clock-control none`; kernels summed, percentages weighted by time):", ""]
    measured = [p for p in profiles if p.kernels]
    if measured:
        rows = []
        for label, read, scale, text in _PROFILE_ROWS:
            cells = [read(p) for p in measured]
            rows.append([label, *("—" if value is None else text.format(value * scale) for value in cells)])
        lines += [table(["", *(p.label for p in measured)], rows), ""]
    lines += [f"- {p.label}: not profiled: {cell(p.problem, 600)}" for p in profiles if p.problem]
    return [*lines, ""] if any(p.problem for p in profiles) else lines
