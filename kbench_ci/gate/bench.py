"""``kbench-ci bench``: one solution against its reference and baselines, in one worker."""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbench_ci.cuda.build import format_command, library_status, plan_build, shared_library_path
from kbench_ci.cuda.signature import read_solve_signature
from kbench_ci.errors import EnvironmentProblem, ExitCode, KbenchError, UsageError, UserFileError
from kbench_ci.measure.impls import COMPILED_KINDS
from kbench_ci.measure.parent import run_case_in_worker
from kbench_ci.report.bench import cache_mode_text, render_bench
from kbench_ci.results.atomic import write_json_atomically, write_text_atomically
from kbench_ci.results.model import CaseResult, MeasureSettings
from kbench_ci.results.writers import BenchRecord, bench_results_payload
from kbench_ci.suite import values
from kbench_ci.suite.settings import DEFAULT_TIMEOUT_S, worker_module
from kbench_ci.suite.size_expr import evaluate_size_expression
from kbench_ci.suite.userfiles import kernel_file_problems, raise_all
from kbench_ci.wire.protocol import CaseJob, SideSpec, WorkerEvent


@dataclass(frozen=True, slots=True)
class BenchRequest:
    solution: Path
    ref: Path
    implementation: str
    baselines: tuple[str, ...]
    dims: Mapping[str, Any]
    output_dir: Path
    #: rounds is 1 and trials_per_round is --num-trials: bench times each variant in one round
    settings: MeasureSettings
    atol: float | None = None
    rtol: float | None = None
    precision: str | None = None
    ptr_sizes: Mapping[str, str] = field(default_factory=dict)
    ptr_size: str | None = None
    #: ``--bytes``/``--flops``: the work one call must do (measure/speed_of_light.py)
    bytes_expr: str | None = None
    flops_expr: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    command_line: tuple[str, ...] = ()
    #: the command's own flags, to tell a mistyped flag from a dimension
    known_options: tuple[str, ...] = ()
    #: "process" (one worker) or "judge" (docs/isolation.md)
    isolation: str = "process"


@dataclass(frozen=True, slots=True)
class BenchOutcome:
    case: CaseResult
    report_path: Path
    results_path: Path
    environment: Mapping[str, Any] | None

    @property
    def solution_passed(self) -> bool:
        return self.case.variants[0].status == "ok"


class WorkerReportedError(KbenchError):
    """A usage or environment error found inside the worker (say, an unbindable solve())."""

    def __init__(self, message: str, hint: str | None, exit_code: int) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = ExitCode(exit_code)


def check_request(request: BenchRequest) -> None:
    """Everything that can be checked before a worker starts, so bad usage fails fast."""
    for role, path in (("solution", request.solution), ("ref", request.ref)):
        if not path.is_file():
            raise UserFileError(f"{role} file not found: {path}", hint="check the path")
    # Read from their syntax (this process never imports them): a missing reference(), setup()
    # or run_kernel(), or a dimension setup() needs and no flag gives, before a worker starts.
    raise_all(kernel_file_problems(
        solution=request.solution, ref=request.ref, python_solution=request.implementation not in COMPILED_KINDS,
        shapes=[request.dims], fix="flags", solution_syntax=True,
    ))
    try:
        values.timeout_seconds(request.timeout_s)
    except values.InvalidValue as exc:
        raise UsageError(f"--timeout {exc}", hint=f"e.g. --timeout {DEFAULT_TIMEOUT_S:g} (the default)") from None
    for option, expression in (("--bytes", request.bytes_expr), ("--flops", request.flops_expr)):
        if expression is not None:
            try:
                evaluate_size_expression(expression, request.dims)
            except KbenchError as exc:
                raise UsageError(f"{option} {expression!r}: {exc}", hint=exc.hint or f'e.g. {option} "2*M*N*K"') from None
    for option, tolerance in (("--atol", request.atol), ("--rtol", request.rtol)):
        if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
            raise UsageError(f"{option} must be a finite number >= 0, got {tolerance:g}", hint=f"e.g. {option} 1e-3")
    if request.implementation in COMPILED_KINDS:
        if not request.settings.device.startswith("cuda"):
            raise EnvironmentProblem(
                f"{request.solution.name} is a CUDA C++ solution and needs a CUDA GPU; none is available here",
                hint="run it on a GPU machine (CPU mode runs Triton and PyTorch solutions only)",
            )

        read_solve_signature(request.solution)  # a bad signature is a usage error: fail before the worker
        status = library_status(request.solution)
        if status != "ok":
            try:
                command = format_command(plan_build(request.solution, cutlass=request.implementation == "cutlass"))
            except KbenchError:
                library = shared_library_path(request.solution)
                command = f"nvcc -shared -std=c++17 -arch=sm_90 -O3 -Xcompiler -fPIC -o {library} {request.solution}"
            what = "is missing" if status == "missing" else "is older than the .cu"
            raise UserFileError(
                f"{shared_library_path(request.solution).name} {what}; bench loads the shared library and does not compile it",
                hint=(
                    f"build it: kbench-ci build {request.solution}{' --cutlass' if request.implementation == 'cutlass' else ''}"
                    f"  (runs: {command})"
                ),
            )


