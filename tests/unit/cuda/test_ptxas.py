"""Ptxas's resource usage per kernel, parsed from what nvcc 13.0 printed with
--resource-usage for a vector add and a templated kernel with a local array (recorded on this
machine: `nvcc -shared -std=c++17 -arch=sm_90 -O3 -Xcompiler -fPIC --resource-usage`)."""

from __future__ import annotations

from pathlib import Path

from kbench_ci.cuda.ptxas import PtxasKernel, parse_resource_usage, read_resources, readable_name, write_resources

RECORDED = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z5tiledILi256EEvPf' for 'sm_90'
ptxas info    : Function properties for _Z5tiledILi256EEvPf
    256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 25.802 ms
ptxas info    : Compiling entry function '_Z4vaddPKfS0_Pfi' for 'sm_90'
ptxas info    : Function properties for _Z4vaddPKfS0_Pfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
ptxas info    : Compile time = 1.638 ms
"""

#: CUDA 12's wording, with spills and constant memory on the "Used" line
SPILLING = """\
ptxas info    : Compiling entry function 'matmul_tile' for 'sm_90a'
ptxas info    : Function properties for matmul_tile
    64 bytes stack frame, 120 bytes spill stores, 96 bytes spill loads
ptxas info    : Used 255 registers, 380 bytes cmem[0], 49152 bytes smem
"""


def test_each_entry_function_gets_its_registers_stack_spills_and_shared_memory() -> None:
    assert parse_resource_usage(RECORDED) == (
        PtxasKernel(symbol="_Z5tiledILi256EEvPf", registers=32, stack_bytes=256, shared_bytes=1024),
        PtxasKernel(symbol="_Z4vaddPKfS0_Pfi", registers=12),
    )
    (tile,) = parse_resource_usage(SPILLING)
    assert (tile.registers, tile.spill_stores, tile.spill_loads, tile.stack_bytes, tile.shared_bytes) == (255, 120, 96, 64, 49152)


def test_names_read_like_cuptis_without_their_types() -> None:
    assert readable_name("_Z4vaddPKfS0_Pfi") == "vadd"
    assert readable_name("_Z5tiledILi256EEvPf") == "tiled"
    assert readable_name("_ZN4cute6kernelINS_3FooEEEvT_") == "cute::kernel"
    assert readable_name("matmul_tile") == "matmul_tile"


def test_output_without_ptxas_lines_gives_nothing() -> None:
    assert parse_resource_usage("nvcc warning : something\n") == ()


def test_the_figures_live_beside_the_library_and_a_missing_or_broken_file_is_none(tmp_path: Path) -> None:
    library = tmp_path / "k.so"
    kernels = parse_resource_usage(RECORDED)
    write_resources(library, kernels)
    assert read_resources(library) == kernels
    assert read_resources(tmp_path / "other.so") == ()
    (tmp_path / "k.so.ptxas.json").write_text("[{\"nope\": 1}]")
    assert read_resources(library) == ()
