"""Input contents the kernel cannot choose or predict, from trusted code only.

Every call's contents (correctness trials and timed calls alike) come from a trusted setup()
called with a seed drawn from the OS's entropy: a side's worker never learns the seed, never
runs the setup() that makes them, and so cannot have computed their answers while untimed.
Which setup() is trusted: in ``compare`` the base's (base code is trusted; a head that wants
other inputs has moved the goalposts), in ``bench`` and ``run`` the one in the user's ref.py.
The names, shapes, dtypes and strides come from there too.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import torch

from kbench_ci.cuda.signature import read_solve_signature
from kbench_ci.errors import UsageError
from kbench_ci.measure.inputs import InputSet
from kbench_ci.measure.setup_inputs import inputs_from_setup
from kbench_ci.measure.signature_inputs import signature_inputs
from kbench_ci.measure.usercode import Problem, load_module, require_function
from kbench_ci.wire.protocol import CaseJob

#: the implementation kinds whose solution is a compiled library (their setup() is in ref.py)
_COMPILED = frozenset({"cuda-cpp", "cutlass"})

Maker = Callable[[int], InputSet]


class NoTrustedSetup(UsageError):
    """No trusted code says what this case's inputs are: only the solution's own setup()."""


def entropy_seed() -> int:
    """A seed from the OS's entropy (63 bits: torch's and numpy's seeding take it as it is)."""
    return secrets.randbits(63)


def trusted_maker(job: CaseJob, problem: Problem, device: torch.device) -> tuple[Maker, str]:
    """The trusted setup() of ``job`` as a maker of input sets, and where it comes from."""
    trusted = job.sides[0]
    comparing = len(job.sides) == 2
    if problem.setup is None and trusted.implementation in _COMPILED:
        # The .cu's solve() signature says what to pass: parsed as text, never run (the base's
        # source in compare; in bench the user's, whose parse is kbench-ci's own code).
        source = Path(trusted.solution)
        make_inputs, _ = signature_inputs(
            read_solve_signature(source), problem, job.dims, device, trusted.ptr_sizes, trusted.ptr_size,
        )
        return make_inputs, f"the solve() signature of {'the base' if comparing else 'the solution'}'s {source.name}"
    if problem.setup is not None:
        setup, where = problem.setup, f"{problem.path.name} setup()"
    elif comparing and trusted.implementation not in _COMPILED:
        # The base's solution module: base code, trusted; imported for its setup() alone.
        path = Path(trusted.solution)
        setup = require_function(load_module(path, role="solution"), "setup", role="solution", path=path)
        where = f"the base's {path.name} setup()"
    else:
        raise NoTrustedSetup(
            f"--isolation judge needs the inputs of case {job.case_id} from trusted code, and there is none: "
            "the solution's own setup() is the code under test",
            hint=f"define setup(**dims) in {problem.path.name}, or run this case with --isolation process",
        )

    def make(seed: int) -> InputSet:
        return inputs_from_setup(setup, job.dims, seed=seed, device=device, where=where)

    return make, where
