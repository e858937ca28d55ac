"""The one reader of results.json: ``merge``, ``history record``, ``comment`` and the action's
summary and gate steps all read it through :func:`load_results`, so a file that is not as
kbench-ci wrote it gets the same one-line refusal (:class:`~kbench_ci.errors.ResultsFileError`,
exit 2) from each of them before any of them acts on it.

A results.json is untrusted input: a downloaded artifact in the fork recipe, a folder a kernel
could write on the runner. So, in this order:

1. it is opened without following a link (``O_NOFOLLOW``) and without blocking (``O_NONBLOCK``:
   a FIFO would hang the reader), and anything ``fstat`` does not call a regular file is refused;
2. at most :data:`MAX_BYTES` are read, and a larger file is refused;
3. the nesting of brackets outside strings is counted before parsing: ``json`` recurses once per
   level, and a file nested 200,000 deep would end in a RecursionError instead of a message;
4. it is parsed with NaN, Infinity and numbers beyond a float (``1e999``) refused (kbench-ci
   writes NaN as null and infinities as the strings "inf"/"-inf"), and a key twice in one
   object refused (json keeps the last, so ``"gate"`` twice could say two things);
5. its ``schema`` must be one the caller reads and its ``schema_version`` one this kbench-ci
   knows (a newer one is refused: its fields may mean something else);
6. every field any reader reads is type-checked where present (with ``strict``, as ``merge``
   needs to rebuild the report, the fields the writers always write must be there too),
   samples must be finite numbers >= 0, and no case id may be there twice.

Standard library only (no model types, no numpy): the fork recipe's comment workflow runs this
under ``python -S`` with nothing installed.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbench_ci.errors import ResultsFileError
from kbench_ci.results.versions import BENCH_SCHEMA, COMPARE_SCHEMA, RUN_SCHEMA, SCHEMA_VERSIONS

__all__ = ["MAX_BYTES", "MAX_DEPTH", "VERDICTS", "ResultsFile", "load_results", "read_json", "validate_results"]

#: far more than any results.json kbench-ci writes (a thousand cases of raw samples are a few MiB)
MAX_BYTES = 64 * 1024 * 1024
#: kbench-ci's own results.json nest about a dozen levels deep
MAX_DEPTH = 64
#: :class:`kbench_ci.stats.Verdict`'s values (not imported: numpy); a test keeps the two equal
VERDICTS = ("slower", "faster", "unchanged", "inconclusive", "incorrect", "fixed", "failed", "added", "removed")
RUN_STATUSES = ("ok", "incorrect", "failed")

_REGENERATE = "regenerate it with kbench-ci; a results.json is only ever written by kbench-ci, so this one was edited or damaged"


@dataclass(frozen=True, slots=True)
class ResultsFile:
    """A results.json as read and checked: its path, schema, version and the parsed object."""

    path: Path
    schema: str
    version: int
    data: Mapping[str, Any]

    @property
    def command(self) -> str:
        """The command that wrote it: ``run``, ``compare`` or ``bench``."""
        return self.schema.rsplit("/", 1)[-1]


def load_results(
    path: Path, *, accept: Collection[str] = (RUN_SCHEMA, COMPARE_SCHEMA), reader: str, strict: bool = False,
) -> ResultsFile:
    """``path`` read, parsed and checked as described in the module's docstring.

    ``accept``: the schemas the caller reads; ``reader``: its name for the message (``kbench-ci
    merge``); ``strict``: the fields the writers always write must all be there.
    FileNotFoundError when there is no such file (the callers say what to run); ResultsFileError
    for everything else."""
    return validate_results(read_json(path), path, accept=accept, reader=reader, strict=strict)


def read_json(path: Path) -> Any:
    """Steps 1 to 4 of the module's docstring: ``path`` parsed, whatever its shape (a
    ``--shard-timings`` file may be a results.json or a ``{case_id: seconds}`` map)."""
    text = _read_text(path)
    _check_depth(path, text)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                          object_pairs_hook=_no_duplicate_keys)
    except _Invalid as exc:
        raise ResultsFileError(f"{path} {exc.problem}", hint=_REGENERATE) from None
    except ValueError as exc:  # JSONDecodeError, and an integer of more digits than int() takes
        raise ResultsFileError(f"cannot read {path}: not JSON ({exc})", hint=_REGENERATE) from None


def validate_results(
    data: Any, path: Path, *, accept: Collection[str] = (RUN_SCHEMA, COMPARE_SCHEMA), reader: str, strict: bool = False,
) -> ResultsFile:
    """Steps 5 and 6 of the module's docstring on an already parsed ``data`` (named ``path``)."""
    if not isinstance(data, dict):
        raise ResultsFileError(f"{path} holds {_show(data)}, not a results object", hint=_REGENERATE)
    schema, version = data.get("schema"), data.get("schema_version")
    names = " or ".join(f"`kbench-ci {s.rsplit('/', 1)[-1]}`" for s in sorted(accept))
    if not isinstance(schema, str) or schema not in SCHEMA_VERSIONS:
        what = f"of schema {_show(schema)}" if "schema" in data else "with no 'schema'"
        raise ResultsFileError(f"{path} is a JSON file {what}, not a kbench-ci results.json",
                               hint=f"{reader} reads the results.json of {names}")
    if schema not in accept:
        raise ResultsFileError(f"{path} is a results.json of `kbench-ci {schema.rsplit('/', 1)[-1]}` ('{schema}'), "
                               f"not of {names}", hint=f"{reader} reads the results.json of {names}")
    newest = SCHEMA_VERSIONS[schema]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ResultsFileError(f"{path} has schema_version {_show(version)}, not a version of '{schema}' (1..{newest})",
                               hint=_REGENERATE)
    if version > newest:
        raise ResultsFileError(
            f"{path} has schema_version {version} of '{schema}', newer than this kbench-ci reads (up to {newest})",
            hint="read it with the kbench-ci that wrote it (its tool_version), or upgrade kbench-ci",
        )
    try:
        _TOP[schema](data, "", strict)
    except _Invalid as exc:
        raise ResultsFileError(f"{path}: {exc.where} {exc.problem}", hint=_REGENERATE) from None
    return ResultsFile(path=path, schema=schema, version=version, data=data)


