"""A kernel of the same name whose launch shape changed is the same kernel
reshaped, not one gone and one new. On the H200 a vector add that loads 16 elements a thread
(float4 pointers: a new mangled name, the same kernel) read "`vadd_kernel` no longer launched
(was 100% of the time); a new kernel `vadd_kernel` (100% of the time)" while the tables held the
answer: grid 65536 → 4096, registers 12 → 32 (ptxas), 63.9 → 51.4 µs. And the launch table's
"blocks/SM" column is the grid over the SM count, not resident blocks."""

from __future__ import annotations

from dataclasses import replace

from kbench_ci.report.compare import _case_details
from kbench_ci.report.why import LAUNCH_HEADERS, compiled_changes, launch_changes, why_line
from kbench_ci.results.model import CompiledKernel, KernelLaunch
from kbench_ci.stats import Verdict
from tests.unit.report.test_why_it_changed import comparison, variant

#: the H200's figures: one float per thread, then 16 (four float4 loads) per thread
BASE = KernelLaunch(name="vadd_kernel", per_call=1, share=1.0, mean_us=63.9, grid=(65536, 1, 1), block=(256, 1, 1),
                    registers=16, shared_bytes=0, blocks_per_sm=496.5, occupancy_pct=100)
HEAD = KernelLaunch(name="vadd_kernel(float4 const*, float4 const*, float4*, long)", per_call=1, share=1.0,
                    mean_us=51.4, grid=(4096, 1, 1), block=(256, 1, 1), registers=32, shared_bytes=0,
                    blocks_per_sm=31.03, occupancy_pct=100)
BASE_PTXAS = CompiledKernel(name="vadd_kernel", source="ptxas", registers=12, spill_stores=0, spill_loads=0,
                            symbol="vadd_kernel")
HEAD_PTXAS = CompiledKernel(name="vadd_kernel", source="ptxas", registers=32, spill_stores=0, spill_loads=0,
                            symbol="_Z11vadd_kernelPK6float4S1_PS_l")


def test_a_renamed_launch_of_one_kernel_is_the_same_kernel_reshaped_with_grid_registers_and_time() -> None:
    assert launch_changes((BASE,), (HEAD,)) == [
        "`vadd_kernel` reshaped (the same kernel): registers 16 → 32, grid 65536 → 4096, "
        "63.9 → 51.4 us per call (-19.6%)"
    ]


def test_the_compilers_registers_of_a_kernel_whose_symbol_changed_are_compared() -> None:
    assert compiled_changes((BASE_PTXAS,), (HEAD_PTXAS,)) == ["compiled `vadd_kernel`: registers 12 → 32"]


def test_the_why_line_of_the_reshaped_vector_add_names_grid_registers_and_time() -> None:
    base = replace(variant("base", (BASE,)), compiled=(BASE_PTXAS,))
    head = replace(variant("head", (HEAD,)), compiled=(HEAD_PTXAS,))
    line = why_line(base, head)
    assert line is not None
    assert "no longer launched" not in line and "a new kernel" not in line
    assert line.startswith("compiled `vadd_kernel`: registers 12 → 32; `vadd_kernel` reshaped (the same kernel):")
    assert "grid 65536 → 4096" in line and "63.9 → 51.4 us per call" in line


def test_a_reshape_slower_than_the_time_threshold_still_says_the_time() -> None:
    (change,) = launch_changes((BASE,), (replace(HEAD, mean_us=64.0),))
    assert change.endswith("63.9 → 64 us per call (+0.2%)")


def test_two_instances_of_a_template_on_one_side_are_not_guessed_at() -> None:
    """vadd<float> and vadd<half> gone, one vadd<bf16> new: which one it replaced is not known."""
    floats = replace(BASE, name="void vadd<float>(float const*, float*, int)", share=0.5)
    halves = replace(BASE, name="void vadd<__half>(__half const*, __half*, int)", share=0.5)
    brain = replace(HEAD, name="void vadd<__nv_bfloat16>(__nv_bfloat16 const*, __nv_bfloat16*, int)")
    changes = launch_changes((floats, halves), (brain,))
    assert sum("no longer launched" in change for change in changes) == 2
    assert any(change.startswith("a new kernel") for change in changes)


def test_the_launch_tables_per_sm_column_says_it_is_the_grid_over_the_sm_count() -> None:
    assert "blocks/SM" not in LAUNCH_HEADERS and "grid ÷ SMs" in LAUNCH_HEADERS
    details = "\n".join(_case_details(comparison(Verdict.FASTER, variant("base", (BASE,)), variant("head", (HEAD,)))))
    assert "grid ÷ SMs" in details and "blocks/SM" not in details
