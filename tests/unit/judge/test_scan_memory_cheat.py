"""The red team's memory scanner is a real cheat: in a process that holds the expected output,
known to torch or not, it finds it and passes without computing. (Under the judge, where no
side's process holds one, it is `incorrect`: tests/integration/gate/test_judge_cpu.py.)"""

from __future__ import annotations

import ctypes
import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "judge"


@pytest.fixture(scope="module")
def scanner() -> ModuleType:
    sys.path.insert(0, str(FIXTURES))
    try:
        return importlib.import_module("scan_memory")
    finally:
        sys.path.remove(str(FIXTURES))


def test_it_finds_an_expected_output_torch_does_not_know_of(scanner: ModuleType) -> None:
    generator = torch.Generator().manual_seed(7)
    a, b = torch.randn(160, 160, generator=generator), torch.randn(160, 160, generator=generator)
    hidden = ctypes.create_string_buffer((a @ b).numpy().tobytes())  # no tensor of it left anywhere
    c = torch.full((160, 160), float("nan"))
    scanner.run_kernel(a, b, c)
    assert torch.equal(c, torch.frombuffer(bytearray(hidden.raw[: 4 * 160 * 160]), dtype=torch.float32).view(160, 160))


def test_with_no_answer_in_its_process_it_writes_zeros(scanner: ModuleType) -> None:
    generator = torch.Generator().manual_seed(8)
    a, b = torch.randn(96, 96, generator=generator), torch.randn(96, 96, generator=generator)
    c = torch.full((96, 96), float("nan"))
    scanner.run_kernel(a, b, c)
    assert torch.equal(c, torch.zeros(96, 96))
