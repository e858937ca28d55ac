"""``compare --profile``: ncu on base and head of each slower or faster case, after its timing,
never inside it: DRAM bytes, achieved occupancy, SM and memory throughput, base against head.

Each side runs in a process of its own under ``ncu --clock-control none`` (the clocks as the
timing saw them), which profiles only the kernels of one warm call inside an NVTX range
(measure/profile_call.py). A missing ncu, or counters the user may not read (often root only),
is one line in the report, never a failure.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kbench_ci.procgroup import module_command, user_code_environment
from kbench_ci.results.outcome import ProfiledKernel, SideProfile
from kbench_ci.wire.protocol import PROFILE_RANGE, CaseJob

#: ncu metric → ProfiledKernel field
METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_throughput_pct",
}
#: seconds one side may take under ncu (it replays every kernel once per metric pass)
PROFILE_TIMEOUT_S = 600.0
_NO_PERMISSION = "ERR_NVGPUCTRPERM"


def ncu_command(ncu: str, job_file: Path, label: str) -> list[str]:
    return [
        ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", f"{PROFILE_RANGE}/", "--metrics", ",".join(METRICS),
        "--csv", "--print-units", "base",
        *module_command(sys.executable, "kbench_ci.measure.profile_call", str(job_file), label, user_code=True),
    ]


def parse_ncu_csv(text: str) -> tuple[ProfiledKernel, ...]:
    """The kernels of ncu's ``--csv`` output (one row per kernel and metric), in launch order;
    ncu's own ``==PROF==`` lines and the program's output around the table are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return ()
    rows = csv.DictReader(io.StringIO("\n".join(line for line in lines[start:] if line.startswith('"'))))
    kernels: dict[str, dict[str, object]] = {}
    for row in rows:
        field = METRICS.get(row.get("Metric Name") or "")
        key = row.get("ID") or ""
        entry = kernels.setdefault(key, {"name": row.get("Kernel Name") or "?"})
        if field is not None:
            entry[field] = _number(row.get("Metric Value"))
    return tuple(ProfiledKernel(**entry) for entry in kernels.values())  # type: ignore[arg-type]


def _number(text: str | None) -> float | None:
    try:
        return float((text or "").replace(",", ""))
    except ValueError:
        return None


def profile_sides(job: CaseJob, labels: Sequence[str], *, ncu: str | None = None) -> tuple[SideProfile, ...]:
    """Each side of ``labels`` profiled in turn; a problem (no ncu, no permission, a failing
    call) is that side's ``problem``."""
    found = ncu or shutil.which("ncu")
    if found is None:
        return tuple(SideProfile(label, problem="ncu is not on PATH: install Nsight Compute to profile") for label in labels)
    with tempfile.TemporaryDirectory(prefix="kbench-ci-profile-") as folder:
        job_file = Path(folder) / "job.json"
        job_file.write_text(job.to_json(), encoding="utf-8")
        return tuple(_one_side(found, job_file, label) for label in labels)


def _one_side(ncu: str, job_file: Path, label: str) -> SideProfile:
    try:
        done = subprocess.run(
            ncu_command(ncu, job_file, label), capture_output=True, text=True, timeout=PROFILE_TIMEOUT_S,
            env=user_code_environment(),
        )
    except subprocess.TimeoutExpired:
        return SideProfile(label, problem=f"ncu ran past {PROFILE_TIMEOUT_S:g} s")
    except OSError as exc:
        return SideProfile(label, problem=f"ncu could not start: {exc}")
    output = done.stdout + "\n" + done.stderr
    if _NO_PERMISSION in output:
        return SideProfile(label, problem=(
            "ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): run as root, or let every "
            "user profile (NVreg_RestrictProfilingToAdminUsers=0)"
        ))
    kernels = parse_ncu_csv(done.stdout)
    if done.returncode != 0 or not kernels:
        last = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "no output")
        return SideProfile(label, problem=f"ncu exited {done.returncode} with no kernel profiled: {last[:300]}")
    return SideProfile(label, kernels=kernels)
