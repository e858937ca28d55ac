"""The command line checks a value by kbench.toml's rules, with the
same words, every problem at once; integers past 64 bits are usage errors, not kernel crashes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.suite_repo import TempRepo, make_suite_repo

ROOT = Path(__file__).resolve().parents[3]
CHEATS = ROOT / "tests" / "fixtures" / "cheats_py"
HUGE = "99999999999999999999"
INT64_MAX = "9223372036854775807"


def kbench(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run([sys.executable, "-m", "kbench_ci", *args], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=120)


def bench(*extra: str) -> subprocess.CompletedProcess[str]:
    return kbench("bench", str(CHEATS / "honest.py"), "--implementation=pytorch", f"--ref={CHEATS / 'ref.py'}",
                  "--device=cpu", *extra)


def test_every_bad_value_of_a_command_line_is_named_at_once(tmp_path: Path) -> None:
    done = bench("--seed", "-1", "--gpu", "-1", "--baselines", "pytorch-eager,pytorch-eager", "--output-dir", "",
                 f"--N={HUGE}")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "kbench-ci: error: 5 problems:"
    assert lines[1:] == [
        f"  - dimension --N must be at most {INT64_MAX} (64 bits), got {HUGE} (dimensions are sizes that fit 64 bits)",
        '  - --baselines lists "pytorch-eager" twice (name each baseline once)',
        "  - --seed must be >= 0, got -1",
        "  - --gpu must be >= 0, got -1",
        "  - --output-dir must be a folder path, got an empty string",
    ]
    assert not (tmp_path / "bench_out").exists()


def test_a_seed_past_64_bits_is_a_usage_error_on_the_command_line_and_in_the_config(tmp_path: Path) -> None:
    done = bench("--seed", HUGE, "--N=64", f"--output-dir={tmp_path / 'out'}")
    assert done.returncode == 2
    assert done.stderr.strip() == f"kbench-ci: error: --seed must be at most {INT64_MAX} (64 bits), got {HUGE}"
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": int(HUGE)}]}],
                           defaults={"seed": int(HUGE)})
    done = kbench("run", "--device", "cpu", "--output-dir", str(tmp_path / "run"), cwd=repo.root)
    assert done.returncode == 2, done.stderr
    assert f'"seed" must be at most {INT64_MAX} (64 bits), got {HUGE}' in done.stderr
    assert f'shapes[0]: "N" must be at most {INT64_MAX} (64 bits), got {HUGE}' in done.stderr
    assert "Overflow" not in done.stderr and "Traceback" not in done.stderr


def test_a_python_kernel_with_a_pointer_size_is_refused(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}], "ptr_size": "N *"}])
    done = kbench("run", "--device", "cpu", "--output-dir", str(tmp_path / "run"), cwd=repo.root)
    assert done.returncode == 2
    assert '"ptr_size" sizes the pointers of a CUDA C++ solve(); this kernel is a Python solution' in done.stderr


def test_compare_and_run_check_gpu_and_output_dir_alike(tmp_path: Path) -> None:
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}]}])
    for command in (("compare", "--base", "main"), ("run",)):
        done = kbench(*command, "--gpu", "-1", "--output-dir", "", cwd=repo.root)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            "kbench-ci: error: 2 problems:",
            "  - --gpu must be >= 0, got -1",
            "  - --output-dir must be a folder path, got an empty string",
        ]


def test_a_config_size_expression_is_checked_as_the_command_line_checks_it(tmp_path: Path) -> None:
    """--ptr-size refused what kbench.toml took ("N *")."""
    softmax = ROOT / "examples" / "softmax_cuda"
    repo = TempRepo(tmp_path / "repo")
    repo.commit({
        "softmax.cu": (softmax / "softmax.cu").read_text(), "ref.py": (softmax / "ref.py").read_text(),
        "kbench.toml": '[[kernels]]\nname = "softmax"\nsolution = "softmax.cu"\nref = "ref.py"\n'
                       'shapes = [{M = 64, N = 64}]\nptr_size = "N *"\nptr_sizes = {out = "import os"}\n',
    }, "suite")
    done = kbench("run", "--device", "cpu", "--output-dir", str(tmp_path / "run"), cwd=repo.root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "kbench-ci: error: kbench.toml: 2 problems:",
        "  - kbench.toml: kernel \"softmax\": ptr_size: size expression 'N *' is not valid syntax "
        "(integers, dimension names, + - * / // % ** and parentheses)",
        "  - kbench.toml: kernel \"softmax\": ptr_sizes.out: size expression 'import os' is not valid syntax "
        "(integers, dimension names, + - * / // % ** and parentheses)",
    ]
    cli = kbench("bench", str(CHEATS / "honest.py"), "--implementation=cuda-cpp", f"--ref={CHEATS / 'ref.py'}",
                 "--ptr-size", "N *", "--device=cpu")
    assert "size expression 'N *' is not valid syntax" in cli.stderr


def test_infinite_seconds_are_refused_on_the_command_line_as_in_the_config(tmp_path: Path) -> None:
    """--time-budget inf and --case-timeout inf were taken by the command line
    (kbench.toml refused them, and inf crashed the rounds)."""
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}]}])
    done = kbench("compare", "--base", "main", "--device", "cpu", "--time-budget", "inf", "--case-timeout", "inf",
                  "--output-dir", str(tmp_path / "cmp"), cwd=repo.root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "kbench-ci: error: 2 problems:",
        "  - --case-timeout must be a positive number of seconds, got inf",
        "  - --time-budget must be 0 or a positive number of seconds, got inf",
    ]
    done = kbench("run", "--device", "cpu", "--case-timeout", "inf", "--output-dir", str(tmp_path / "run"), cwd=repo.root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "kbench-ci: error: --case-timeout must be a positive number of seconds, got inf"
    config = make_suite_repo(tmp_path / "config", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}]}],
                             defaults={"time_budget": float("inf")})
    done = kbench("run", "--device", "cpu", "--output-dir", str(tmp_path / "run2"), cwd=config.root)
    assert done.returncode == 2, done.stderr
    assert '"time_budget" must be 0 or a positive number of seconds, got inf' in done.stderr


def test_a_sub_millisecond_timeout_is_refused_alike_on_the_command_line_and_in_the_config(tmp_path: Path) -> None:
    """--case-timeout 0.0005 was refused (typer's own words), timeout = 0.0005 taken."""
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}],
                                                "timeout": 0.0005}])
    done = kbench("run", "--device", "cpu", "--output-dir", str(tmp_path / "run"), cwd=repo.root)
    assert done.returncode == 2, done.stderr
    assert '"timeout" must be at least 0.001 seconds, got 0.0005' in done.stderr
    assert not (tmp_path / "run" / "results.json").exists()
    done = kbench("run", "--device", "cpu", "--case-timeout", "0.0005", "--output-dir", str(tmp_path / "run"),
                  cwd=repo.root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "kbench-ci: error: --case-timeout must be at least 0.001 seconds, got 0.0005"
    done = bench("--N=64", "--timeout", "0.0005", f"--output-dir={tmp_path / 'bench'}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "kbench-ci: error: --timeout must be at least 0.001 seconds, got 0.0005"


def test_a_size_expression_that_is_python_fails_the_load_not_a_note_at_run_time(tmp_path: Path) -> None:
    """bytes = "__import__('os')" passed the loader and showed only as a run-time note."""
    repo = make_suite_repo(tmp_path / "repo", [{"name": "scale", "kind": "pytorch", "shapes": [{"N": 64}],
                                                "bytes": "__import__('os')"}])
    done = kbench("run", "--device", "cpu", "--output-dir", str(tmp_path / "run"), cwd=repo.root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "kbench-ci: error: kbench.toml: kernel \"scale\": bytes: size expression '__import__('os')' uses a function "
        "call, which is not allowed (use only integers, dimension names, + - * / // % ** and parentheses)"
    )
    assert not (tmp_path / "run" / "results.json").exists()


@pytest.mark.parametrize(("name", "value", "message"), [
    ("KBENCH_CI_JUDGE_PLACEMENTS", "many",
     "KBENCH_CI_JUDGE_PLACEMENTS='many' is not a number of placements (set KBENCH_CI_JUDGE_PLACEMENTS to a whole number, "
     "1 or more (default 4))"),
    ("KBENCH_CI_JUDGE_FRESH_MS", "fast",
     "KBENCH_CI_JUDGE_FRESH_MS='fast' is not a number of milliseconds (set KBENCH_CI_JUDGE_FRESH_MS=5 (the default), or 0 "
     "for a pool of versions and a probe a round)"),
])
def test_a_bad_judge_knob_stops_a_judged_bench_with_one_line_and_exit_2(
    tmp_path: Path, name: str, value: str, message: str,
) -> None:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), name: value}
    environment.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run([sys.executable, "-m", "kbench_ci", "bench", str(CHEATS / "honest.py"), "--implementation=pytorch",
                           f"--ref={CHEATS / 'ref.py'}", "--device=cpu", "--isolation=judge", f"--output-dir={tmp_path / 'out'}"],
                          capture_output=True, text=True, cwd=ROOT, env=environment, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"kbench-ci: error: {message}"
    assert not (tmp_path / "out" / "results.json").exists()
