"""`kbench-ci bench` on a real GPU: both example kinds end to end, and every cheating CUDA C++
and Python kernel caught. Skipped cleanly without CUDA (see tests/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "examples" / "softmax_cuda"
LAYERNORM = ROOT / "examples" / "layernorm_triton"
CHEATS_CUDA = ROOT / "tests" / "fixtures" / "cheats_cuda"
CHEATS_PY = ROOT / "tests" / "fixtures" / "cheats_py"


def kbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "kbench_ci", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
        env=dict(os.environ),
    )
    print(completed.stdout[-4000:])
    print(completed.stderr[-2000:], file=sys.stderr)
    return completed


def variants(output_dir: Path) -> dict[str, dict]:
    data = json.loads((output_dir / "results.json").read_text())
    return {v["label"]: v for v in data["case"]["variants"]}


@pytest.fixture(scope="module")
def built_cheats(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every cheat .cu copied next to the softmax ref and built with `kbench-ci build`."""
    directory = tmp_path_factory.mktemp("cheats_cuda")
    for path in CHEATS_CUDA.iterdir():
        shutil.copy(path, directory / path.name)
    sources = sorted(str(p) for p in directory.glob("*.cu"))
    completed = kbench("build", *sources)
    assert completed.returncode == 0, completed.stderr
    return directory


def test_cuda_softmax_end_to_end(tmp_path: Path) -> None:
    assert kbench("build", str(SOFTMAX / "softmax.cu")).returncode == 0
    completed = kbench(
        "bench", str(SOFTMAX / "softmax.cu"), "--implementation=cuda-cpp", "--baselines=pytorch-eager,torch-compile",
        f"--ref={SOFTMAX / 'ref.py'}", f"--output-dir={tmp_path}", "--M=1024", "--N=1024",
    )
    assert completed.returncode == 0
    found = variants(tmp_path)
    assert found["solution"]["status"] == "ok"
    assert len(found["solution"]["rounds_ms"][0]) == 100
    assert found["torch-compile"]["status"] == "ok"
    assert "pointer input: 1048576 elements (default rule: M*N)" in completed.stderr
    report = (tmp_path / "benchmark.md").read_text()
    assert "NVIDIA" in report and "cuda_event" in report and "vs `pytorch-eager`" in report


def test_triton_layernorm_end_to_end(tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(LAYERNORM / "layernorm.py"), "--implementation=triton", "--baselines=pytorch-eager",
        f"--ref={LAYERNORM / 'ref.py'}", f"--output-dir={tmp_path}", "--M=1024", "--N=1024",
    )
    assert completed.returncode == 0
    found = variants(tmp_path)
    assert found["solution"]["status"] == "ok" and found["solution"]["post_timing_check"] is True


@pytest.mark.parametrize(
    ("cheat", "message"),
    [
        ("writes_nothing", "elements outside"),
        ("writes_half", "elements outside"),
        ("overwrites_input", "modified its input(s) input"),
        ("side_stream", "elements outside"),
        ("stale_output", "elements outside"),
    ],
)
def test_cuda_cheats_are_caught(cheat: str, message: str, built_cheats: Path, tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(built_cheats / f"{cheat}.cu"), f"--ref={SOFTMAX / 'ref.py'}", "--baselines=pytorch-eager",
        f"--output-dir={tmp_path}", "--M=256", "--N=1024", "--num-trials=20",
    )
    assert completed.returncode == 1
    found = variants(tmp_path)
    assert found["solution"]["status"] == "incorrect"
    assert message in found["solution"]["message"]
    assert found["solution"]["rounds_ms"] == []
    assert found["pytorch-eager"]["status"] == "ok"


def test_python_side_stream_cheat_is_caught(tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(CHEATS_PY / "side_stream.py"), "--implementation=pytorch", f"--ref={CHEATS_PY / 'ref.py'}",
        f"--output-dir={tmp_path}", "--N=65536", "--num-trials=20",
    )
    assert completed.returncode == 1
    assert variants(tmp_path)["solution"]["status"] == "incorrect"


def test_illegal_address_is_blamed_and_baseline_survives(built_cheats: Path, tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(built_cheats / "illegal_address.cu"), f"--ref={SOFTMAX / 'ref.py'}", "--baselines=pytorch-eager",
        f"--output-dir={tmp_path}", "--M=256", "--N=1024", "--num-trials=20",
    )
    assert completed.returncode == 1
    found = variants(tmp_path)
    assert found["solution"]["status"] == "error"
    assert found["pytorch-eager"]["status"] == "ok" and found["pytorch-eager"]["rounds_ms"]


def test_hanging_cuda_kernel_times_out(built_cheats: Path, tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(built_cheats / "hang.cu"), f"--ref={SOFTMAX / 'ref.py'}", f"--output-dir={tmp_path}",
        "--M=256", "--N=1024", "--num-trials=20", "--timeout=40",
    )
    assert completed.returncode == 1
    assert "timed out" in variants(tmp_path)["solution"]["message"]


def test_missing_shared_library_says_how_to_build(tmp_path: Path) -> None:
    source = tmp_path / "softmax.cu"
    shutil.copy(SOFTMAX / "softmax.cu", source)
    completed = kbench("bench", str(source), f"--ref={SOFTMAX / 'ref.py'}", f"--output-dir={tmp_path / 'out'}", "--M=8", "--N=8")
    assert completed.returncode == 2
    assert "softmax.so is missing" in completed.stderr and "kbench-ci build" in completed.stderr


