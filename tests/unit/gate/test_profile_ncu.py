"""`compare --profile` runs each side once under ncu; its CSV (ncu 2025's
`--csv --print-units base` layout: one row per kernel and metric) read into figures; a missing
ncu, counters the user may not read, or a side that fails are one line each, never a failure.
ncu itself is stood in for by a script: this machine has none (nor a GPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kbench_ci.gate.profile import METRICS, ncu_command, parse_ncu_csv, profile_sides
from kbench_ci.report.why import profile_lines
from kbench_ci.results.model import MeasureSettings
from kbench_ci.results.outcome import ProfiledKernel, SideProfile
from kbench_ci.wire.protocol import CaseJob, SideSpec

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def rows(kernel_id: int, name: str, values: dict[str, str]) -> list[str]:
    return [f'"{kernel_id}","4242","python3","host","{name}","1","7","(256, 1, 1)","(65536, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{"byte" if "bytes" in metric else "%"}","{value}"'
            for metric, value in values.items()]


SAMPLE = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    "==PROF== Profiling \"vadd_kernel\": 0%....50%....100% - 8 passes",
    "some output the program printed",
    HEADER,
    *rows(0, "vadd_kernel", {"gpu__time_duration.sum": "61,344", "dram__bytes_read.sum": "134,217,728",
                             "dram__bytes_write.sum": "67,108,864",
                             "sm__warps_active.avg.pct_of_peak_sustained_active": "84.21",
                             "sm__throughput.avg.pct_of_peak_sustained_elapsed": "11.5",
                             "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "91.3"}),
    *rows(1, "reduce_tail", {"gpu__time_duration.sum": "3,000", "dram__bytes_read.sum": "1,024"}),
    "==PROF== Disconnected from process 4242",
])


def test_ncus_csv_gives_each_kernels_figures_in_launch_order() -> None:
    vadd, tail = parse_ncu_csv(SAMPLE)
    assert vadd == ProfiledKernel(name="vadd_kernel", duration_ns=61344.0, dram_read_bytes=134217728.0,
                                  dram_write_bytes=67108864.0, occupancy_pct=84.21, sm_throughput_pct=11.5,
                                  memory_throughput_pct=91.3)
    assert tail.name == "reduce_tail" and tail.duration_ns == 3000.0 and tail.occupancy_pct is None
    assert parse_ncu_csv("==PROF== no kernels were profiled\n") == ()


def test_the_command_keeps_the_clocks_and_profiles_only_the_nvtx_range(tmp_path: Path) -> None:
    command = ncu_command("/opt/ncu", tmp_path / "job.json", "head")
    assert command[:6] == ["/opt/ncu", "--clock-control", "none", "--nvtx", "--nvtx-include", "kbench_ci_profile/"]
    assert command[command.index("--metrics") + 1].split(",") == list(METRICS)
    assert command[-4:] == ["-m", "kbench_ci.measure.profile_call", str(tmp_path / "job.json"), "head"]


def job() -> CaseJob:
    settings = MeasureSettings(device="cuda", seed=42, correctness_trials=1, timing_method="cuda_event", num_warmup=1,
                               trials_per_round=3, discard_first=0, rounds=1, flush_l2=True)
    sides = tuple(SideSpec(label=label, solution="k.cu", ref="ref.py", implementation="cuda-cpp") for label in ("base", "head"))
    return CaseJob(case_id="k[N=1]", dims={"N": 1}, sides=sides, baselines=(), settings=settings)


def fake_ncu(tmp_path: Path, body: str) -> str:
    script = tmp_path / "ncu"
    script.write_text(f"#!{sys.executable}\nimport sys, json\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_each_side_is_profiled_in_a_process_of_its_own_and_read(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    sample = tmp_path / "sample.csv"
    sample.write_text(SAMPLE)
    ncu = fake_ncu(tmp_path, f"job = open(sys.argv[-2]).read()\n"
                             f"open({str(record)!r}, 'a').write(json.dumps([sys.argv[1:], job]) + '\\n')\n"
                             f"print(open({str(sample)!r}).read())")
    base, head = profile_sides(job(), ["base", "head"], ncu=ncu)
    assert base.label == "base" and head.label == "head" and len(head.kernels) == 2 and head.problem is None
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert [argv[-1] for argv, _ in calls] == ["base", "head"]
    assert CaseJob.from_json(calls[0][1]) == job()  # the side is loaded from the case's own job


def test_no_ncu_no_permission_and_a_failing_side_are_one_line_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kbench_ci.gate.profile.shutil.which", lambda name: None)
    (missing,) = profile_sides(job(), ["head"])
    assert missing.problem == "ncu is not on PATH: install Nsight Compute to profile"
    denied = fake_ncu(tmp_path, 'print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission"); sys.exit(1)')
    (side,) = profile_sides(job(), ["head"], ncu=denied)
    assert side.kernels == () and "ERR_NVGPUCTRPERM" in (side.problem or "") and "NVreg_RestrictProfilingToAdminUsers" in (side.problem or "")
    failing = fake_ncu(tmp_path, 'print("==PROF== Connected"); print("RuntimeError: CUDA error: out of memory"); sys.exit(2)')
    (side,) = profile_sides(job(), ["head"], ncu=failing)
    assert side.problem == "ncu exited 2 with no kernel profiled: RuntimeError: CUDA error: out of memory"


def test_the_details_show_base_and_head_side_by_side() -> None:
    base = SideProfile("base", kernels=(ProfiledKernel("vadd", duration_ns=60000.0, dram_read_bytes=1.2e8,
                                                        dram_write_bytes=6.0e7, occupancy_pct=80.0),))
    head = SideProfile("head", kernels=(ProfiledKernel("vadd", duration_ns=90000.0, dram_read_bytes=1.2e8,
                                                        dram_write_bytes=6.0e7, occupancy_pct=30.0),
                                        ProfiledKernel("tail", duration_ns=10000.0, occupancy_pct=10.0)))
    text = "\n".join(profile_lines([base, head, SideProfile("baseline", problem="ncu is not on PATH")]))
    table_rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                  for line in text.splitlines() if line.startswith("| ")}
    assert table_rows["GPU time of the call (us)"] == ["60.00", "100.00"]
    assert table_rows["achieved occupancy (%)"] == ["80.0", "28.0"]  # (30 x 90 + 10 x 10) / 100
    assert "- baseline: not profiled: ncu is not on PATH" in text
