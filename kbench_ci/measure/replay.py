"""Catching results replayed from a cache: a solution that computes its outputs once per input
tensor (keyed on the tensor object or its data pointer) and afterwards only copies them out
passes every check that reuses the same tensors with the same contents, and times as a copy.

Before a few timed calls (one in each of the first :data:`AUDITED_ROUNDS` rounds, at a position
drawn from the seed and the round, so base and head are audited at the same calls) another
version of the inputs is copied into the very same input tensors, outside the timed region. The
outputs of exactly those calls are snapshot after them and the original contents put back. After
timing, each snapshot is checked against the reference run on the version it was given: outputs
that belong to other inputs make the solution ``incorrect``.

The versions are made by the solution's own ``setup`` at other seeds, so they have the shapes and
dtypes of the originals; their memory is capped (:data:`MAX_VERSION_BYTES`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from kbench_ci.measure.inputs import InputSet

#: rounds with one audited call each (the first ones: every timed variant has them)
AUDITED_ROUNDS = 4
#: other input versions, used in turn
INPUT_VERSIONS = 2
#: versions and the saved originals together may take at most this much memory
MAX_VERSION_BYTES = 4 * 2**30
#: the versions are setup() at seed + this + k: far from the correctness trials' seed + k
VERSION_SEED_OFFSET = 10_007


def input_names(inputs: InputSet) -> tuple[str, ...]:
    """The tensors a kernel reads: every tensor argument that is not an output."""
    return tuple(
        name for name, value in inputs.kwargs.items() if isinstance(value, torch.Tensor) and name not in inputs.output_names
    )


def _nbytes(tensors: Mapping[str, Any]) -> int:
    return sum(v.numel() * v.element_size() for v in tensors.values() if isinstance(v, torch.Tensor))


@dataclass(slots=True)
class AuditMaterial:
    """For one set of timed tensors (shared by the variants timed on it): the original input
    contents and the other versions. ``versions`` is empty when none could be made (a ``setup``
    that ignores its seed, shapes that differ, or too much memory) and ``reason`` says why."""

    originals: dict[str, torch.Tensor]
    versions: list[InputSet]
    reason: str | None = None

    @staticmethod
    def prepare(inputs: InputSet, make_inputs: Callable[[int], InputSet]) -> AuditMaterial:
        names = input_names(inputs)
        if not names:
            return AuditMaterial({}, [], "the kernel takes no input tensors")
        original_bytes = _nbytes({n: inputs.kwargs[n] for n in names})
        if original_bytes * (INPUT_VERSIONS + 1) > MAX_VERSION_BYTES:
            return AuditMaterial({}, [], f"inputs of {original_bytes / 2**30:.1f} GiB are too large to keep versions of")
        versions = []
        for k in range(INPUT_VERSIONS):
            version = make_inputs(inputs.seed + VERSION_SEED_OFFSET + k)
            same_layout = all(
                isinstance(version.kwargs.get(n), torch.Tensor)
                and (version.kwargs[n].shape, version.kwargs[n].dtype) == (inputs.kwargs[n].shape, inputs.kwargs[n].dtype)
                for n in names
            )
            if not same_layout:
                return AuditMaterial({}, [], "setup() at another seed gives inputs of other shapes or dtypes")
            if all(torch.equal(version.kwargs[n], inputs.kwargs[n]) for n in names):
                return AuditMaterial({}, [], "setup() gives the same inputs at every seed")
            versions.append(version)
        originals = {n: inputs.kwargs[n].detach().clone() for n in names}
        return AuditMaterial(originals, versions)


def audited_position(seed: int, round_index: int, calls_per_round: int, first_kept: int) -> int | None:
    """The call of round ``round_index`` that is audited (an index into the round's calls, past
    the discarded ones), the same for every variant; None for rounds that are not audited."""
    if round_index >= AUDITED_ROUNDS or first_kept >= calls_per_round:
        return None
    return random.Random(seed * 1_000_003 + round_index).randrange(first_kept, calls_per_round)


@dataclass(slots=True)
class AuditRecord:
    """One audited timed call: which call, which input version it was given, what it produced."""

    round_index: int
    call_index: int
    version: int
    outputs: dict[str, Any]


@dataclass(slots=True)
class RoundAudit:
    """The timer hooks for one variant's round: swap a version in before the audited call,
    snapshot its outputs and restore the originals after it."""

    material: AuditMaterial
    kwargs: dict[str, Any]
    position: int | None
    round_index: int
    collect: Callable[[], Mapping[str, Any]]
    records: list[AuditRecord] = field(default_factory=list)

    @property
    def version(self) -> int:
        return self.round_index % len(self.material.versions)

    def before(self, index: int) -> None:
        if index != self.position or not self.material.versions:
            return
        version = self.material.versions[self.version]
        for name in self.material.originals:
            self.kwargs[name].copy_(version.kwargs[name])

    def after(self, index: int) -> None:
        if index != self.position or not self.material.versions:
            return
        outputs = {
            name: value.detach().clone() if isinstance(value, torch.Tensor) else value
            for name, value in self.collect().items()
        }
        self.records.append(AuditRecord(self.round_index, index, self.version, outputs))
        for name, original in self.material.originals.items():
            self.kwargs[name].copy_(original)
