"""What the judge keeps of a case's sides: each side's worker, result and samples, and the
versions of the contents (inputs and the expected outputs, which never leave the judge)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kbench_ci.judge.arena import Arena
from kbench_ci.judge.clock import CallStamps
from kbench_ci.judge.sides import SideWorker
from kbench_ci.measure.inputs import InputSet
from kbench_ci.results.model import VariantResult
from kbench_ci.wire.protocol import WorkerEvent
from kbench_ci.wire.sideproto import LentTensor

Emit = Callable[[WorkerEvent], None]

#: the worker of a compare's head's own ref.py, where the pull request changed it
#: (kbench_ci.judge.trials.OwnReference): the pull request's code under a baseline's role, never
#: timed, never trusted, never reported as a variant
HEAD_REFERENCE = "head-reference"


@dataclass(slots=True)
class Side:
    label: str
    role: str  # "solution" or "baseline"
    worker: SideWorker
    result: VariantResult
    arenas: list[Arena] = field(default_factory=list)
    rounds: list[tuple[float, ...]] = field(default_factory=list)
    round_versions: list[tuple[int, ...]] = field(default_factory=list)
    discarded: list[float] = field(default_factory=list)
    checked: int = 0
    #: the arguments its own setup() gives (side.serve.describe_argument's form), if it has one
    template: dict[str, str] = field(default_factory=dict)
    #: the sandbox layers its worker put itself in (side.harden's names, as it says)
    layers: tuple[str, ...] = ()
    #: its own setup()'s tensors, other arguments, outputs and in-place outputs (Loaded's)
    layout: tuple[LentTensor, ...] = ()
    scalars: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    inplace: tuple[str, ...] = ()
    #: buffers lent for other purposes than timing (the inbox of its own setup())
    arenas_extra: list[Arena] = field(default_factory=list)
    #: its timed calls as the judge's clock saw them, with its own time of each (ms)
    judged: list[tuple[CallStamps, float]] = field(default_factory=list)
    #: per judged call where it reported one: its own span from the go to its start event (us)
    leads: list[float] = field(default_factory=list)
    #: per entry of :attr:`judged` (and of :attr:`leads`), the calls under that span: the
    #: entry's figures are the span's, divided by them (handoff.Handoff.batch)
    batches: list[int] = field(default_factory=list)
    #: per batch of two calls or more, its own time of the later calls (their mean) over the
    #: first's: the first follows the judge's flush, the later ones the side's
    later_over_first: list[float] = field(default_factory=list)
    #: its own time of each of its correctness trials (us): a trusted side's sizes a batch
    trial_own_us: list[float] = field(default_factory=list)
    #: the versions (Version.number) it has been given, and pairs of the judge's spans (us) of a
    #: call on a version new to it and, next to that call in the same round, of one on a version
    #: it had seen
    seen: set[int] = field(default_factory=set)
    memo_pairs: list[tuple[float, float]] = field(default_factory=list)
    #: a compare's head whose changed ref.py was accepted: checked against its own reference's
    #: outputs (Version.own_expected), not the base's
    own_reference: bool = False

    @property
    def ok(self) -> bool:
        return self.result.status == "ok"

    def fail(self, status: str, message: str) -> None:
        self.result = replace(self.result, status=status, message=message)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Version:
    inputs: InputSet
    expected: dict[str, Any]
    #: unique in the judge's process: which versions a side has seen
    number: int = 0
    #: where a compare's head changed ref.py: its own reference's outputs for these inputs,
    #: computed in a process of its own (the pull request's code), copied into the judge
    own_expected: dict[str, Any] | None = None
