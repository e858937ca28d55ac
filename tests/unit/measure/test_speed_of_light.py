"""The work a call must do (declared or inferred), the GPU's ceilings kept per
device, the floor below which a time is impossible, and the report's figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from kbench_ci.errors import SignatureError
from kbench_ci.measure import speed_of_light
from kbench_ci.measure.speed_of_light import (
    HEADROOM,
    Ceilings,
    Work,
    assess,
    ceilings_for,
    declared_work,
    device_key,
    floor_message,
    inferred_work,
    load_ceilings,
    main_float_dtype,
    save_ceilings,
)
from kbench_ci.report.markdown import speed_of_light_text
from kbench_ci.results.model import VariantResult
from kbench_ci.results.schema import to_jsonable, variant_from_json

H200_LIKE = Ceilings(device="fake", copy_bytes_per_s=4.0e12, matmul_flops_per_s={"float16": 8.0e14, "float32": 4.0e14})


def test_declared_work_is_the_expressions_over_the_dims() -> None:
    assert declared_work("3*N*4", None, {"N": 2**24}) == Work(bytes=3 * 2**24 * 4, flops=None, declared=True)
    assert declared_work(None, "2*M*N*K", {"M": 2, "N": 3, "K": 4}) == Work(bytes=None, flops=48, declared=True)
    assert declared_work(None, None, {"N": 1}) is None


def test_a_bad_expression_names_itself() -> None:
    with pytest.raises(SignatureError, match=r'"flops = \'2\*M\*Q\''):
        declared_work(None, "2*M*Q", {"M": 2})


def test_inferred_work_counts_every_buffer_once() -> None:
    x = torch.zeros(1000, dtype=torch.float32)
    out = torch.zeros(1000, dtype=torch.float16)
    # a view of x under another name is the same memory: read once
    work = inferred_work({"x": x, "x_again": x[10:], "out": out, "n": 1000})
    assert work == Work(bytes=4000 + 2000, flops=None, declared=False)
    assert main_float_dtype({"x": x, "out": out, "idx": torch.zeros(10, dtype=torch.int64)}) == "float32"
    assert main_float_dtype({"idx": torch.zeros(10, dtype=torch.int64)}) is None


def test_the_floor_is_the_slower_of_bandwidth_and_compute_with_headroom() -> None:
    work = Work(bytes=192 * 2**20, flops=None, declared=True)
    honest = assess(work, 0.0617, H200_LIKE, "float32")
    floor_ms = 192 * 2**20 / (4.0e12 * HEADROOM) * 1e3
    assert honest.floor_ms is not None and math.isclose(honest.floor_ms, floor_ms)
    assert not honest.below_floor and honest.bandwidth_fraction is not None
    assert math.isclose(honest.bandwidth_fraction, 192 * 2**20 / 0.0617e-3 / 4.0e12)
    both = assess(Work(bytes=3 * 2**27, flops=2 * 8192**3, declared=True), 1.0, H200_LIKE, "float16")
    assert both.floor_ms is not None and math.isclose(both.floor_ms, 2 * 8192**3 / (8.0e14 * HEADROOM) * 1e3)
    cheat = assess(work, 0.005, H200_LIKE, "float32")
    assert cheat.below_floor
    assert "below the physical floor" in floor_message(cheat) and "declared in kbench.toml" in floor_message(cheat)


def test_without_ceilings_there_is_no_floor_but_the_achieved_rate_is_kept() -> None:
    figures = assess(Work(bytes=10**9, flops=None, declared=False), 1.0, None, "float32")
    assert figures.floor_ms is None and not figures.below_floor and figures.bytes_per_s == 10**12
    assert "1,000 GB/s" in speed_of_light_text(figures) and "no ceilings measured" in speed_of_light_text(figures)


def test_ceilings_are_kept_per_device_and_a_file_of_another_device_is_not_used(tmp_path: Path) -> None:
    save_ceilings(H200_LIKE, tmp_path)
    assert load_ceilings("fake", tmp_path) == H200_LIKE
    assert load_ceilings("another GPU", tmp_path) is None
    (file,) = tmp_path.iterdir()
    data = json.loads(file.read_text())
    file.write_text(json.dumps({**data, "device": "tampered"}))
    assert load_ceilings("fake", tmp_path) is None


def test_the_cpu_uses_a_ceilings_file_when_one_is_there_and_never_measures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(speed_of_light.CEILINGS_DIR_ENV, str(tmp_path))
    cpu = torch.device("cpu")
    assert ceilings_for(cpu) is None
    fake = Ceilings(device=device_key(cpu), copy_bytes_per_s=1e10, matmul_flops_per_s={"float32": 1e11})
    save_ceilings(fake, tmp_path)
    assert ceilings_for(cpu) == fake


def test_the_figures_survive_results_json_and_read_as_percent_of_peak() -> None:
    figures = assess(Work(bytes=3 * 2**26, flops=None, declared=True), 0.0617, H200_LIKE, "float32")
    variant = VariantResult(label="solution", kind="cuda-cpp", role="solution", status="ok", rounds_ms=((0.0617,),),
                            speed_of_light=figures)
    assert variant_from_json(json.loads(json.dumps(to_jsonable(variant)))) == variant
    text = speed_of_light_text(figures)
    assert text.startswith("3,263 GB/s = 82% of the measured copy bandwidth") and "declared" in text


def test_the_flop_floor_is_the_fastest_rate_and_none_for_eight_bit_inputs() -> None:
    """Found in review: a float32 kernel may compute in fp16 inside, and FP8/INT8 tensor cores
    outrun every rate measured: the floor must not convict either."""
    work = Work(bytes=None, flops=2 * 8192**3, declared=True)
    as_float32 = assess(work, 1.0, H200_LIKE, "float32")
    assert as_float32.floor_ms is not None
    assert math.isclose(as_float32.floor_ms, 2 * 8192**3 / (8.0e14 * HEADROOM) * 1e3)  # fp16's rate, not TF32's
    assert as_float32.matmul_flops_per_s == 4.0e14  # the share of peak stays against its own dtype
    assert assess(work, 1.0, H200_LIKE, "float32", eight_bit=True).floor_ms is None


def test_a_broadcast_input_counts_its_storage_once() -> None:
    bias = torch.zeros(256, dtype=torch.float32)
    work = inferred_work({"x": torch.zeros(1024, 256), "bias": bias.expand(1024, 256)})
    assert work.bytes == 1024 * 256 * 4 + 256 * 4
