"""``kbench-ci merge``: the result folders of a runner matrix's shards joined into one results.json
and one benchmark.md, with one gate recomputed from all cases.

Each folder holds the results.json of ``compare --shard K/N`` (or ``run --shard K/N``), which
records its shard and the case ids of all shards. The shards add up to one run only when every
shard 1..N is there once, all of the same count, the same commits and the same plan, every case is
in exactly one shard and every shard finished: anything else is a :class:`ShardProblem` that
names the shard, and the merged gate cannot pass (``complete`` is false).

The cases are read back into the same frozen types the commands wrote them from
(:mod:`kbench_ci.results.read`), judged by the same :func:`~kbench_ci.results.decide.gate_by_model`
(as the action's summary and gate steps judge a results.json) and rendered by the same report
code, with a GPU column when the shards ran on different GPU models. The geometric mean of
head/base is taken per GPU model: a ratio measured on one GPU says nothing about another.

A matrix may also run the whole suite on each of several GPU models (each model's jobs split it
into shards of their own): when one shard index ran on more than one model, the shards of each
model must add up on their own, every model measures the same commits and cases, each case is
reported once per model (a section per model in benchmark.md, ``gpu`` on each case in
results.json), and the gate is over all of them. Nothing here prints.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from kbench_ci.errors import MergeInputError, UsageError
from kbench_ci.report.compare import render_compare
from kbench_ci.report.markdown import cell, code
from kbench_ci.report.run import render_run
from kbench_ci.results.atomic import write_json_atomically, write_text_atomically
from kbench_ci.results.decide import GpuGeomean, evaluate_gate, gate_by_model, percent
from kbench_ci.results.load import load_results
from kbench_ci.results.outcome import (
    ALPHA,
    BASE,
    HEAD,
    TIMED_VERDICTS,
    CaseComparison,
    CompareOutcome,
    CompareRequest,
    RunCase,
    RunOutcome,
    RunRequest,
    ShardRecord,
    UserFailure,
)
from kbench_ci.results.read import (
    compare_case_from_json,
    revision_from_json,
    run_case_from_json,
    selection_from_json,
    settings_from_json,
    shard_from_json,
)
from kbench_ci.results.schema import COMPARE_SCHEMA, RUN_SCHEMA
from kbench_ci.results.writers import compare_payload, run_payload
from kbench_ci.stats import Verdict, classify
from kbench_ci.suite.shards import assign_shards

__all__ = [
    "MergeOutcome", "MergeRequest", "ShardCheck", "ShardProblem", "ShardSource", "check_shards", "merge_shards", "read_shard",
]

CaseT = TypeVar("CaseT")

RESULTS = "results.json"
REPORT = "benchmark.md"
Command = Literal["compare", "run"]
_COMMANDS: Mapping[str, Command] = {COMPARE_SCHEMA: "compare", RUN_SCHEMA: "run"}


@dataclass(frozen=True, slots=True)
class MergeRequest:
    directories: tuple[Path, ...]
    output_dir: Path
    #: re-judge every timed case's recorded ratio at this threshold (None: each shard's verdict)
    threshold: float | None = None
    #: the limit of the geometric mean per GPU model (None: the shards' own)
    max_geomean_slowdown: float | None = None
    no_fail: bool = False
    job_note: str | None = None
    command_line: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ShardSource:
    """One shard's result folder as read: what it measured, where, and on which commits."""

    directory: Path
    command: Command
    shard: ShardRecord
    #: True when the results.json had no shard (a plain run: merged as shard 1/1)
    unsharded: bool
    gpu: str
    #: compare: (base sha, head sha); run: (commit,)
    commits: tuple[str | None, ...]
    complete: bool
    measured: tuple[str, ...]
    payload: Mapping[str, Any]

    @property
    def label(self) -> str:
        return self.shard.label

    def describe(self) -> str:
        return f"shard {self.label} ({self.directory})"