def run_bench(
    request: BenchRequest,
    *,
    on_event: Callable[[WorkerEvent], None] | None = None,
    on_start: Callable[[], None] | None = None,
) -> BenchOutcome:
    """Check the request, then measure it in one worker. ``on_start`` is called once the checks
    passed, before the worker starts: a note about the run (CPU mode) belongs after a usage
    error could have been the one line."""
    check_request(request)
    check_dimension_names(request)
    if on_start is not None:
        on_start()
    side = SideSpec(
        label="solution",
        solution=str(request.solution.resolve()),
        ref=str(request.ref.resolve()),
        implementation=request.implementation,
        atol=request.atol,
        rtol=request.rtol,
        ptr_sizes=dict(request.ptr_sizes),
        ptr_size=request.ptr_size,
        precision=request.precision,
        bytes_expr=request.bytes_expr,
        flops_expr=request.flops_expr,
    )
    job = CaseJob(
        case_id=request.solution.stem + "[" + ",".join(f"{k}={v}" for k, v in request.dims.items()) + "]",
        dims=dict(request.dims),
        sides=(side,),
        baselines=request.baselines,
        settings=request.settings,
    )
    case, outcome = run_case_in_worker(
        job, timeout_s=request.timeout_s, on_event=on_event,
        module=worker_module(request.isolation),
    )
    results_path = request.output_dir / "results.json"
    report_path = request.output_dir / "benchmark.md"
    # Written before anything else can fail: a measured result is never lost.
    write_json_atomically(results_path, bench_payload(request, case, outcome.environment))
    if outcome.load_error is not None:
        error = outcome.load_error
        raise WorkerReportedError(error.message, error.hint, error.exit_code)
    # The solution's notes as they are; a baseline's (its reference changed torch settings) by name.
    notes = (*case.variants[0].notes, *(f"{v.label}: {note}" for v in case.variants[1:] for note in v.notes))
    write_text_atomically(
        report_path,
        render_bench(
            case,
            solution_name=request.solution.name,
            ref_name=request.ref.name,
            implementation=request.implementation,
            environment=outcome.environment,
            num_warmup=request.settings.num_warmup,
            num_trials=request.settings.trials_per_round,
            discard_first=request.settings.discard_first,
            cache_mode=cache_mode_text(request.settings.flush_l2, request.settings.device),
            notes=notes,
            isolation=request.isolation,
        ),
    )
    return BenchOutcome(case=case, report_path=report_path, results_path=results_path, environment=outcome.environment)