@pytest.mark.parametrize("cheat", ["replays_by_identity", "replays_by_pointer"])
def test_results_replayed_on_the_gpu_are_incorrect(cheat: str, tmp_path: Path) -> None:
    """The memoising cheat on a GPU: outputs computed once per input tensor (or buffer), then copied."""
    completed = kbench(
        "bench", str(CHEATS_PY / f"{cheat}.py"), "--implementation=pytorch", f"--ref={CHEATS_PY / 'ref.py'}",
        f"--output-dir={tmp_path}", "--N=16777216", "--baselines=pytorch-eager",
    )
    assert completed.returncode == 1
    solution = variants(tmp_path)["solution"]
    assert solution["status"] == "incorrect"
    if cheat == "replays_by_identity":
        assert "was given new input contents" in solution["message"]


def test_honest_python_kernel_passes_every_timed_check_on_the_gpu(tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(CHEATS_PY / "honest.py"), "--implementation=pytorch", f"--ref={CHEATS_PY / 'ref.py'}",
        f"--output-dir={tmp_path}", "--N=16777216",
    )
    assert completed.returncode == 0
    fresh = variants(tmp_path)["solution"]["fresh_inputs"]
    assert "versions of the inputs" in fresh and "timed calls checked against the reference" in fresh
    assert "memoisation probe: new content vs the same content one call before" in fresh


ESCAPE_N = "--N=4194304"  # 16 MiB per tensor: each of the cheats' 20 passes takes ~20 us on an H200


@pytest.mark.parametrize(
    ("cheat", "message"),
    [
        ("side_stream_unjoined", "ended after the timer stopped"),
        ("side_stream_early", "ran before the timer started"),
        ("host_thread", "another host thread"),
    ],
)
def test_gpu_work_outside_the_timer_is_incorrect(cheat: str, message: str, tmp_path: Path) -> None:
    """The cheats pass the correctness checks (their outputs are right when read); the CUPTI
    audit sees their work outside the events."""
    completed = kbench(
        "bench", str(CHEATS_PY / f"{cheat}.py"), "--implementation=pytorch", f"--ref={CHEATS_PY / 'ref.py'}",
        f"--output-dir={tmp_path}", ESCAPE_N, "--baselines=pytorch-eager",
    )
    found = variants(tmp_path)
    solution = found["solution"]
    audit = solution["escape_audit"]
    print(f"{cheat}: status {solution['status']}; event {audit and audit['event_ms']} ms; "
          f"CUPTI span {audit and audit['cupti_span_ms']} ms; escaped {audit and audit['escaped_ms']} ms; {solution['message']}")
    assert completed.returncode == 1
    assert solution["status"] == "incorrect"
    if cheat == "side_stream_early" and "does not match the reference for them" in solution["message"]:
        # Work launched on its own stream before the start event does not wait for the staging
        # of each timed call's new inputs: the per-call output check sees its stale result before
        # the audit runs (on the H200: call 71, 31 of the round's 101 calls).
        assert "timed call" in solution["message"]
        return
    assert solution["correctness"]["passed"] is True  # caught by the audit, not by the checks
    assert "GPU work escaped the timer" in solution["message"] and message in solution["message"]
    assert audit["status"] == "escaped"
    assert found["pytorch-eager"]["escape_audit"]["status"] == "passed"
    assert "## GPU work audit (CUPTI)" in (tmp_path / "benchmark.md").read_text()


def test_honest_multi_stream_kernel_passes_and_is_timed_as_cuptis_span(tmp_path: Path) -> None:
    completed = kbench(
        "bench", str(CHEATS_PY / "multi_stream_honest.py"), "--implementation=pytorch", f"--ref={CHEATS_PY / 'ref.py'}",
        f"--output-dir={tmp_path}", ESCAPE_N,
    )
    assert completed.returncode == 0
    solution = variants(tmp_path)["solution"]
    audit = solution["escape_audit"]
    timed = statistics.median(s for r in solution["rounds_ms"] for s in r)
    span = statistics.median(audit["cupti_span_ms"])
    print(f"multi-stream: timed median {timed * 1e3:.2f} us, CUPTI span median {span * 1e3:.2f} us, "
          f"difference {(timed / span - 1) * 100:+.2f}%, streams {audit['streams']}, audit cost {audit['cost_s']:.3f} s")
    assert audit["status"] == "passed" and len(audit["streams"]) >= 2
    assert abs(timed / span - 1) < 0.03


def test_cuda_cpp_on_the_legacy_default_stream_passes_the_audit(tmp_path: Path) -> None:
    assert kbench("build", str(SOFTMAX / "softmax.cu")).returncode == 0
    completed = kbench(
        "bench", str(SOFTMAX / "softmax.cu"), "--implementation=cuda-cpp", f"--ref={SOFTMAX / 'ref.py'}",
        f"--output-dir={tmp_path}", "--M=4096", "--N=4096",
    )
    assert completed.returncode == 0
    audit = variants(tmp_path)["solution"]["escape_audit"]
    print(f"softmax.cu: event {audit['event_ms']} ms, CUPTI span {audit['cupti_span_ms']} ms, cost {audit['cost_s']:.3f} s")
    assert audit["status"] == "passed"
