"""The one home of every measuring default, and how suite settings become a job's settings.

``bench``'s flags, kbench.toml's ``[defaults]``, the worker job and the reports all read their
defaults from here; change one here and it changes everywhere. On a device without CUDA the
timing method becomes ``host_time`` (:func:`job_settings`): CUDA events need a GPU.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kbench_ci.errors import UsageError
from kbench_ci.results.model import MeasureSettings

#: inputs come from this seed; correctness trial k uses seed + k
DEFAULT_SEED = 42
DEFAULT_CORRECTNESS_TRIALS = 3
DEFAULT_NUM_WARMUP = 10
#: bench: timed trials of each variant; run/compare: each side's budget across all rounds
DEFAULT_NUM_TRIALS = 100
#: the first sample of each round is kept in results.json but left out of statistics
DEFAULT_DISCARD_FIRST = 1
DEFAULT_TIMING_METHOD: Literal["cuda_event", "host_time"] = "cuda_event"
#: run/compare: interleaved rounds per case (base and head alternate within each)
DEFAULT_ROUNDS = 10
#: compare: seconds of timing a case may spend past ``rounds`` until its verdict is decided
DEFAULT_TIME_BUDGET_S = 10.0
#: adaptive rounds come in even batches (balanced A B / B A order) of at least this many rounds
ADAPTIVE_BATCH_ROUNDS = 2
#: ... and about this share of the rounds done so far: the verdict is looked at rarely, since the
#: GPU idles while the host computes it (kbench_ci.measure.schedule)
ADAPTIVE_BATCH_GROWTH = 0.25
#: bootstrap replicates of an interim verdict (the reported one uses stats' default)
ADAPTIVE_CHECK_BOOTSTRAP = 500
#: the most rounds a case has: adaptive rounds stop here, and ``rounds`` (kbench.toml) or
#: ``--rounds`` may ask for no more (a compare's 400 rounds of 10 trials a side: minutes a case)
MAX_ADAPTIVE_ROUNDS = 400
#: bytes a re-measurement's worker allocates before loading the case: its buffers then lie
#: elsewhere than the first measurement's. On an H200 the start-event-to-kernel gap of a 5 us
#: kernel moved by up to 0.7 us with where its buffers lay, so a side favoured by its layout
#: could confirm its own verdict (an A/A 5 us case read +1.29% twice in one worker at a 1% threshold).
REMEASURE_PLACEMENT_PAD_BYTES = 35 * 2**20 + 2**16
#: the fewest timed trials a round may have (see :func:`trials_per_round`)
MIN_TRIALS_PER_ROUND = 10
#: a case whose head/base change stays inside +-threshold is ``unchanged``
DEFAULT_THRESHOLD = 0.02
#: seconds before a hung kernel's worker is killed
DEFAULT_TIMEOUT_S = 600.0
#: run/compare: one worker process serves case after case (False: a fresh worker per case)
DEFAULT_WARM_WORKER = True
#: how a case's code is kept apart: "process" (every side in one worker process, as before the
#: judge) or "judge" (each side in a process of its own, judged by one that runs no
#: pull-request code: kbench_ci/judge). Opt-in while the judge's figures are being checked.
DEFAULT_ISOLATION = "process"
ISOLATIONS = ("process", "judge")
#: environment: the isolation, as --isolation
ISOLATION_ENV = "KBENCH_CI_ISOLATION"
#: environment of a judge: the side labels of the command's cases ("base,head" for compare),
#: whose workers it starts while the parent still builds
JUDGE_SIDES_ENV = "KBENCH_CI_JUDGE_SIDES"
#: environment of a judge: the most ms the judge may take to make one version of the inputs for
#: every timed call to get contents of its own (0: never; kbench_ci.judge.trials)
JUDGE_FRESH_MS_ENV = "KBENCH_CI_JUDGE_FRESH_MS"
DEFAULT_JUDGE_FRESH_MS = 5.0
#: environment of a judge: placements (arenas) per side, one picked at random each round
JUDGE_PLACEMENTS_ENV = "KBENCH_CI_JUDGE_PLACEMENTS"
DEFAULT_JUDGE_PLACEMENTS = 4
#: environment of a judge: bytes between the reads with which a side's worker brings its lent
#: buffers' address translations in after the judge's go and before its start event (0: none).
#: Two processes take turns on the GPU, so each handed-over call begins just after a switch of
#: context, its translations cold (0.45 us of a 2^20-float add on an H100); in one process (and
#: under ncu) they are warm. The reads take that cold start out of the timed call; they do not
#: take out the bias between two processes (docs/statistics.md, "Each process has its own
#: bias"). 64 KiB: the GPU's smaller page; one
#: byte per page, 0.0015% of the bytes.
JUDGE_TOUCH_STRIDE_ENV = "KBENCH_CI_JUDGE_TOUCH_STRIDE"
DEFAULT_JUDGE_TOUCH_STRIDE = 1 << 16
#: environment of a judge: us a side's worker spins after the judge's go (and its page reads),
#: before its start event, so that the GPU has fetched the call's launch by then, as it has
#: behind a held stream in one process (measure.timing.CudaEventTimer.measure_gated; 0: none).
#: Off: it takes no bias out on a GPU, and every us of the lead-in is a us a judged head's
#: gain must pass on top of the clock's resolution (gate.verdicts).
JUDGE_SETTLE_US_ENV = "KBENCH_CI_JUDGE_SETTLE_US"
DEFAULT_JUDGE_SETTLE_US = 0.0
#: environment of a judge: a file to which it appends where each case's time went, by process
#: and step (kbench_ci.judge.breakdown; scripts/acceptance/judge_breakdown.py reads it). Unset: nothing
JUDGE_BREAKDOWN_ENV = "KBENCH_CI_JUDGE_BREAKDOWN"
#: environment: the cache folder (built libraries, Triton's and TorchInductor's caches)
CACHE_DIR_ENV = "KBENCH_CI_CACHE_DIR"
#: the cache folder's sub-folder for the workers' compiled Python modules (PYTHONPYCACHEPREFIX)
BYTECODE_SUBDIR = "pycache"
#: environment: "1" turns the cache across runs off (as --no-cache)
NO_CACHE_ENV = "KBENCH_CI_NO_CACHE"
#: environment: "1" starts a fresh worker per case (as --fresh-worker)
FRESH_WORKER_ENV = "KBENCH_CI_FRESH_WORKER"
#: the deepest kbench.toml (or [tool.kbench]) may nest arrays and tables: a real suite nests 4
#: (kernels, a kernel, shapes, a shape); the TOML reader recurses once per level and would end
#: in a RecursionError past about 400
MAX_CONFIG_DEPTH = 32
#: the most compilers that run at once, however many cores the machine has (nvcc's cicc and
#: ptxas take about a core and a gigabyte each)
MAX_PARALLEL_BUILDS = 16


@dataclass(frozen=True, slots=True)
class SuiteSettings:
    """Suite-wide settings: only allowed in ``[defaults]``."""

    seed: int = DEFAULT_SEED
    num_warmup: int = DEFAULT_NUM_WARMUP
    num_trials: int = DEFAULT_NUM_TRIALS
    discard_first: int = DEFAULT_DISCARD_FIRST
    correctness_trials: int = DEFAULT_CORRECTNESS_TRIALS
    timing_method: Literal["cuda_event", "host_time"] = DEFAULT_TIMING_METHOD
    rounds: int = DEFAULT_ROUNDS
    time_budget_s: float = DEFAULT_TIME_BUDGET_S
    max_geomean_slowdown: float | None = None
    #: ``warm_worker`` in [defaults]; None: not set there
    warm_worker: bool | None = None
    #: ``cache`` in [defaults] (false: no cache across runs); None: not set there
    cache: bool | None = None
    #: ``cache_dir`` in [defaults], resolved against the config file's folder; None: not set there
    cache_dir: Path | None = None
    #: ``isolation`` in [defaults]; None: not set there
    isolation: str | None = None


def changed_settings(base: SuiteSettings, head: SuiteSettings, *, base_root: Path, head_root: Path) -> tuple[str, ...]:
    """What a pull request changes of its suite's ``[defaults]``, as "name base → head", in
    field order. A compare runs with the base's: the head is the pull request's, and its
    kbench.toml could otherwise turn the judge off, cut the rounds or the correctness trials,
    or time a GPU with the host's clock. ``cache_dir`` is compared relative to each side's
    suite folder (the two sides are checked out in different places)."""
    changes: list[str] = []
    for name in SuiteSettings.__dataclass_fields__:
        before, after = getattr(base, name), getattr(head, name)
        if name == "cache_dir":
            before, after = relative_label(before, base_root), relative_label(after, head_root)
        if before != after:
            changes.append(f"{name} {'unset' if before is None else before} → {'unset' if after is None else after}")
    return tuple(changes)


def relative_label(path: Path | None, root: Path) -> str | None:
    """``path`` relative to ``root`` (both resolved) where it lies inside, else as given."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def trials_per_round(num_trials: int, rounds: int) -> int:
    """Timed trials per round per side: ``max(10, num_trials // rounds)``.

    ``num_trials`` in kbench.toml is the budget of one side across all rounds (100 by default,
    as in ``bench``), so splitting it over the rounds keeps a suite's run time about what the
    user asked for, whatever ``rounds`` is. The floor of 10 keeps each round's median
    meaningful: the paired bootstrap resamples *within* rounds, and a round of 2-3 samples
    gives a median that jumps between order statistics. So with the defaults (100 trials,
    10 rounds) each side gets 10 trials in each of 10 rounds; with ``rounds = 20`` each round
    still has 10 (200 in all), with ``rounds = 2`` each has 50.
    """
    if num_trials < 1 or rounds < 1:
        raise ValueError(f"num_trials and rounds must be >= 1, got {num_trials} and {rounds}")
    return max(MIN_TRIALS_PER_ROUND, num_trials // rounds)


def job_settings(
    settings: SuiteSettings, *, device: str, rounds: int | None = None, time_budget_s: float | None = None,
    seeds: tuple[int, ...] = (),
) -> MeasureSettings:
    """Map the suite settings (and a ``--rounds`` override) onto what every case's job uses.

    On the CPU the timing method becomes ``host_time``: CUDA events need a GPU. ``seeds``
    (``--seeds``): one correctness trial at each, in place of the suite's ``correctness_trials``.
    """
    n_rounds = settings.rounds if rounds is None else rounds
    if isinstance(n_rounds, bool) or not isinstance(n_rounds, int) or n_rounds < 1:
        raise UsageError(f"--rounds must be a positive integer, got {n_rounds!r}")
    method = settings.timing_method
    changed = False
    if not device.startswith("cuda") and method == "cuda_event":
        method, changed = "host_time", True
    return MeasureSettings(
        device=device,
        seed=settings.seed,
        correctness_trials=len(seeds) if seeds else settings.correctness_trials,
        timing_method=method,
        num_warmup=settings.num_warmup,
        trials_per_round=trials_per_round(settings.num_trials, n_rounds),
        discard_first=settings.discard_first,
        rounds=n_rounds,
        flush_l2=True,
        timing_method_changed=changed,
        trials_per_round_rule=f"max({MIN_TRIALS_PER_ROUND}, num_trials // rounds)",
        time_budget_s=settings.time_budget_s if time_budget_s is None else time_budget_s,
        seeds=tuple(seeds),
    )


@dataclass(frozen=True, slots=True)
class ExecutionOptions:
    """What the command line says about how a suite runs (not what it measures): each None or
    False leaves the choice to the environment, kbench.toml and then the default."""

    fresh_worker: bool = False
    cache_dir: Path | None = None
    no_cache: bool = False
    isolation: str | None = None


#: the module a worker process runs: the in-process worker (user code beside the checks), or
#: the judge (``--isolation judge``: no user code in it; its sides run in processes of their own)
IN_PROCESS_MODULE = "kbench_ci.measure.worker"
JUDGE_MODULE = "kbench_ci.judge.main"
#: the module that runs one command of the pull request's (a head's own ``build``) in the
#: side's sandbox under ``--isolation judge``
SANDBOX_MODULE = "kbench_ci.side.sandboxed"


def worker_module(isolation: str) -> str:
    return JUDGE_MODULE if isolation == "judge" else IN_PROCESS_MODULE


@dataclass(frozen=True, slots=True)
class Execution:
    """How a suite runs: one warm worker or a fresh one per case, and the cache folder (None:
    nothing is kept across runs). Changes the wall time, never a measurement."""

    warm_worker: bool = DEFAULT_WARM_WORKER
    cache_dir: Path | None = None
    isolation: str = DEFAULT_ISOLATION

    @property
    def worker_module(self) -> str:
        """The module each worker process runs: the in-process worker, or the judge."""
        return worker_module(self.isolation)

    def worker_environment(self, environ: Mapping[str, str] | None = None, *, bytecode: bool | None = None) -> dict[str, str]:
        """Triton's and TorchInductor's on-disk caches in the cache folder, for the workers;
        a folder the person set themselves wins. ``bytecode``: Python's compiled modules there
        too; None (default): only where torch is installed without bytecode
        (:func:`installed_without_bytecode`). Never for a folder that lives one run only."""
        if self.cache_dir is None:
            return {}
        source = os.environ if environ is None else environ
        wanted = {"TRITON_CACHE_DIR": self.cache_dir / "triton", "TORCHINDUCTOR_CACHE_DIR": self.cache_dir / "inductor",
                  # measure/speed_of_light.py's measured ceilings of each GPU model
                  "KBENCH_CI_CEILINGS_DIR": self.cache_dir / "ceilings"}
        environment = {name: str(path) for name, path in wanted.items() if not source.get(name)}
        # Triton keeps each autotuner's pick in its cache folder, keyed by the kernel's source,
        # its configs and the tuning key: tuned once, by the first side, not by every worker of
        # every run; a changed kernel or config list tunes again.
        if not source.get("TRITON_CACHE_AUTOTUNING"):
            environment["TRITON_CACHE_AUTOTUNING"] = "1"
        # Workers write no bytecode (the user's code never: measure/child.serve; nothing else
        # of theirs into site-packages either), so where site-packages hold none (uv installs
        # none by default; the H200 we test on has none) every worker compiled torch's ~850
        # modules from source: 3.5 s to import it there, 1.6 s from bytecode. Then the workers
        # keep their bytecode in the cache folder. Not where torch has its own: with a prefix
        # Python reads only the prefix, so each new folder would compile torch once more.
        if bytecode is None:
            bytecode = installed_without_bytecode()
        if bytecode and not source.get("PYTHONPYCACHEPREFIX"):
            environment["PYTHONPYCACHEPREFIX"] = str(self.cache_dir / BYTECODE_SUBDIR)
            environment["PYTHONDONTWRITEBYTECODE"] = ""  # empty: unset for Python, whoever set it
        else:
            environment["PYTHONDONTWRITEBYTECODE"] = "1"
        return environment


def installed_without_bytecode(module: str = "torch") -> bool:
    """Is ``module`` installed without compiled bytecode beside its source (found, not
    imported: the parent never imports torch)? False where it is not found or not Python source."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    try:
        return not Path(importlib.util.cache_from_source(spec.origin)).exists()
    except NotImplementedError:  # sys.implementation.cache_tag is None: no bytecode at all
        return False


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/kbench-ci``, else ``~/.cache/kbench-ci``."""
    source = os.environ if environ is None else environ
    base = source.get("XDG_CACHE_HOME") or str(Path(source.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "kbench-ci"


def _flag(environ: Mapping[str, str], name: str) -> bool | None:
    """An environment switch: "1", "true", "yes", "on" / "0", "false", "no", "off"; unset or empty:
    None. Anything else is a usage error, not a silent default."""
    value = environ.get(name, "").strip().lower()
    if not value:
        return None
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{name}={environ[name]!r} is not a switch", hint=f"set {name}=1 or {name}=0")


def execution(
    suite: SuiteSettings, options: ExecutionOptions | None = None, environ: Mapping[str, str] | None = None
) -> Execution:
    """The command line, else the environment, else kbench.toml's [defaults], else the default."""
    options = options or ExecutionOptions()
    source = os.environ if environ is None else environ
    fresh = True if options.fresh_worker else _flag(source, FRESH_WORKER_ENV)
    warm = (not fresh) if fresh is not None else (suite.warm_worker if suite.warm_worker is not None else DEFAULT_WARM_WORKER)
    isolation = check_isolation(
        options.isolation or source.get(ISOLATION_ENV) or suite.isolation or DEFAULT_ISOLATION,
        where="--isolation" if options.isolation else (ISOLATION_ENV if source.get(ISOLATION_ENV) else "isolation"),
        environ=source,
    )
    if options.no_cache and options.cache_dir is not None:
        raise UsageError("--no-cache and --cache-dir contradict each other",
                         hint="give --cache-dir to keep the cache there, or --no-cache to keep none")
    no_cache = True if options.no_cache else _flag(source, NO_CACHE_ENV)
    if no_cache is None and suite.cache is not None:
        no_cache = not suite.cache
    if no_cache:
        return Execution(warm_worker=warm, cache_dir=None, isolation=isolation)
    chosen = [
        (options.cache_dir, "--cache-dir"),
        (Path(source[CACHE_DIR_ENV]) if source.get(CACHE_DIR_ENV) else None, CACHE_DIR_ENV),
        (suite.cache_dir, "cache_dir in kbench.toml"),
        (default_cache_dir(source), "the default cache folder"),
    ]
    folder, where = next((path, name) for path, name in chosen if path)
    return Execution(warm_worker=warm, cache_dir=cache_folder(Path(folder), where=where), isolation=isolation)


def cache_folder(folder: Path, *, where: str) -> Path:
    """``folder`` (absolute) if it can be the cache folder, else a usage error naming ``where``
    it came from. The rule (docs/config.md): a folder of the user's own, which kbench-ci fills
    with sub-folders (triton/, inductor/, libraries). Refused: the root or a folder directly
    under it (/etc, /usr, /tmp: even where the user may write there, as root may, they are no
    cache's); a file; an existing folder owned by another user or not writable; a folder not
    yet there whose nearest existing parent the user cannot write in."""
    absolute = folder.expanduser().absolute()
    resolved = absolute.resolve()
    fix = "give a folder of your own, such as ~/.cache/kbench-ci (--cache-dir, KBENCH_CI_CACHE_DIR or cache_dir), or --no-cache"
    if len(resolved.parts) <= 2:
        raise UsageError(f"{where} {folder} is a system folder (the root or directly under it), not a cache folder", hint=fix)
    if resolved.exists() and not resolved.is_dir():
        raise UsageError(f"{where} {folder} is a file, not a folder", hint=fix)
    existing = next(path for path in (resolved, *resolved.parents) if path.exists())
    if existing == resolved and resolved.stat().st_uid != os.geteuid():
        raise UsageError(f"{where} {folder} belongs to another user (uid {resolved.stat().st_uid})", hint=fix)
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable by you" if existing == resolved else f"cannot be made: {existing} is not writable by you"
        raise UsageError(f"{where} {folder} {what}", hint=fix)
    return absolute


def check_isolation(value: str, *, where: str, environ: Mapping[str, str] | None = None) -> str:
    """One of :data:`ISOLATIONS`, or a usage error naming where the value came from. For the
    judge, its environment knobs are read here too, so that a bad one stops the command before
    a judge starts (:func:`judge_fresh_ms`, :func:`judge_placements`)."""
    if value not in ISOLATIONS:
        raise UsageError(f"{where} {value!r} is not an isolation", hint=f"use one of: {', '.join(ISOLATIONS)}")
    if value == "judge":
        source = os.environ if environ is None else environ
        judge_fresh_ms(source)
        judge_placements(source)
        judge_touch_stride(source)
        judge_settle_us(source)
    return value


def judge_fresh_ms(environ: Mapping[str, str]) -> float:
    """:data:`JUDGE_FRESH_MS_ENV`: a number of ms, 0 or more (unset: the default)."""
    return _judge_number(environ, JUDGE_FRESH_MS_ENV, DEFAULT_JUDGE_FRESH_MS, math.inf, "milliseconds",
                         hint=(f"set {JUDGE_FRESH_MS_ENV}={DEFAULT_JUDGE_FRESH_MS:g} (the default), or 0 for a pool of "
                               "versions and a probe a round"))


def judge_placements(environ: Mapping[str, str]) -> int:
    """:data:`JUDGE_PLACEMENTS_ENV`: a whole number, 1 or more (unset: the default)."""
    return _judge_whole(environ, JUDGE_PLACEMENTS_ENV, DEFAULT_JUDGE_PLACEMENTS, "placements", least=1,
                        hint=f"set {JUDGE_PLACEMENTS_ENV} to a whole number, 1 or more (default {DEFAULT_JUDGE_PLACEMENTS})")


def judge_touch_stride(environ: Mapping[str, str]) -> int:
    """:data:`JUDGE_TOUCH_STRIDE_ENV`: a whole number of bytes, 0 (no reads) or more (unset: the
    default)."""
    return _judge_whole(environ, JUDGE_TOUCH_STRIDE_ENV, DEFAULT_JUDGE_TOUCH_STRIDE, "bytes",
                        hint=f"set {JUDGE_TOUCH_STRIDE_ENV} to a whole number of bytes, or 0 for none "
                             f"(default {DEFAULT_JUDGE_TOUCH_STRIDE})")


def _judge_whole(
    environ: Mapping[str, str], name: str, default: int, unit: str, *, least: int = 0, most: int | None = None, hint: str,
) -> int:
    """A judge knob that holds a whole number from ``least`` (up to ``most``; unset: ``default``),
    or a usage error that names it."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or int(text) < least or (most is not None and int(text) > most):
        raise UsageError(f"{name}={environ[name]!r} is not a number of {unit}", hint=hint)
    return int(text)


def judge_settle_us(environ: Mapping[str, str]) -> float:
    """:data:`JUDGE_SETTLE_US_ENV`: a number of us, 0 (no spin) up to 1000 (unset: the default)."""
    return _judge_number(environ, JUDGE_SETTLE_US_ENV, DEFAULT_JUDGE_SETTLE_US, 1000.0, "microseconds",
                         hint=f"set {JUDGE_SETTLE_US_ENV} to 0..1000 us, or 0 for no spin (default {DEFAULT_JUDGE_SETTLE_US:g})")


def _judge_number(environ: Mapping[str, str], name: str, default: float, most: float, unit: str, *, hint: str) -> float:
    """A judge knob that holds a number from 0 to ``most`` (unset: ``default``), or a usage
    error that names it."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= most):
        raise UsageError(f"{name}={environ[name]!r} is not a number of {unit}", hint=hint)
    return value


def parallel_builds(cpu_count: int | None = None) -> int:
    """How many builds run at once: one per core, at most :data:`MAX_PARALLEL_BUILDS`."""
    count = os.cpu_count() if cpu_count is None else cpu_count
    return max(1, min(count or 1, MAX_PARALLEL_BUILDS))