def bench_payload(request: BenchRequest, case: CaseResult, environment: Mapping[str, Any] | None) -> dict[str, Any]:
    """results.json of ``bench`` (the writer and its reader live in results/)."""
    return bench_results_payload(
        BenchRecord(
            command_line=tuple(request.command_line), solution=str(request.solution),
            ref=str(request.ref), implementation=request.implementation, settings=request.settings,
            baselines=tuple(request.baselines), atol=request.atol, rtol=request.rtol, precision=request.precision,
            ptr_sizes=dict(request.ptr_sizes), ptr_size=request.ptr_size,
        ),
        case, environment,
    )


_INTEGER = re.compile(r"^\+?[0-9]+$")


def parse_dimension_args(args: list[str], known_options: list[str]) -> dict[str, int]:
    """``--NAME=VALUE`` / ``--NAME VALUE`` tokens the CLI did not know: dimensions.

    A dimension is a positive integer, as in kbench.toml's ``shapes``: ``--N=1e3``, ``--N=1024.5``,
    ``--N=0`` and ``--N=-5`` are usage errors here, not a kernel that fails later.
    """

    dims: dict[str, int] = {}
    index = 0
    while index < len(args):
        token = args[index]
        if not token.startswith("--"):
            raise UsageError(f"unexpected argument '{token}'", hint="dimensions are written --NAME=VALUE, e.g. --M=1024")
        body = token[2:]
        if "=" in body:
            name, value = body.split("=", 1)
        else:
            if index + 1 >= len(args) or args[index + 1].startswith("--"):
                raise UsageError(f"option '{token}' has no value", hint=f"write {token}=VALUE")
            name, value = body, args[index + 1]
            index += 1
        index += 1
        if not name.isidentifier():
            close = difflib.get_close_matches(token.split("=")[0], known_options, n=1)
            hint = f"did you mean {close[0]}?" if close else "dimensions must be identifiers, e.g. --M=1024"
            raise UsageError(f"unknown option '--{name}'", hint=hint)
        dims[name] = _dimension_value(name, value)
    return dims


def _dimension_value(name: str, value: str) -> int:
    text = value.strip()
    if _INTEGER.match(text) and int(text) > 0:
        try:
            return values.dimension(int(text))
        except values.InvalidValue as exc:
            raise UsageError(f"dimension --{name} {exc}", hint="dimensions are sizes that fit 64 bits") from None
    hint = "dimensions are sizes: positive integers, as in kbench.toml's shapes"
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if math.isfinite(number) and number > 0 and number == int(number):
        hint = f"write --{name}={int(number)}"
    raise UsageError(f"dimension --{name} must be a positive integer, got '{value}'", hint=hint)


def check_dimension_names(request: BenchRequest) -> None:
    """A dimension that no function of the user's files names, and that is close to one of
    bench's own flags, is a mistyped flag (``--trials=5`` for ``--num-trials``), not a dimension.

    Read from the source (no user code runs in this process): the explicit parameters of
    ``setup``, ``reference`` and the solution's ``setup`` / ``run_kernel`` / ``compile_kernel``,
    or of a ``.cu``'s ``solve``. A file that does not parse is left to the worker to report.
    """
    parameters = _parameter_names(request)
    if parameters is None:
        return
    for name in request.dims:
        if name in parameters:
            continue
        close = difflib.get_close_matches(f"--{name}", list(request.known_options), n=1, cutoff=0.6)
        if close:
            raise UsageError(
                f"unknown option '--{name}'",
                hint=f"did you mean {close[0]}? No function of {request.solution.name} or {request.ref.name} "
                f"takes a parameter '{name}', so it is no dimension either",
            )


def _parameter_names(request: BenchRequest) -> set[str] | None:
    names: set[str] = set()
    sources: list[tuple[Path, tuple[str, ...]]] = [(request.ref, ("setup", "reference"))]
    if request.implementation in COMPILED_KINDS:
        names |= {param.name for param in read_solve_signature(request.solution).params}
    else:
        sources.append((request.solution, ("setup", "run_kernel", "compile_kernel")))
    for path, functions in sources:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            return None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in functions:
                arguments = node.args
                names |= {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    return names