# -- reading the bytes --------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise ResultsFileError(
                f"{path.name} in {path.parent} is a symbolic link; refusing to follow it out of the folder",
                hint="a report folder holds results.json as a plain file; regenerate it with kbench-ci",
            ) from None
        raise ResultsFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise ResultsFileError(f"{path} is {kind}, not a regular file", hint=_REGENERATE)
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ResultsFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise ResultsFileError(f"{path} is larger than {MAX_BYTES // (1024 * 1024)} MiB, more than kbench-ci writes",
                               hint=_REGENERATE)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsFileError(f"cannot read {path}: not UTF-8 text (byte {exc.start})", hint=_REGENERATE) from None


# A string (escapes included) or one bracket: brackets inside strings are not nesting.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _check_depth(path: Path, text: str) -> None:
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                raise ResultsFileError(
                    f"{path} nests objects or lists more than {MAX_DEPTH} deep (at byte {match.start()}); "
                    "kbench-ci's own nest about a dozen", hint=_REGENERATE,
                )
        elif token in ("]", "}"):
            depth -= 1


class _Invalid(ValueError):
    """One problem at one place of the file; ``where`` reads like ``cases[3].head.rounds_ms[0][2]``."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where} {problem}")
        self.where = where or "the top level"
        self.problem = problem


def _refuse_constant(name: str) -> Any:
    raise _Invalid("", f"holds {name}, which is not JSON (kbench-ci writes NaN as null and infinities as \"inf\"/\"-inf\")")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise _Invalid("", f"holds the number {text[:40]}, beyond what a float holds")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Invalid("", f"has the key {json.dumps(key)[:60]} twice in one object (JSON readers keep either one)")
        found[key] = value
    return found


# -- the fields, by who reads them ---------------------------------------------------------------

#: a check of one value: the value, where it is, and whether the reader is strict
Check = Callable[[Any, str, bool], None]


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    # parse_float already refused NaN and infinities
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(expected: str, test: Callable[[Any], bool]) -> Check:
    def check(value: Any, where: str, strict: bool) -> None:
        if not test(value):
            raise _Invalid(where, f"is {_show(value)}, not {expected}")
    return check


def _anything(value: Any, where: str, strict: bool) -> None:
    """A field read as it is (shown, never computed with)."""


STR = _kind("a string", lambda v: isinstance(v, str))
BOOL = _kind("true or false", lambda v: isinstance(v, bool))
INT = _kind("a whole number", _is_int)
COUNT = _kind("a whole number >= 0", lambda v: _is_int(v) and v >= 0)
POSITIVE = _kind("a whole number >= 1", lambda v: _is_int(v) and v >= 1)
NUMBER = _kind("a number", _is_number)
#: a latency sample: NaN, infinities, negatives and strings are no measurement
SAMPLE = _kind("a finite number >= 0 (a sample in ms)", lambda v: _is_number(v) and v >= 0)
#: a float as the writers encode it: a number, "inf"/"-inf", or null for NaN
FLOAT = _kind('a number, "inf", "-inf" or null', lambda v: v is None or _is_number(v) or v in ("inf", "-inf"))
OBJECT = _kind("an object", lambda v: isinstance(v, dict))


def _optional(check: Check) -> Check:
    def optional(value: Any, where: str, strict: bool) -> None:
        if value is not None:
            check(value, where, strict)
    return optional


def _one_of(*values: str) -> Check:
    return _kind("one of " + ", ".join(f"'{v}'" for v in values), lambda v: isinstance(v, str) and v in values)


def _list(item: Check, *, length: int | None = None) -> Check:
    def check(value: Any, where: str, strict: bool) -> None:
        if not isinstance(value, list):
            raise _Invalid(where, f"is {_show(value)}, not a list")
        if length is not None and len(value) != length:
            raise _Invalid(where, f"holds {len(value)} values, not {length}")
        for index, entry in enumerate(value):
            item(entry, f"{where}[{index}]", strict)
    return check


def _map(entry: Check) -> Check:
    """An object whose keys are names (a case's dims, the gate's counts)."""
    def check(value: Any, where: str, strict: bool) -> None:
        if not isinstance(value, dict):
            raise _Invalid(where, f"is {_show(value)}, not an object")
        for key, item in value.items():
            entry(item, f"{where}.{key}", strict)
    return check


def _object(
    fields: Mapping[str, Check], *, core: Sequence[str] = (), need: Sequence[str] = (), closed: bool = False,
    also: Callable[[dict[str, Any], str], None] | None = None,
) -> Check:
    """An object: each of ``fields`` checked where present; ``core`` must be there, ``need`` too
    when strict; ``closed``: no other key (read with ``**``); ``also``: a check across fields."""
    def check(value: Any, where: str, strict: bool) -> None:
        if not isinstance(value, dict):
            raise _Invalid(where, f"is {_show(value)}, not an object")
        for key in (*core, *(need if strict else ())):
            if key not in value:
                raise _Invalid(where, f"has no '{key}'")
        for key, item in value.items():
            field = fields.get(key)
            if field is not None:
                field(item, f"{where}.{key}" if where else key, strict)
            elif closed:
                raise _Invalid(f"{where}.{key}" if where else key, "is not a field kbench-ci writes")
        if also is not None:
            also(value, where)
    return check


def _cases(case: Check) -> Check:
    """The ``cases`` list: each an object with a case id of its own (a case id twice would be
    counted twice by the history and picked arbitrarily by merge)."""
    def check(value: Any, where: str, strict: bool) -> None:
        if not isinstance(value, list):
            raise _Invalid(where, f"is {_show(value)}, not a list")
        seen: dict[str, int] = {}
        for index, entry in enumerate(value):
            place = f"{where}[{index}]"
            case(entry, place, strict)
            case_id = entry["case_id"]
            if case_id in seen:
                raise _Invalid(place, f"repeats case id {_show(case_id)} of {where}[{seen[case_id]}]: a case is there once")
            seen[case_id] = index
    return check


def _estimate_complete(data: dict[str, Any], where: str) -> None:
    """A ratio read back needs its interval and round count (``read._estimate``)."""
    if data.get("ratio") is None:
        return
    for key in ("ci_low", "ci_high", "p_value"):
        if key not in data:
            raise _Invalid(where, f"has a ratio but no '{key}'")
    if not _is_int(data.get("n_rounds")):
        raise _Invalid(f"{where}.n_rounds", f"is {_show(data.get('n_rounds'))}, not a whole number (there is a ratio)")


def _shard_consistent(data: dict[str, Any], where: str) -> None:
    index, count = data.get("index"), data.get("count")
    if isinstance(index, int) and isinstance(count, int) and index > count:
        raise _Invalid(where, f"is shard {index} of {count}")


LAUNCH = _object({
    "name": STR, "per_call": NUMBER, "share": FLOAT, "mean_us": FLOAT, "grid": _optional(_list(INT, length=3)),
    "block": _optional(_list(INT, length=3)), "registers": _optional(COUNT), "shared_bytes": _optional(COUNT),
    "blocks_per_sm": FLOAT, "occupancy_pct": _optional(NUMBER),
}, need=("name", "per_call", "share", "mean_us"))
ESCAPE_AUDIT = _object({
    "status": STR, "event_ms": _list(FLOAT), "cupti_span_ms": _list(FLOAT), "escaped_ms": _list(FLOAT),
    "streams": _list(INT), "detail": _optional(STR), "cost_s": NUMBER, "launches": _list(LAUNCH),
}, need=("status",))
OUTSIDE_CLOCK = _object({
    "source": STR, "calls": COUNT, "gap_us": FLOAT, "pre_us": FLOAT, "post_us": FLOAT, "reference": _optional(STR),
    "reference_gap_us": _optional(FLOAT), "reference_pre_us": _optional(FLOAT), "reference_post_us": _optional(FLOAT),
    "resolution_us": _optional(FLOAT), "finding": _optional(STR), "span_us": _list(FLOAT), "reported_us": _list(FLOAT),
    "pre_call_us": _list(FLOAT), "post_call_us": _list(FLOAT), "lead_us": _optional(FLOAT),
    "reference_lead_us": _optional(FLOAT), "batch_calls": COUNT, "counted_us": FLOAT,
}, need=("source", "calls", "gap_us", "pre_us", "post_us"))
SPEED_OF_LIGHT = _object({
    "source": STR, "bytes": _optional(NUMBER), "flops": _optional(NUMBER), "median_ms": NUMBER,
    "copy_bytes_per_s": _optional(NUMBER), "matmul_flops_per_s": _optional(NUMBER), "matmul_dtype": _optional(STR),
    "floor_ms": _optional(NUMBER),
}, need=("source", "median_ms"))
#: read with CompiledKernel(**entry): no other key
COMPILED = _object({
    "name": STR, "source": _one_of("ptxas", "triton"), "registers": _optional(COUNT), "spill_stores": _optional(COUNT),
    "spill_loads": _optional(COUNT), "stack_bytes": _optional(COUNT), "shared_bytes": _optional(COUNT),
    "num_warps": _optional(COUNT), "num_stages": _optional(COUNT), "autotune_pick": _optional(STR),
    "versions": _optional(COUNT), "symbol": _optional(STR),
}, core=("name", "source"), closed=True)
OUTPUT_CHECK = _object({
    "name": STR, "passed": BOOL, "problem": _optional(STR), "max_abs_error": FLOAT, "max_rel_error": FLOAT,
    "mismatched": COUNT, "numel": COUNT, "atol": _optional(NUMBER), "rtol": _optional(NUMBER), "tolerance_source": STR,
    "first_mismatch": _optional(_list(_anything)),
}, core=("name", "passed", "problem", "max_abs_error", "max_rel_error", "mismatched", "numel", "atol", "rtol",
         "tolerance_source"))
TRIAL = _object({"seed": INT, "outputs": _list(OUTPUT_CHECK), "modified_inputs": _list(STR), "error": _optional(STR)},
                core=("seed", "outputs", "modified_inputs", "error"))
CORRECTNESS = _object({"trials": _list(TRIAL)}, core=("trials",))
VARIANT = _object({
    "label": STR, "kind": STR, "role": STR, "status": STR, "message": _optional(STR), "correctness": _optional(CORRECTNESS),
    "rounds_ms": _list(_list(SAMPLE)), "round_versions": _list(_list(INT)), "discarded_ms": _list(NUMBER),
    "first_call_ms": _optional(NUMBER), "compile_ms": _optional(NUMBER), "post_timing_check": _optional(BOOL),
    "fresh_inputs": _optional(STR), "timing_shift_ms": _optional(NUMBER), "escape_audit": _optional(ESCAPE_AUDIT),
    "speed_of_light": _optional(SPEED_OF_LIGHT), "compiled": _list(COMPILED), "notes": _list(STR),
    "not_timed": _optional(STR), "outside_clock": _optional(OUTSIDE_CLOCK),
}, need=("label", "kind", "role", "status"))
BUILD = _object({
    "side": STR, "kernel": STR, "ok": BOOL, "seconds": NUMBER, "command": _optional(STR), "message": _optional(STR),
    "compiler_output": _optional(STR), "cached": BOOL,
}, core=("side", "kernel", "ok", "seconds"))
PHASES = _object({key: NUMBER for key in ("build", "load", "correctness", "timing", "audit", "total")})
ESTIMATE = _object({
    "ratio": FLOAT, "ci_low": FLOAT, "ci_high": FLOAT, "p_value": FLOAT, "n_rounds": _optional(COUNT),
    "confidence": NUMBER, "round_ratios": _optional(_list(FLOAT)),
}, also=_estimate_complete)
#: a baseline is read for its result only
BASELINE = _object({"result": _optional(VARIANT)})
#: ProfiledKernel(**kernel): no other key
PROFILED_KERNEL = _object({
    "name": STR, **{key: _optional(NUMBER) for key in (
        "duration_ns", "dram_read_bytes", "dram_write_bytes", "occupancy_pct", "sm_throughput_pct", "memory_throughput_pct")},
}, core=("name",), closed=True)
SIDE_PROFILE = _object({"label": STR, "problem": _optional(STR), "kernels": _list(PROFILED_KERNEL)}, core=("label",))
#: the fields of a case's measurement (``read._case_result``)
MEASURED = {
    "timing_method": _optional(STR), "timing_description": _optional(STR), "event_overhead_ms": _optional(NUMBER),
    "cupti_residual_ms": _optional(NUMBER), "error": _optional(STR), "gpu_state_before": _optional(OBJECT),
    "gpu_state_after": _optional(OBJECT), "seconds": PHASES,
}
MEASUREMENT = _object({
    **MEASURED, "verdict": _one_of(*VERDICTS), "message": _optional(STR), "rounds": COUNT, "estimate": _optional(ESTIMATE),
    "base": _optional(VARIANT), "head": _optional(VARIANT),
}, core=("verdict", "rounds"))
COMPARE_CASE = _object({
    **MEASURED, "case_id": STR, "kernel": STR, "dims": _map(INT), "verdict": _one_of(*VERDICTS), "threshold": NUMBER,
    "accepted": BOOL, "goalposts": _list(STR), "ratio": FLOAT, "ci_low": FLOAT, "ci_high": FLOAT, "p_value": FLOAT,
    "n_rounds": _optional(COUNT), "round_ratios": _optional(_list(FLOAT)), "base": _optional(VARIANT),
    "head": _optional(VARIANT), "baselines": _list(BASELINE), "message": _optional(STR), "profile": _list(SIDE_PROFILE),
    "implementation": _object({"base": _optional(STR), "head": _optional(STR)}),
    "first_measurement": _optional(MEASUREMENT), "builds": _object({"base": _optional(BUILD), "head": _optional(BUILD)}),
    "gpu": _optional(STR), "user_error": _optional(STR),
}, core=("case_id",), need=("kernel", "dims", "verdict", "threshold"), also=_estimate_complete)
RUN_CASE = _object({
    **MEASURED, "case_id": STR, "kernel": STR, "dims": _map(INT), "implementation": STR, "status": _one_of(*RUN_STATUSES),
    "message": _optional(STR), "median_ms": _optional(SAMPLE), "n_samples": _optional(COUNT), "result": _optional(VARIANT),
    "baselines": _list(BASELINE), "build": _optional(BUILD), "throttle_reasons": _list(STR), "gpu": _optional(STR),
    "user_error": _optional(STR),
}, core=("case_id",), need=("kernel", "dims", "status", "implementation"))
GATE = _object({
    "passed": BOOL, "complete": BOOL, "summary": STR, "counts": _map(COUNT), "accepted_cases": _list(STR),
    "failing_cases": _list(STR),
}, need=("passed",))
SETTINGS = _object({
    "device": STR, "seed": INT, "correctness_trials": COUNT, "timing_method": STR, "num_warmup": COUNT,
    "trials_per_round": COUNT, "discard_first": COUNT, "rounds": COUNT, "cache_mode": _one_of("cold", "warm"),
    "trials_per_round_rule": _optional(STR), "time_budget_s": FLOAT, "max_geomean_slowdown": _optional(NUMBER),
    "remeasure_rounds": _optional(COUNT), "base_mode": _optional(STR), "threshold_override": _optional(NUMBER),
    "case_timeout_s": _optional(NUMBER), "kernels": _list(STR), "accept": _list(STR), "accept_reason": _optional(STR),
    "seeds": _list(INT),
}, need=("device", "seed", "correctness_trials", "timing_method", "num_warmup", "trials_per_round", "discard_first", "rounds"))
REVISION = _object({
    "ref": _optional(STR), "sha": _optional(STR), "description": STR, "tree": STR, "mode": _optional(STR),
    "merge_base_of": _optional(STR), "config": _optional(STR), "note": _optional(STR),
}, need=("description", "tree"))
SHARD = _object({
    "index": POSITIVE, "count": POSITIVE, "all_case_ids": _list(STR), "case_ids": _list(STR),
    "balanced_by": _one_of("count", "timings"), "timings_file": _optional(STR), "commit": _optional(STR),
}, core=("index", "count", "all_case_ids", "case_ids"), also=_shard_consistent)
ENVIRONMENT = _optional(_object({"gpu_name": _optional(STR), "device": _optional(STR)}))
SECONDS = _object({"wall": _optional(NUMBER), "setup": _optional(NUMBER)})
SELECTION = _object({
    "not_affected": _list(STR), "reasons": _map(_list(STR)), "everything_reason": _optional(STR), "notes": _list(STR),
})

_TOP: dict[str, Check] = {
    COMPARE_SCHEMA: _object({
        "gate": GATE, "base": REVISION, "head": REVISION, "settings": SETTINGS, "environment": ENVIRONMENT,
        "seconds": SECONDS, "cases": _cases(COMPARE_CASE), "shard": _optional(SHARD), "changed_only": _optional(SELECTION),
    }, core=("cases",), need=("gate", "base", "head", "settings")),
    RUN_SCHEMA: _object({
        "gate": GATE, "config": _optional(STR), "settings": SETTINGS, "environment": ENVIRONMENT, "seconds": SECONDS,
        "cases": _cases(RUN_CASE), "shard": _optional(SHARD),
        "commit": _optional(_object({"sha": _optional(STR), "dirty": BOOL})),
    }, core=("cases",), need=("gate", "settings")),
    BENCH_SCHEMA: _object({
        "environment": ENVIRONMENT,
        "case": _object({**MEASURED, "case_id": STR, "dims": _map(INT), "seed": INT, "variants": _list(VARIANT)},
                        core=("case_id", "seed")),
    }, need=("case",)),
}
