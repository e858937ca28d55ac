"""One call of one side of a case inside an NVTX range, for ncu (``compare --profile``):

    ncu ... --nvtx --nvtx-include kbench_ci_profile/ python -m kbench_ci.measure.profile_call JOB LABEL

JOB is a CaseJob's JSON file, LABEL the side to call. The side is loaded as the worker loads it,
called once outside the range (JIT, autotuning, lazy allocation) and once inside it, so ncu
profiles exactly the kernels of one warm call and none of the harness's.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from kbench_ci.measure.child import load_solution
from kbench_ci.measure.usercode import load_problem
from kbench_ci.wire.protocol import PROFILE_RANGE, CaseJob


def main(argv: list[str]) -> int:
    job = CaseJob.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    (side,) = [side for side in job.sides if side.label == argv[1]]
    device = torch.device(job.settings.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    solution = load_solution(side, load_problem(Path(side.ref)), job, device)
    inputs = solution.make_inputs(job.settings.seed)
    kwargs = dict(inputs.kwargs)
    solution.kernel.call(kwargs)
    torch.cuda.synchronize(device)
    with torch.cuda.nvtx.range(PROFILE_RANGE):
        solution.kernel.call(kwargs)
        torch.cuda.synchronize(device)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
