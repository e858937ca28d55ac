"""Fresh input content for every timed call, and every timed call's outputs checked.

A kernel that remembers its results (keyed on the tensor object, its pointer, a sampled
fingerprint or a full hash of the contents) passes every check that reuses one set of inputs
and times as a copy. So before *every* timed call, outside the timed region and before the L2
flush (the copy warms nothing the kernel reads), one of several **versions** of the input
contents is copied into the kernel's own input tensors and its outputs are poisoned; right after
the end event, off the timer, its outputs are compared on the device with the reference's
outputs for that version. The versions follow each other in an order drawn from the operating
system's entropy (never the same version twice in a row), the same order for every variant of a
round, so content cannot favour one side.

A kernel that caches results therefore either computes or is ``incorrect``, with the call named.
A cache that returns the *right* result for content it has seen (a content-hash cache larger
than the pool) is caught by the memoisation probe (:mod:`kbench_ci.measure.memo_probe`).

Versions come from the solution's own ``setup`` at other seeds; when that gives the same inputs
(a ``setup`` that ignores its seed), other shapes, or when kbench-ci fills a ``.cu``'s buffers,
kbench-ci permutes each floating-point input itself (same dtype, shape and values, so the same
spread; integer and bool inputs are kept), and the reference says what is right for them. A
version the reference cannot handle is dropped and named; the report says how the inputs varied.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from kbench_ci.measure.correctness import close_elements
from kbench_ci.measure.inputs import InputSet, poison_outputs_
from kbench_ci.results.model import Tolerance

#: versions kept for the timed calls (the original contents count as one)
MAX_VERSIONS = 8
MIN_VERSIONS = 2
#: memory the versions and their expected outputs may take, on a GPU: this, or an eighth of
#: the device's memory when that is less
GPU_VERSION_BUDGET_BYTES = 4 * 2**30
CPU_VERSION_BUDGET_BYTES = 512 * 2**20
#: setup() at seed + this + k makes version k: far from the correctness trials' seed + k
VERSION_SEED_OFFSET = 10_007

ExpectedFor = Callable[[InputSet], dict[str, Any]]


class NoVersions(Exception):
    """No other version of the inputs could be made; the message says why."""


def input_names(inputs: InputSet) -> tuple[str, ...]:
    """The tensors a kernel reads: every tensor argument that is not an output, and the outputs
    it updates in place (their contents are staged as an input's are)."""
    return tuple(
        name for name, value in inputs.kwargs.items()
        if isinstance(value, torch.Tensor) and name not in inputs.poisoned_names
    )


def _nbytes(values: Mapping[str, Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values.values() if isinstance(v, torch.Tensor))


def version_budget(device: torch.device) -> int:
    if device.type != "cuda":
        return CPU_VERSION_BUDGET_BYTES
    total = int(torch.cuda.get_device_properties(device).total_memory)
    return min(GPU_VERSION_BUDGET_BYTES, total // 8)


@dataclass(frozen=True, slots=True)
class Version:
    """One content of the inputs and what the reference says the outputs are for it."""

    contents: dict[str, torch.Tensor]
    expected: dict[str, Any]

    @property
    def nbytes(self) -> int:
        return _nbytes(self.contents) + _nbytes(self.expected)


class VersionMaker:
    """Makes versions of one input set: ``setup`` at other seeds when that varies the inputs,
    else a permutation of each floating-point input (``how`` says which)."""

    def __init__(self, inputs: InputSet, make_inputs: Callable[[int], InputSet], expected_for: ExpectedFor) -> None:
        self.inputs = inputs
        self.names = input_names(inputs)
        self._make_inputs = make_inputs
        self._expected_for = expected_for
        self._next_seed = inputs.seed + VERSION_SEED_OFFSET
        self._generator = torch.Generator(device="cpu")
        self._generator.manual_seed(int.from_bytes(os.urandom(8), "little") & (2**63 - 1))
        #: reference failures on versions (dropped): the first one's words
        self.dropped: list[str] = []
        #: the inputs setup() made when checking that it varies them: the first version made
        self._first: InputSet | None = None
        if not self.names:
            raise NoVersions("the kernel takes no input tensors")
        self.from_setup, reason = self._setup_varies()
        self._floats = [n for n in self.names if inputs.kwargs[n].is_floating_point() and inputs.kwargs[n].numel() > 1]
        if not self.from_setup and not self._floats:
            raise NoVersions(f"{reason}, and no input is a floating-point tensor kbench-ci could vary "
                             "(integer and bool inputs are kept)")
        self.how = "from setup(seed) at other seeds" if self.from_setup else (
            f"made by kbench-ci ({reason}): floating-point inputs {', '.join(repr(n) for n in self._floats)} "
            "permuted, other inputs kept")

    def _setup_varies(self) -> tuple[bool, str]:
        try:
            probe = self._make_inputs(self._next_seed)
        except Exception as exc:  # noqa: BLE001  (said in the report; permutation still works)
            return False, f"setup() failed at another seed: {type(exc).__name__}"
        self._next_seed += 1
        same_layout = all(
            isinstance(probe.kwargs.get(n), torch.Tensor)
            and (probe.kwargs[n].shape, probe.kwargs[n].dtype) == (self.inputs.kwargs[n].shape, self.inputs.kwargs[n].dtype)
            for n in self.names
        )
        if not same_layout:
            return False, "setup() at another seed gives other shapes or dtypes"
        if all(torch.equal(probe.kwargs[n], self.inputs.kwargs[n]) for n in self.names):
            return False, "setup() gives the same inputs at every seed"
        self._first = probe
        return True, ""

    def _contents(self) -> dict[str, torch.Tensor]:
        if self.from_setup:
            made = self._first
            if made is None:
                made = self._make_inputs(self._next_seed)
                self._next_seed += 1
            self._first = None
            return {n: made.kwargs[n] for n in self.names}
        contents = {}
        for name in self.names:
            original = self.inputs.kwargs[name]
            if name in self._floats:
                order = torch.randperm(original.numel(), generator=self._generator).to(original.device)
                contents[name] = original.reshape(-1)[order].reshape(original.shape)
            else:
                contents[name] = original
        return contents

    def make(self) -> Version | None:
        """One new version, or None when the reference failed on it (``dropped`` says how)."""
        contents = self._contents()
        as_inputs = replace(self.inputs, kwargs={**self.inputs.kwargs, **contents})
        try:
            expected = self._expected_for(as_inputs)
        except Exception as exc:  # noqa: BLE001  (the reference's own failure: named in the report)
            self.dropped.append(f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
            return None
        return Version(contents, expected)


@dataclass(slots=True)
class TimedSet:
    """One set of timed tensors (shared by every variant timed on it) and its versions.

    ``kwargs`` are the tensors the kernels are called with; the versions' contents are copied
    into them before each call. ``versions[0]`` is the original content (``inputs``)."""

    inputs: InputSet
    kwargs: dict[str, Any]
    versions: list[Version] = field(default_factory=list)
    maker: VersionMaker | None = None
    #: why no versions could be made (then every timed call runs on the original content)
    reason: str | None = None
    _rng: random.Random = field(default_factory=lambda: random.Random(os.urandom(16)))
    _last: int = -1

    @staticmethod
    def prepare(
        inputs: InputSet, kwargs: dict[str, Any], make_inputs: Callable[[int], InputSet], expected_for: ExpectedFor,
        device: torch.device,
    ) -> TimedSet:
        timed = TimedSet(inputs, kwargs)
        # The original content is version 0 whatever else can be made: every timed call still
        # gets poisoned outputs and its outputs checked.
        original = Version({n: inputs.kwargs[n] for n in input_names(inputs)}, expected_for(inputs))
        timed.versions.append(original)
        try:
            timed.maker = VersionMaker(inputs, make_inputs, expected_for)
        except NoVersions as exc:
            timed.reason = str(exc)
            return timed
        budget = version_budget(device)
        if original.nbytes > budget:
            # One more version would not fit: the original content only (still checked).
            timed.reason = (f"its inputs and outputs ({original.nbytes / 2**30:.1f} GiB) exceed the memory kept for "
                            f"versions ({budget / 2**30:.1f} GiB)")
            timed.maker = None
            return timed
        count = min(MAX_VERSIONS, max(MIN_VERSIONS, budget // max(original.nbytes, 1)))
        attempts = 0
        while len(timed.versions) < count and attempts < 2 * count:
            attempts += 1
            version = timed.maker.make()
            if version is not None:
                timed.versions.append(version)
        if len(timed.versions) < 2:
            timed.reason = f"reference() failed on every other version of the inputs ({timed.maker.dropped[0]})"
        return timed

    @property
    def varied(self) -> bool:
        return len(self.versions) >= 2

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self.versions[1:])

    def describe(self) -> str:
        """How this set's inputs varied, for the report."""
        if not self.varied:
            return f"inputs not varied: {self.reason}"
        assert self.maker is not None
        dropped = ""
        if self.maker.dropped:
            dropped = f"; {len(self.maker.dropped)} version(s) dropped: reference() failed ({self.maker.dropped[0]})"
        kept = f"{self.nbytes / 2**20:.0f} MiB" if self.nbytes >= 2**20 else f"{max(1, round(self.nbytes / 1024))} KiB"
        return (f"{len(self.versions)} versions of the inputs ({kept} kept), "
                f"{self.maker.how}; a new one before every timed call{dropped}")

    def pick(self, calls: int) -> list[Version]:
        """The versions of ``calls`` calls in a row: random, never one twice in a row."""
        if not self.varied:
            return [self.versions[0]] * calls
        picks = []
        for _ in range(calls):
            if self._last < 0:
                choice = self._rng.randrange(len(self.versions))
            else:
                choice = self._rng.randrange(len(self.versions) - 1)
                choice += choice >= self._last
            picks.append(self.versions[choice])
            self._last = choice
        return picks

    @property
    def last(self) -> Version:
        """The version staged most recently by :meth:`pick` (a pool version seen many times)."""
        return self.versions[max(self._last, 0)]

    def index_of(self, version: Version) -> int:
        """Which of this set's versions ``version`` is (0: the original contents)."""
        return next(index for index, kept in enumerate(self.versions) if kept is version)

    def stage(self, version: Version, *, poison: bool = True) -> None:
        """Copy ``version`` into the kernel's inputs (in-place outputs included) and poison its
        other outputs (enqueued, no sync)."""
        for name, content in version.contents.items():
            target = self.kwargs[name]
            if content is not target:
                target.copy_(content)
        if poison:
            poison_outputs_(self.kwargs, self.inputs.poisoned_names)

    def restore(self) -> None:
        """The original content back in the kernel's inputs (the later checks expect it)."""
        if self.versions:
            self.stage(self.versions[0], poison=False)


class OutputCheck:
    """Compares a call's outputs with a version's expected outputs on the device, without a
    synchronisation: each comparison leaves its mismatch count in a device tensor, read once
    per round (:meth:`failures`)."""

    def __init__(self, tolerance_for: Callable[[torch.dtype], Tolerance], device: torch.device) -> None:
        self._tolerance_for = tolerance_for
        self._device = device
        self._counts: list[tuple[int, str, torch.Tensor | None, str | None]] = []

    def check(self, call: int, outputs: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
        for name, want in expected.items():
            got = outputs.get(name)
            if not isinstance(want, torch.Tensor):
                if got != want:
                    self._counts.append((call, name, None, f"returned {got!r}, expected {want!r}"))
                continue
            if not isinstance(got, torch.Tensor):
                self._counts.append((call, name, None, f"no tensor for '{name}' (got {type(got).__name__})"))
                continue
            if got.shape != want.shape or got.dtype != want.dtype:
                wrong = f"shape/dtype {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}"
                self._counts.append((call, name, None, wrong))
                continue
            self._counts.append((call, name, mismatches(got, want, self._tolerance_for(want.dtype)), None))

    def failures(self) -> list[tuple[int, str, str]]:
        """Every failed check since the last call: (call, output, what was wrong). Synchronises."""
        pending, self._counts = self._counts, []
        tensors = [count for _, _, count, _ in pending if count is not None]
        values = iter(torch.stack(tensors).cpu().tolist()) if tensors else iter(())
        failed = []
        for call, name, count, problem in pending:
            if count is None:
                failed.append((call, name, problem or "wrong"))
                continue
            bad = int(next(values))
            if bad:
                failed.append((call, name, f"{bad} elements outside tolerance"))
        return failed


def mismatches(actual: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> torch.Tensor:
    """How many elements of ``actual`` fail the comparison of the correctness trials
    (:func:`~kbench_ci.measure.correctness.close_elements`), as a 0-d int64 tensor on the
    device: no synchronisation."""
    return (~close_elements(actual.detach(), expected, tolerance)).sum()


@dataclass(slots=True)
class StagedCalls:
    """The timer hooks of one variant's batch of calls: ``calls[i]`` staged before call ``i``,
    the call's outputs checked against it after (``check`` None: not checked, a baseline's)."""

    timed: TimedSet
    calls: list[Version]
    collect: Callable[[], Mapping[str, Any]]
    check: OutputCheck | None
    first_call: int = 0  # the index of this batch's first call among the variant's checked calls

    def before(self, index: int) -> None:
        self.timed.stage(self.calls[index])

    def after(self, index: int) -> None:
        if self.check is not None:
            self.check.check(self.first_call + index, self.collect(), self.calls[index].expected)