@dataclass(frozen=True, slots=True)
class ShardProblem:
    """Why the shards do not add up to one run; ``shard`` names the one at fault."""

    shard: str
    message: str
    #: the cases it leaves unmeasured or measured twice
    cases: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"shard": self.shard, "message": self.message, "cases": list(self.cases)}


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    command: Command
    sources: tuple[ShardSource, ...]
    problems: tuple[ShardProblem, ...]
    passed: bool
    summary: str
    failing: tuple[str, ...]
    geomeans: tuple[GpuGeomean, ...]
    results_path: Path
    report_path: Path
    #: the failing cases whose cause is the user's ref.py, setup() or settings (their shards'
    #: ``user_error``), and whether any case failed for a reason of its kernel's: merge then
    #: exits as the unsharded command would (2 only when every failing case is the user's)
    user_failures: tuple[UserFailure, ...] = ()
    kernel_failed: bool = True

    @property
    def complete(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------------------------
# Reading one folder
# --------------------------------------------------------------------------------------------


def read_shard(directory: Path) -> ShardSource:
    """The results.json in ``directory``; MergeInputError for a folder without one,
    ResultsFileError for one that is not a run's or a compare's as kbench-ci wrote it."""
    fix = "pass the --output-dir of `kbench-ci compare --shard K/N` or `kbench-ci run --shard K/N` (a downloaded shard artifact)"
    if not directory.is_dir():
        raise MergeInputError(f"{directory} is not a folder", hint=fix)
    path = directory / RESULTS
    try:
        # The one reader: no link followed, no FIFO waited on, every field merge reads checked.
        data = load_results(path, accept=tuple(_COMMANDS), reader="kbench-ci merge", strict=True).data
    except FileNotFoundError:
        raise MergeInputError(f"{directory} has no {RESULTS}", hint=fix) from None
    command = _COMMANDS[str(data["schema"])]
    measured = tuple(str(case["case_id"]) for case in data["cases"])
    recorded = shard_from_json(data.get("shard"))
    gate = data["gate"]
    environment = data.get("environment") or {}
    if command == "compare":
        commits: tuple[str | None, ...] = (data[BASE].get("sha"), data[HEAD].get("sha"))
    else:
        commits = (recorded.commit if recorded is not None else None,)
    shard = recorded or ShardRecord(1, 1, all_case_ids=tuple(sorted(set(measured))), case_ids=tuple(sorted(set(measured))))
    return ShardSource(
        directory=directory, command=command, shard=shard, unsharded=recorded is None,
        gpu=str(environment.get("gpu_name") or environment.get("device") or "cpu"), commits=commits,
        complete=bool(gate.get("complete", True)), measured=measured, payload=data,
    )


# --------------------------------------------------------------------------------------------
# Do the shards add up?
# --------------------------------------------------------------------------------------------


def _commit_text(source: ShardSource) -> str:
    if source.command == "compare":
        base, head = source.commits
        return f"base {str(base)[:12]}, head {str(head)[:12]}"
    return f"commit {str(source.commits[0])[:12]}"


@dataclass(frozen=True, slots=True)
class ShardCheck:
    problems: tuple[ShardProblem, ...]
    #: the shards whose cases count: of the first shard's count, commits and plan, each index once
    #: (per GPU model, when ``per_model``)
    counted: tuple[ShardSource, ...]
    #: the whole suite ran on each of several GPU models (see the module doc)
    per_model: bool = False

    def picked(self) -> list[tuple[ShardSource, dict[str, Any]]]:
        """Each case once (once per GPU model when ``per_model``), with the shard that measured it."""
        if not self.per_model:
            return _cases_by_shard(self.counted)
        models = sorted({s.gpu for s in self.counted})
        return [pair for model in models for pair in _cases_by_shard([s for s in self.counted if s.gpu == model])]


def runs_per_model(sources: Sequence[ShardSource]) -> bool:
    """True when the same shard index ran on more than one GPU model: the whole suite on each."""
    models_of: dict[int, set[str]] = {}
    for source in sources:
        models_of.setdefault(source.shard.index, set()).add(source.gpu)
    return any(len(models) > 1 for models in models_of.values())


def check_shards_per_model(sources: Sequence[ShardSource]) -> ShardCheck:
    """The shards of each GPU model must add up on their own (each model may split the suite into
    its own count), and every model must measure the same commits and cases as the first."""
    first = sources[0]
    problems: list[ShardProblem] = []
    counted: list[ShardSource] = []
    for model in sorted({s.gpu for s in sources}):
        group = [s for s in sources if s.gpu == model]
        lead = group[0]
        if lead.commits != first.commits:
            problems.append(ShardProblem(f"{lead.label} on {model}", f"{model}: {lead.describe()} measured "
                                         f"{_commit_text(lead)}, {first.gpu} {_commit_text(first)}: shards of different commits"))
            continue
        if set(lead.shard.all_case_ids) != set(first.shard.all_case_ids):
            problems.append(ShardProblem(f"{lead.label} on {model}", f"{model}: {lead.describe()} planned other cases than "
                                         f"{first.gpu} (a different suite, --kernel or kbench.toml): give every job the same options"))
            continue
        check = check_shards(group)
        problems += [replace(p, shard=f"{p.shard} on {model}", message=f"{model}: {p.message}") for p in check.problems]
        counted += check.counted
    return ShardCheck(tuple(problems), tuple(counted), per_model=True)


def check_shards(sources: Sequence[ShardSource]) -> ShardCheck:
    """Every way the shards fail to add up to one run, each naming its shard."""
    problems: list[ShardProblem] = []
    first = sources[0]
    count = first.shard.count
    plan = set(first.shard.all_case_ids)
    seen: dict[int, ShardSource] = {}
    for source in sources:
        if source.shard.count != count:
            problems.append(ShardProblem(source.label, f"{source.describe()} is from a split into {source.shard.count}, "
                                         f"shard {first.label} from one into {count}: give every job the same --shard K/{count}"))
        elif source.commits != first.commits:
            problems.append(ShardProblem(source.label, f"{source.describe()} measured {_commit_text(source)}, "
                                         f"shard {first.label} {_commit_text(first)}: shards of different commits"))
        elif set(source.shard.all_case_ids) != plan:
            problems.append(ShardProblem(source.label, f"{source.describe()} planned other cases than shard {first.label} "
                                         "(a different suite, --kernel or kbench.toml): give every job the same options"))
        elif source.shard.index in seen:
            problems.append(ShardProblem(source.label, f"shard {source.label} is there twice: "
                                         f"{seen[source.shard.index].directory} and {source.directory}"))
        else:
            seen[source.shard.index] = source
    owner: dict[str, str] = {}
    for source in seen.values():
        for case_id in source.measured:
            if case_id not in plan:
                problems.append(ShardProblem(source.label, f"shard {source.label} measured {case_id}, which is in no shard's plan",
                                             (case_id,)))
            elif case_id in owner:
                problems.append(ShardProblem(source.label, f"{case_id} is in shard {owner[case_id]} and shard {source.label}",
                                             (case_id,)))
            else:
                owner[case_id] = source.label
        unfinished = sorted(set(source.shard.case_ids) - set(source.measured))
        if not source.complete or unfinished:
            problems.append(ShardProblem(source.label, f"shard {source.label} ({source.directory}) did not finish: "
                                         f"{len(unfinished)} of its {len(source.shard.case_ids)} cases not measured",
                                         tuple(unfinished)))
    by_count = assign_shards(plan, count) if first.shard.balanced_by == "count" else None
    assigned = {c for s in seen.values() for c in s.shard.case_ids}
    for index in range(1, count + 1):
        if index in seen:
            continue
        # Its share is a pure function of the plan: exactly known when the split was by count;
        # by timings (the file is not here), the cases no present shard was given.
        share = sorted(c for c, k in by_count.items() if k == index) if by_count is not None \
            else sorted(plan - assigned)
        problems.append(ShardProblem(f"{index}/{count}", f"shard {index}/{count} is missing: no result folder for it"
                                     + (f", so {len(share)} cases were not measured" if share else ""), tuple(share)))
    return ShardCheck(tuple(problems), tuple(seen[k] for k in sorted(seen)))


# --------------------------------------------------------------------------------------------
# Merging
# --------------------------------------------------------------------------------------------


def merge_shards(request: MergeRequest) -> MergeOutcome:
    """Read, check and join the shards; write results.json (first) and benchmark.md."""
    if not request.directories:
        raise UsageError("merge needs at least one result folder", hint="kbench-ci merge shard-1 shard-2 shard-3")
    out = request.output_dir.resolve()
    for directory in request.directories:
        if directory.resolve() == out:
            raise UsageError(f"--output-dir {request.output_dir} is one of the shards' folders",
                             hint="write the merged report to a folder of its own")
    sources = sorted((read_shard(d) for d in request.directories), key=lambda s: (s.shard.index, str(s.directory)))
    commands = {s.command for s in sources}
    if len(commands) > 1:
        odd = next(s for s in sources if s.command != sources[0].command)
        raise MergeInputError(
            f"{odd.directory} holds a `{odd.command}` results.json, {sources[0].directory} a `{sources[0].command}` one",
            hint="merge the shards of one command: all compare or all run",
        )
    check = check_shards_per_model(sources) if runs_per_model(sources) else check_shards(sources)
    if sources[0].command == "compare":
        return _merge_compare(request, sources, check)
    return _merge_run(request, sources, check)


def _cases_by_shard(counted: Sequence[ShardSource]) -> list[tuple[ShardSource, dict[str, Any]]]:
    """Each case once, from the first counted shard (by index) that has it."""
    taken: set[str] = set()
    found = []
    for source in counted:
        for case in source.payload["cases"]:
            if case["case_id"] not in taken:
                taken.add(case["case_id"])
                found.append((source, case))
    return found


def _with_problems(summary: str, problems: Sequence[ShardProblem]) -> str:
    words = summary.split(" — ")[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{words} — shards incomplete: {problems[0].message}{more}"


def _preamble(sources: Sequence[ShardSource], problems: Sequence[ShardProblem], geomeans: Sequence[GpuGeomean],
              limit: float | None) -> list[str]:
    lines = ["Merged from " + " · ".join(
        f"shard {s.label} {code(s.directory.name)} ({cell(s.gpu, 80)}, {len(s.measured)} case{'' if len(s.measured) == 1 else 's'})"
        for s in sources
    ) + ".", ""]
    if problems:
        lines += ["> **The shards do not add up to one run, so the gate cannot pass:**"]
        for problem in problems:
            cases = f" ({', '.join(code(c) for c in problem.cases[:20])}{' …' if len(problem.cases) > 20 else ''})" \
                if problem.cases else ""
            lines.append(f"> - {cell(problem.message, 600)}{cases}")
        lines.append("")
    if len(geomeans) > 1:
        parts = []
        for g in geomeans:
            value = percent(g.ratio - 1.0) if g.ratio is not None else "—"
            parts.append(f"{cell(g.gpu, 80)} {value} ({g.cases} cases{', over the limit' if g.failed else ''})")
        bound = f" (limit +{limit * 100:g}%)" if limit is not None else ""
        lines += ["Geometric mean of head/base per GPU model" + bound + ": " + " · ".join(parts), ""]
    return lines


@dataclass(frozen=True, slots=True)
class _Spread:
    """Where the picked cases ran: each case's GPU model (in the order of the cases), the models,
    and how many cases the merged run should hold."""

    gpus: tuple[str, ...]
    models: tuple[str, ...]
    #: the cases of one model's plan
    plan_size: int
    #: the plan once, or once per model when the whole suite ran on each
    total: int
    per_model: bool

    @staticmethod
    def of(check: ShardCheck, sources: Sequence[ShardSource], picked: Sequence[tuple[ShardSource, Any]]) -> _Spread:
        gpus = tuple(source.gpu for source, _ in picked)
        plan_size = len(set(sources[0].shard.all_case_ids))
        models = len({s.gpu for s in sources}) if check.per_model else 1
        return _Spread(gpus, tuple(sorted(set(gpus))), plan_size, plan_size * models, check.per_model)

    def by_model(self, cases: Sequence[CaseT]) -> list[tuple[CaseT, ...]]:
        """``cases`` split by GPU model, in the order of ``models``."""
        return [tuple(c for c, gpu in zip(cases, self.gpus, strict=True) if gpu == model) for model in self.models]

    def gpu_of(self, case_ids: Sequence[str]) -> dict[str, str]:
        """case id -> GPU model, for the report's GPU column (a case id once: not per_model)."""
        return dict(zip(case_ids, self.gpus, strict=True))

    def named(self, case_ids: Sequence[str], keep: Sequence[bool]) -> tuple[str, ...]:
        """The kept case ids, each with the GPU model it ran on when a case id is there once per model."""
        return tuple(f"{case_id} on {gpu}" if self.per_model else case_id
                     for case_id, gpu, kept in zip(case_ids, self.gpus, keep, strict=True) if kept)


def _one_document(command: Command, summary: str, preamble: Sequence[str], models: Sequence[str],
                  sections: Sequence[str]) -> str:
    """One benchmark.md for the whole suite run on each of several GPU models: the merged verdict
    and preamble, then each model's own report as a section (its headings one level down)."""
    parts = [f"# kbench-ci {command}", "", f"**{summary}**", "", *preamble,
             "The whole suite ran on each GPU model: a section per model below.", ""]
    for model, section in zip(models, sections, strict=True):
        body, fenced = [], False
        for line in section.splitlines()[1:]:  # its title dropped
            if line.startswith("```"):
                fenced = not fenced
            body.append("#" + line if line.startswith("#") and not fenced else line)  # headings one level down
        parts += [f"## {model}", *body, ""]
    return "\n".join(parts)


def _merge_json(sources: Sequence[ShardSource], problems: Sequence[ShardProblem], geomeans: Sequence[GpuGeomean],
                *, per_model: bool = False) -> dict[str, Any]:
    return {
        "per_gpu_model": per_model,
        "shards": [
            {"index": s.shard.index, "count": s.shard.count, "directory": str(s.directory), "gpu": s.gpu,
             "cases": len(s.measured), "complete": s.complete, "unsharded": s.unsharded}
            for s in sources
        ],
        "all_case_ids": sorted({c for s in sources for c in s.shard.all_case_ids}),
        "complete": not problems,
        "problems": [p.as_json() for p in problems],
        "geomean_by_gpu": {g.gpu: {"ratio": g.ratio, "cases": g.cases, "failed": g.failed} for g in geomeans},
    }


def _rejudge(case: CaseComparison, threshold: float) -> CaseComparison:
    """A timed case's recorded ratio and interval judged at another threshold (nothing is
    measured again, so a case that the new threshold would have re-measured is not)."""
    if case.estimate is None or case.verdict not in TIMED_VERDICTS:
        return case
    verdict = classify(case.estimate, threshold, alpha=ALPHA)
    return replace(case, verdict=verdict, threshold=threshold, accepted=case.accepted and verdict is Verdict.SLOWER)


def _merge_compare(request: MergeRequest, sources: Sequence[ShardSource], check: ShardCheck) -> MergeOutcome:
    started = time.perf_counter()
    problems = check.problems
    first = sources[0].payload
    settings_data = first["settings"]
    settings = settings_from_json(settings_data)
    picked = check.picked()
    cases = [compare_case_from_json(case, seed=settings.seed) for _, case in picked]
    if request.threshold is not None:
        cases = [_rejudge(case, request.threshold) for case in cases]
    spread = _Spread.of(check, sources, picked)
    total = spread.total
    limit = request.max_geomean_slowdown if request.max_geomean_slowdown is not None else settings_data.get("max_geomean_slowdown")
    gate, geomeans = gate_by_model(cases, spread.gpus, total=total, max_geomean_slowdown=limit)
    if problems:
        gate = replace(gate, passed=False, complete=False, summary=_with_problems(gate.summary, problems))
    if check.per_model:  # a case id is there once per model
        gate = replace(gate, failing=spread.named([c.case_id for c in cases], [c.fails_gate for c in cases]))
    remeasure_rounds = int(settings_data.get("remeasure_rounds") or settings.rounds * 2)
    base, head = revision_from_json("base", first[BASE]), revision_from_json("head", first[HEAD])
    compare_request = CompareRequest(
        start=Path.cwd(), base=base.ref or base.sha or "", device=settings.device, head=head.ref,
        base_mode=str(settings_data.get("base_mode") or "merge-base"), output_dir=request.output_dir,
        threshold=request.threshold if request.threshold is not None else settings_data.get("threshold_override"),
        max_geomean_slowdown=limit, case_timeout_s=settings_data.get("case_timeout_s"),
        kernels=tuple(settings_data.get("kernels") or ()), remeasure_factor=max(1, remeasure_rounds // max(1, settings.rounds)),
        no_fail=request.no_fail, command_line=request.command_line, accept=tuple(settings_data.get("accept") or ()),
        accept_reason=settings_data.get("accept_reason"), job_note=request.job_note,
    )
    results_path, report_path = request.output_dir / RESULTS, request.output_dir / REPORT
    outcome = CompareOutcome(
        cases=tuple(cases), total_cases=total, gate=gate, base=base, head=head, settings=settings,
        request=compare_request, environment=first.get("environment"), results_path=results_path,
        report_path=report_path, wall_s=max(float((s.payload.get("seconds") or {}).get("wall") or 0.0) for s in sources)
        + time.perf_counter() - started,
        setup_s=max(float((s.payload.get("seconds") or {}).get("setup") or 0.0) for s in sources), max_geomean_slowdown=limit,
        # every shard planned from the same base and head: the first one's --changed-only record is all of theirs
        selection=selection_from_json(first.get("changed_only")),
        isolation=str(settings_data.get("isolation") or "process"),
    )
    payload = compare_payload(outcome)
    payload["cases"] = [{**case, "gpu": gpu} for case, gpu in zip(payload["cases"], spread.gpus, strict=True)]
    payload["merge"] = _merge_json(sources, problems, geomeans, per_model=check.per_model)
    write_json_atomically(results_path, payload)
    preamble = _preamble(sources, problems, geomeans, limit)
    if check.per_model:
        sections = [
            render_compare(replace(outcome, cases=group, total_cases=spread.plan_size,
                                   gate=evaluate_gate(group, total=spread.plan_size, max_geomean_slowdown=limit)))
            for group in spread.by_model(cases)
        ]
        text = _one_document("compare", gate.summary, preamble, spread.models, sections)
    else:
        text = render_compare(outcome, gpu_of=spread.gpu_of([c.case_id for c in cases]), preamble=preamble)
    write_text_atomically(report_path, text)
    return MergeOutcome(
        command="compare", sources=tuple(sources), problems=problems, passed=gate.passed, summary=gate.summary,
        failing=gate.failing, geomeans=tuple(geomeans),
        results_path=results_path, report_path=report_path, user_failures=outcome.user_failures,
        kernel_failed=outcome.kernel_failed,
    )


def _merge_run(request: MergeRequest, sources: Sequence[ShardSource], check: ShardCheck) -> MergeOutcome:
    problems = check.problems
    first = sources[0].payload
    settings = settings_from_json(first["settings"])
    picked = check.picked()
    cases: list[RunCase] = [
        run_case_from_json(case, seed=settings.seed, timing_method=settings.timing_method) for _, case in picked
    ]
    spread = _Spread.of(check, sources, picked)
    total = spread.total
    results_path, report_path = request.output_dir / RESULTS, request.output_dir / REPORT
    outcome = RunOutcome(
        cases=tuple(cases), total_cases=total, config_path=Path(str(first.get("config") or "kbench.toml")),
        settings=settings, environment=first.get("environment"), results_path=results_path, report_path=report_path,
        wall_s=max(float((s.payload.get("seconds") or {}).get("wall") or 0.0) for s in sources),
        isolation=str(first["settings"].get("isolation") or "process"),
    )
    passed = outcome.passed and not problems
    summary = _with_problems(outcome.summary, problems) if problems else outcome.summary
    run_request = RunRequest(
        start=Path.cwd(), device=settings.device, output_dir=request.output_dir,
        kernels=tuple(first["settings"].get("kernels") or ()), command_line=request.command_line,
    )
    payload = run_payload(outcome, run_request)
    payload["gate"] = {**payload["gate"], "passed": passed, "complete": outcome.complete and not problems, "summary": summary}
    payload["cases"] = [{**case, "gpu": gpu} for case, gpu in zip(payload["cases"], spread.gpus, strict=True)]
    payload["merge"] = _merge_json(sources, problems, (), per_model=check.per_model)
    write_json_atomically(results_path, payload)
    preamble = _preamble(sources, problems, (), None)
    if check.per_model:
        sections = []
        for group in spread.by_model(cases):
            part = replace(outcome, cases=group, total_cases=spread.plan_size)
            sections.append(render_run(part, verdict=part.summary))
        text = _one_document("run", summary, preamble, spread.models, sections)
    else:
        text = render_run(outcome, gpu_of=spread.gpu_of([c.case_id for c in cases]), preamble=preamble, verdict=summary)
    write_text_atomically(report_path, text)
    failing = spread.named([c.case_id for c in cases], [c.status != "ok" for c in cases])
    return MergeOutcome(
        command="run", sources=tuple(sources), problems=problems, passed=passed, summary=summary, failing=failing,
        geomeans=(), results_path=results_path, report_path=report_path, user_failures=outcome.user_failures,
        kernel_failed=outcome.kernel_failed,
    )
