r"""The judge process's entry point: ``python -m kbench_ci.judge.main LIFELINE_FD [DEVICE ...]``,
started by :class:`kbench_ci.measure.parent.WorkerPool` in place of the in-process worker under
``--isolation judge``. It takes the same job tickets and writes the same events; the side
workers it starts never get a descriptor of the events file or the lifeline.

Nothing imports this module (``python -m`` warns about one imported before it runs).
"""

from __future__ import annotations

import hashlib
import os
import queue
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from kbench_ci.procgroup import become_subreaper, make_non_dumpable
from kbench_ci.wire.lifeline import watch_lifeline
from kbench_ci.wire.protocol import JobTicket

__all__ = ["main"]

#: environment: a file to which the judge appends the path of every file it opens (a test of
#: the trust boundary reads it: the judge never opens a file of the head's tree)
OPEN_LOG_ENV = "KBENCH_CI_JUDGE_OPEN_LOG"


def _log_opened_files(path: str | None) -> None:
    if not path:
        return
    log = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115  (open for the process's life)

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            log.write(os.fsdecode(args[0]) + "\n")

    sys.addaudithook(hook)


def main(argv: Sequence[str]) -> int:
    began = time.perf_counter()
    lifeline, *warm = argv
    _log_opened_files(os.environ.get(OPEN_LOG_ENV))
    # Not dumpable: a side's worker of the same user cannot read this process's memory or its
    # /proc/PID/fd (the events file) without CAP_SYS_PTRACE, which sides drop.
    make_non_dumpable()
    # The orphans of every process under the judge come to it (a side's double-forked daemon),
    # where the change of turn ends them (kbench_ci.judge.sides.end_side_strays).
    become_subreaper()
    # Its sides get the environment as it came; the judge itself compiles in process, so that
    # no process of its own is a child for end_side_strays to mistake (TorchInductor's pool).
    side_environment = dict(os.environ)
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    tickets: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    watch_lifeline(int(lifeline), tickets.put)
    from kbench_ci.judge.sides import SideWorker  # noqa: PLC0415  (no torch)
    from kbench_ci.scratch import make_scratch  # noqa: PLC0415
    from kbench_ci.suite.settings import JUDGE_SIDES_ENV  # noqa: PLC0415

    scratch = make_scratch("kbench-judge-")
    early: dict[str, SideWorker] = {}
    preload: tuple[str, ...] = ()
    if warm and os.environ.get(JUDGE_SIDES_ENV):
        # The side workers this command's cases need, started before the judge imports torch
        # and while the parent still builds: each imports torch, creates its CUDA context and
        # imports what its cases will, at the same time as the judge does.
        warm_device, *rest = warm
        preload = tuple(rest)
        labels = dict.fromkeys(label for label in os.environ[JUDGE_SIDES_ENV].split(",") if label)
        early = {label: SideWorker(label, warm_device, scratch, side_environment, preload) for label in labels}
    import torch  # noqa: PLC0415  (after the lifeline: torch takes seconds to import)

    from kbench_ci.errors import ExitCode, KbenchError  # noqa: PLC0415
    from kbench_ci.judge.breakdown import JUDGE, RECORD  # noqa: PLC0415
    from kbench_ci.judge.case import Judge  # noqa: PLC0415
    from kbench_ci.measure.gpu_info import capture_environment, read_gpu_state  # noqa: PLC0415
    from kbench_ci.results.schema import to_jsonable  # noqa: PLC0415
    from kbench_ci.wire.protocol import (  # noqa: PLC0415
        CaseFinished,
        CaseJob,
        CaseStarted,
        EnvironmentReport,
        EventSigner,
        GpuStateReport,
        LoadError,
        VariantDone,
        WorkerEvent,
        encode_event,
    )

    sys.dont_write_bytecode = True
    judge = Judge(scratch, side_environment)
    judge.adopt(early, preload)
    # the command's first case carries it (the early workers start beside it)
    RECORD.add(JUDGE, "start (imports torch)", time.perf_counter() - began)
    environment: dict[str, object] | None = None
    served = 0
    try:
        while True:
            ticket = JobTicket.decode(tickets.get())
            job_text = Path(ticket.job_path).read_bytes()
            if ticket.job_sha256 and hashlib.sha256(job_text).hexdigest() != ticket.job_sha256:
                # Not the job the parent wrote: a case run on it is worth nothing. The parent
                # reads this exit as the judge's failure, which blames no side.
                sys.stderr.write(f"the job file {ticket.job_path} is not the one the parent wrote (its hash differs)\n")
                return 1
            job = CaseJob.from_json(job_text.decode("utf-8"))
            with open(ticket.events_path, "a", encoding="utf-8") as events:
                signer = EventSigner(bytes.fromhex(ticket.key)) if ticket.key else None

                def emit(event: WorkerEvent, events: TextIO = events, signer: EventSigner | None = signer) -> None:
                    text = encode_event(event)
                    events.write((signer.sign(text) if signer is not None else text) + "\n")
                    events.flush()

                emit(CaseStarted(os.getpid(), served))
                device = torch.device(job.settings.device)
                if environment is None:
                    environment = to_jsonable(capture_environment(device))
                emit(EnvironmentReport(dict(environment or {})))
                if device.type == "cuda":
                    emit(GpuStateReport("before", to_jsonable(read_gpu_state(device))))
                try:
                    with RECORD.step(JUDGE, "the case, outside the steps named"):
                        judge.run_case(job, emit)
                except KbenchError as exc:
                    # What escapes a case here is the trusted code's: the user's ref.py, setup()
                    # or settings (exit 2: "fix your files", blamed on the user as the in-process
                    # worker does), or the machine (3). Every side was checked against that
                    # reference, so each carries the error (a compare reads the head's).
                    user = exc.exit_code == ExitCode.USAGE
                    for side in job.sides:
                        emit(LoadError(side.label, type(exc).__name__, int(exc.exit_code), exc.message, exc.hint,
                                       "user" if user else "kernel"))
                    for label in job.variant_labels():
                        emit(VariantDone(job.failed_result(label, exc.one_line())))
                if device.type == "cuda":
                    emit(GpuStateReport("after", to_jsonable(read_gpu_state(device))))
                served += 1
                RECORD.write(job.case_id)
                emit(CaseFinished())
    finally:
        judge.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
