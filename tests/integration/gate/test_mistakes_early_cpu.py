"""Mistakes named once, with their exit code.

A malformed user file (a ref.py without ``reference()``, a solution without ``run_kernel()``, a
shape lacking a dimension ``setup()`` needs) is exit 2, found before any case is measured and
named once per kernel, from the files' syntax: the parent never imports them. What shows only
when the kernel runs (an output never written, a Triton error) is exit 1, at the user's line.

Real suites on the CPU, through the console script as a user runs it.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.gate.test_compare_cpu import kbench, results
from tests.support.suite_repo import TempRepo, kernel_source, make_suite_repo

#: two shapes each: a mistake must be named once for the kernel, not once per shape
KERNELS = [
    {"name": "scale", "kind": "pytorch", "shapes": [{"N": 256}, {"N": 512}]},
    {"name": "vadd", "kind": "triton", "shapes": [{"N": 256}, {"N": 512}]},
]

NO_REFERENCE = {"kernels/scale_ref.py": "def referense(x, **_):\n    return x * 2.0\n"}
NO_RUN_KERNEL = {"kernels/scale.py": kernel_source("pytorch").replace("def run_kernel(", "def run_kernal(")}
#: setup() needs M, which no shape gives
NEEDS_M = {"kernels/scale.py": kernel_source("pytorch").replace("def setup(N, **_):", "def setup(N, M, **_):")}
#: the kernel returns its result instead of writing it into `out`
RETURNS = {"kernels/scale.py": kernel_source("pytorch").replace("    torch.mul(x, 2.0, out=out)\n", "    return x * 2.0\n")}
#: a typo inside the Triton kernel (line 11 of vadd.py)
TRITON_TYPO = {"kernels/vadd.py": kernel_source("triton").replace("y = tl.load(y_ptr", "y = tl.lod(y_ptr")}


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kbench-ci: error:")]


def _repo(tmp_path: Path, files: dict[str, str]) -> TempRepo:
    repo = make_suite_repo(tmp_path / "repo", KERNELS)
    repo.write(files)
    return repo


def _assert_named_before_measuring(completed, out: Path, start: str) -> None:  # type: ignore[no-untyped-def]
    """Exit 2, one line for the kernel (not one per shape), nothing measured nor written, and
    no CPU-mode note ahead of the error."""
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.splitlines() == _errors(completed.stderr), completed.stderr
    (line,) = _errors(completed.stderr)
    assert line.startswith(f"kbench-ci: error: {start}"), line
    assert "[1/" not in completed.stderr and "N=256" not in completed.stderr
    assert not (out / "results.json").exists()
    assert "Traceback" not in completed.stderr


def test_run_names_a_missing_reference_once_before_measuring(tmp_path: Path) -> None:
    repo = _repo(tmp_path, NO_REFERENCE)
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out))
    _assert_named_before_measuring(completed, out, 'kernel "scale": ref scale_ref.py does not define reference()')
    assert "add `def reference(**kwargs): ...` to scale_ref.py" in completed.stderr


def test_run_names_a_missing_run_kernel_once_before_measuring(tmp_path: Path) -> None:
    repo = _repo(tmp_path, NO_RUN_KERNEL)
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out))
    _assert_named_before_measuring(completed, out, 'kernel "scale": solution scale.py does not define run_kernel()')


def test_run_names_a_dimension_setup_needs_in_kbench_toml_terms(tmp_path: Path) -> None:
    repo = _repo(tmp_path, NEEDS_M)
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out))
    _assert_named_before_measuring(
        completed, out, "kernel \"scale\": scale.py:4 setup() needs 'M', a dimension no shape in kbench.toml gives"
    )
    assert "add M = ... to each shape" in completed.stderr
    assert "--M" not in completed.stderr and "--NAME" not in completed.stderr


def test_run_lists_every_kernels_mistakes_at_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {**NO_REFERENCE, "kernels/vadd.py": kernel_source("triton").replace("run_kernel", "run")})
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.startswith("kbench-ci: error: 2 problems in the kernels' files, found before measuring:")
    items = [line for line in completed.stderr.splitlines() if line.startswith("  - ")]
    assert [item.split(":")[0] for item in items] == ['  - kernel "scale"', '  - kernel "vadd"'], items
    assert not (out / "results.json").exists()


def test_compare_names_the_heads_missing_reference_before_measuring(tmp_path: Path) -> None:
    repo = _repo(tmp_path, NO_REFERENCE)
    out = tmp_path / "out"
    completed = kbench(repo.root, "compare", "--base", "main", "--device", "cpu", "--output-dir", str(out))
    _assert_named_before_measuring(completed, out, 'kernel "scale": ref scale_ref.py does not define reference()')


def test_bench_names_a_missing_dimension_as_a_flag_without_the_cpu_note(tmp_path: Path) -> None:
    repo = _repo(tmp_path, NEEDS_M)
    out = tmp_path / "out"
    completed = kbench(repo.root, "bench", "kernels/scale.py", "--ref", "kernels/scale_ref.py", "--device", "cpu",
                       "--N=256", "--output-dir", str(out))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert completed.stderr.splitlines() == [
        "kbench-ci: error: scale.py:4 setup() needs 'M', a dimension no flag gives "
        "(pass --M=VALUE, or give the parameter a default)"
    ], completed.stderr


def test_bench_usage_error_is_one_line_in_cpu_mode(tmp_path: Path) -> None:
    """The CPU-mode warning came before every usage error bench found in its checks."""
    repo = _repo(tmp_path, {})
    completed = kbench(repo.root, "bench", "kernels/scale.py", "--ref", "kernels/scale_ref.py", "--device", "cpu",
                       "--N=256", "--bytes", "Q*4", "--output-dir", str(tmp_path / "out"))
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert len(completed.stderr.splitlines()) == 1, completed.stderr
    assert "CPU mode" not in completed.stderr


def test_bench_still_notes_cpu_mode_when_it_runs(tmp_path: Path) -> None:
    repo = _repo(tmp_path, {})
    completed = kbench(repo.root, "bench", "kernels/scale.py", "--ref", "kernels/scale_ref.py", "--device", "cpu",
                       "--N=256", "--num-trials", "3", "--output-dir", str(tmp_path / "out"))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stderr.count("CPU mode times with host_time") == 1


def test_an_output_never_written_says_so_and_exits_1(tmp_path: Path) -> None:
    repo = _repo(tmp_path, RETURNS)
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out), "--kernel", "scale")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    for case in results(out)["cases"]:
        assert case["status"] == "incorrect"
        assert case["message"].startswith("output 'out': never written (still all NaN, as filled before the call): "
                                          "the kernel must write into 'out'; a value it returns is ignored"), case
        assert "max abs error inf" not in case["message"]


def test_a_triton_error_is_named_at_the_users_file_and_line(tmp_path: Path) -> None:
    repo = _repo(tmp_path, TRITON_TYPO)
    out = tmp_path / "out"
    completed = kbench(repo.root, "run", "--device", "cpu", "--output-dir", str(out), "--kernel", "vadd")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    for case in results(out)["cases"]:
        assert case["status"] == "failed"
        message = case["message"]
        assert "AttributeError: module 'triton.language' has no attribute 'lod' at vadd.py:11" in message, message
        assert "interpreter" not in message.lower(), message
