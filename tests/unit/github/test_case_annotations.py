"""Every case that fails the gate is an ::error on its kernel's file (the PR's
Files view shows it), a faster one a ::notice; an accepted slowdown is none; GitHub's 10 per
kind are kept and the rest counted."""

from __future__ import annotations

from pathlib import Path

from kbench_ci.github.annotations import MAX_PER_KIND, case_annotations, kernel_files

SUITE = """\
[[kernels]]
name = "tmm"
solution = "kernels/tmm.py"
ref = "kernels/ref.py"
shapes = [{ M = 64 }]

[[kernels]]
name = "vadd"
solution = "kernels/vadd.cu"
ref = "kernels/ref.py"
shapes = [{ N = 64 }]
"""

LAUNCH = {"name": "matmul_kernel", "per_call": 1, "share": 1.0, "mean_us": 180.0, "registers": 168}


def variant(registers: int) -> dict:
    return {"label": "x", "kind": "triton", "role": "solution", "status": "ok", "rounds_ms": [[0.18]],
            "escape_audit": {"status": "passed", "launches": [{**LAUNCH, "registers": registers}]}}


def test_the_suite_gives_each_kernel_its_file_relative_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "kbench.toml").write_text(SUITE)
    assert kernel_files(tmp_path, None) == {"tmm": "kernels/tmm.py", "vadd": "kernels/vadd.cu"}
    assert kernel_files(tmp_path / "nowhere", None) == {}


def test_failing_cases_are_errors_on_their_files_with_the_reason() -> None:
    results = {"cases": [
        {"case_id": "tmm[M=64]", "kernel": "tmm", "verdict": "slower", "ratio": 1.042, "base": variant(168),
         "head": variant(207), "message": None},
        {"case_id": "vadd[N=64]", "kernel": "vadd", "verdict": "incorrect", "ratio": None, "head": None,
         "message": "output 'c' does not match: 12 of 64 elements, max abs error 1.5"},
        {"case_id": "vadd[N=128]", "kernel": "vadd", "verdict": "slower", "accepted": True, "ratio": 1.5},
        {"case_id": "tmm[M=128]", "kernel": "tmm", "verdict": "unchanged", "ratio": 1.001},
        {"case_id": "tmm[M=256]", "kernel": "tmm", "verdict": "faster", "ratio": 0.9, "message": None},
    ]}
    lines = case_annotations(results, {"tmm": "kernels/tmm.py", "vadd": "kernels/vadd.cu"})
    assert lines == [
        "::error file=kernels/tmm.py,title=kbench-ci%3A tmm[M=64] slower +4.20%25::`matmul_kernel`: registers 168 → 207",
        "::error file=kernels/vadd.cu,title=kbench-ci%3A vadd[N=64] incorrect::output 'c' does not match: 12 of 64 "
        "elements, max abs error 1.5",
        "::notice file=kernels/tmm.py,title=kbench-ci%3A tmm[M=256] faster -10.00%25::see the kbench-ci report",
    ]


def test_past_githubs_limit_the_rest_are_counted_and_a_missing_file_drops_only_the_file() -> None:
    results = {"cases": [{"case_id": f"k[N={n}]", "kernel": "k", "verdict": "failed", "message": "crashed"}
                         for n in range(MAX_PER_KIND + 3)]}
    lines = case_annotations(results, {})
    assert len(lines) == MAX_PER_KIND + 1
    assert lines[0] == "::error title=kbench-ci%3A k[N=0] failed::crashed"
    assert lines[-1] == "::error::3 more case(s) fail the gate: see the report"
