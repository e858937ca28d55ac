"""``--gpus all | I,J,...`` for ``run`` and ``compare``: parsing, and what is refused before
anything runs. The GPU models are mocked."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kbench_ci.cli import options
from kbench_ci.cli.app import app
from kbench_ci.errors import EnvironmentProblem, UsageError
from kbench_ci.results.outcome import GpuSlot

H200 = "NVIDIA H200"
A100 = "NVIDIA A100-SXM4-80GB"


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names = [H200, H200, H200, H200]
    monkeypatch.setattr(options, "cuda_device_names", lambda: names)
    # one GPU named: resolve_device as for --gpu (the driver's view, mocked here)
    monkeypatch.setattr(options, "resolve_device", lambda device, gpu: f"cuda:{0 if gpu is None else gpu}")
    return names


def test_without_gpus_nothing_changes(models: list[str]) -> None:
    assert options.resolve_gpus("auto", None, None) == ("cuda:0", ())
    assert options.resolve_gpus("auto", 2, None) == ("cuda:2", ())


def test_a_list_all_and_one_gpu(models: list[str]) -> None:
    device, slots = options.resolve_gpus("auto", None, "0, 1,3")
    assert device == "cuda:0"
    assert slots == (GpuSlot(0, H200, 0), GpuSlot(1, H200, 1), GpuSlot(3, H200, 2))
    assert [slot.index for slot in options.resolve_gpus("cuda", None, "all")[1]] == [0, 1, 2, 3]
    # One GPU is today's --gpu N: no slots, no GPU column.
    assert options.resolve_gpus("auto", None, "2") == ("cuda:2", ())


def test_all_on_a_one_gpu_machine_is_one_gpu(models: list[str]) -> None:
    del models[1:]
    assert options.resolve_gpus("auto", None, "all") == ("cuda:0", ())


def test_an_index_twice_is_allowed_with_a_warning(models: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    _, slots = options.resolve_gpus("auto", None, "0,0")
    assert slots == (GpuSlot(0, H200, 0), GpuSlot(0, H200, 1))
    warning = capsys.readouterr().err
    assert "two workers on one GPU" in warning and "not valid" in warning


@pytest.mark.parametrize("text", ["", "0,", "a", "0;1", "-1", "1.5", "0,,1", "al l"])
def test_bad_values(models: list[str], text: str) -> None:
    with pytest.raises(UsageError, match="not a list of GPU indices"):
        options.resolve_gpus("auto", None, text)


def test_an_index_that_does_not_exist(models: list[str]) -> None:
    with pytest.raises(UsageError) as caught:
        options.resolve_gpus("auto", None, "0,7")
    assert "GPU 7 does not exist; this machine has 4 CUDA device(s)" in caught.value.one_line()
    assert "0..3" in caught.value.one_line()


def test_mixed_models_are_refused_naming_the_models_and_the_fix(models: list[str]) -> None:
    models[2] = A100
    with pytest.raises(UsageError) as caught:
        options.resolve_gpus("auto", None, "all")
    line = caught.value.one_line()
    assert "mixes GPU models" in line and f"2: {A100}" in line and f"0: {H200}" in line
    assert "--gpus 0,1,3" in line and "\n" not in line


def test_gpus_with_gpu_or_on_the_cpu_is_bad_usage(models: list[str]) -> None:
    with pytest.raises(UsageError, match="--gpu and --gpus"):
        options.resolve_gpus("auto", 1, "0,1")
    with pytest.raises(UsageError, match="--device cpu"):
        options.resolve_gpus("cpu", None, "0,0")
    with pytest.raises(UsageError, match="unknown --device"):
        options.resolve_gpus("tpu", None, "0,1")


def test_no_cuda_at_all_is_an_environment_problem(models: list[str]) -> None:
    models.clear()
    with pytest.raises(EnvironmentProblem, match="no CUDA device"):
        options.resolve_gpus("auto", None, "0,1")


@pytest.mark.parametrize("command", [["run"], ["compare", "--base", "main"]])
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gpus", "0,x"], "not a list of GPU indices"),
        (["--gpus", "0,1", "--gpu", "1"], "--gpu and --gpus cannot be given together"),
        (["--gpus", "0,0", "--device", "cpu"], "--device cpu"),
        (["--gpus", "0,9"], "GPU 9 does not exist"),
        (["--gpus", "0,2"], "mixes GPU models"),
    ],
)
def test_the_commands_exit_2_with_one_line(
    models: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, command: list[str], args: list[str], says: str
) -> None:
    models[2] = A100
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [*command, *args])
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not (tmp_path / "bench_out" / "results.json").exists()


def test_progress_names_the_gpu_and_counts_cases_finished_out_of_order(capsys: pytest.CaptureFixture[str]) -> None:
    from kbench_ci.cli.console import ProgressLine, suite_progress  # noqa: PLC0415
    from kbench_ci.gate.progress import SuiteProgress  # noqa: PLC0415

    now = [0.0]
    progress = ProgressLine(tty=False, heartbeat_s=3600)
    on_progress = suite_progress(progress, clock=lambda: now[0])
    on_progress(SuiteProgress(0, 3, "", "start"))
    now[0] = 30.0
    # case 2 (GPU 1) finishes before case 1 (GPU 0)
    on_progress(SuiteProgress(2, 3, "b[N=1]", "done", outcome="faster", seconds=3.0, gpu="1 (NVIDIA H200)"))
    on_progress(SuiteProgress(1, 3, "a[N=1]", "done", outcome="unchanged", seconds=4.0, gpu="0 (NVIDIA H200)"))
    progress.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "kbench-ci: [2/3] b[N=1] on GPU 1 (NVIDIA H200): faster (3.0 s)",
        "kbench-ci: [1/3] a[N=1] on GPU 0 (NVIDIA H200): unchanged (4.0 s)",
    ]
