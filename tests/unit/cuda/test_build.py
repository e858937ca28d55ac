"""kbench_ci.cuda.build without a real compiler: a fake nvcc script stands in for it."""

from __future__ import annotations

import importlib.util
import os
import shlex
import stat
import sys
import time
from pathlib import Path

import pytest

from kbench_ci.cuda import build as build_mod
from kbench_ci.cuda.build import (
    BuildPlan,
    CompileError,
    build,
    detect_arch,
    find_cutlass_include,
    format_command,
    hash_path,
    library_status,
    needs_arch_specific,
    plan_build,
)
from kbench_ci.cuda.driver import CudaDevice
from kbench_ci.errors import (
    BuildError,
    EnvironmentProblem,
    ExitCode,
    MissingExtraError,
    UserFileError,
)

BASE = ("-shared", "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-lineinfo", "--resource-usage")

PLAIN_SOURCE = '#include "common.cuh"\nextern "C" void solve(const float* x, float* y, int N) {}\n'
HOPPER_SOURCE = (
    '#include "cutlass/gemm/collective/collective_builder.hpp"\n'
    "using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;\n"
    'extern "C" void solve(const half* A, half* C, int M) {}\n'
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KBENCH_CUDA_ARCH", "CUTLASS_PATH", "NVCC", "CUDA_HOME"):
        monkeypatch.delenv(name, raising=False)


def _write_executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_nvcc(tmp_path: Path) -> Path:
    """A stand-in for nvcc: logs each call, writes the -o file, or fails when told to."""
    log = tmp_path / "nvcc-calls.log"
    script = f"""#!{sys.executable}
import os, sys, time
args = sys.argv[1:]
with open({str(log)!r}, "a") as f:
    f.write(" ".join(args) + "\\n")
if os.environ.get("FAKE_NVCC_SLEEP"):
    import subprocess
    # a grandchild, as cicc/ptxas are: a timeout must end it too
    subprocess.run(["sleep", os.environ["FAKE_NVCC_SLEEP"]])
if os.environ.get("FAKE_NVCC_FAIL"):
    print("kernel.cu(3): warning: something harmless")
    print("kernel.cu(4): error: identifier \\"oops\\" is undefined")
    print("1 error detected in the compilation of \\"kernel.cu\\".")
    sys.exit(2)
if os.environ.get("FAKE_NVCC_NO_OUTPUT"):
    sys.exit(0)
out = args[args.index("-o") + 1]
with open(out, "wb") as f:
    f.write(b"\\x7fELF fake shared object")
print("ptxas info: compiled")
"""
    return _write_executable(tmp_path / "fake-nvcc", script)


def _calls(fake_nvcc: Path) -> int:
    log = fake_nvcc.parent / "nvcc-calls.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def kernel_dir(tmp_path: Path) -> Path:
    src = tmp_path / "kernels"
    src.mkdir()
    (src / "kernel.cu").write_text(PLAIN_SOURCE)
    (src / "common.cuh").write_text('#pragma once\n#include "detail/inner.cuh"\n')
    (src / "detail").mkdir()
    (src / "detail" / "inner.cuh").write_text("#pragma once\nconstexpr int kInner = 1;\n")
    return src


def _fake_cutlass(root: Path, *, with_util: bool = True) -> Path:
    include = root / "include"
    (include / "cutlass").mkdir(parents=True)
    (include / "cute").mkdir()
    (include / "cutlass" / "cutlass.h").write_text("// fake\n")
    (include / "cute" / "tensor.hpp").write_text("// fake\n")
    if with_util:
        (root / "tools" / "util" / "include" / "cutlass" / "util").mkdir(parents=True)
    return include


# --------------------------------------------------------------------------- command lines


def test_cuda_cpp_command_is_exact(kernel_dir: Path) -> None:
    source = kernel_dir / "kernel.cu"
    plan = plan_build(source, arch="sm_90", nvcc="/opt/cuda/bin/nvcc")
    assert plan.command == (
        "/opt/cuda/bin/nvcc",
        *BASE,
        "-arch=sm_90",
        "-o",
        str(kernel_dir / "kernel.so"),
        str(source),
    )
    assert plan.arch == "sm_90"
    assert plan.output == kernel_dir / "kernel.so"
    assert plan.cutlass_include is None


def test_cutlass_command_is_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    include = _fake_cutlass(tmp_path / "cutlass")
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "cutlass"))
    source = tmp_path / "gemm.cu"
    source.write_text(HOPPER_SOURCE)
    plan = plan_build(source, cutlass=True, arch="sm_90", nvcc="nvcc", extra_flags=["-DTILE=128"])
    assert plan.command == (
        "nvcc",
        *BASE,
        "-gencode=arch=compute_90a,code=sm_90a",
        f"-I{include}",
        f"-I{tmp_path / 'cutlass' / 'tools' / 'util' / 'include'}",
        "--expt-relaxed-constexpr",
        "-DNDEBUG",
        "-DTILE=128",
        "-o",
        str(tmp_path / "gemm.so"),
        str(source),
    )
    assert plan.arch == "sm_90a"
    assert plan.cutlass_include == include


def test_cutlass_without_tools_util_adds_one_include(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    include = _fake_cutlass(tmp_path / "cutlass", with_util=False)
    monkeypatch.setenv("CUTLASS_PATH", str(include))
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    plan = plan_build(source, cutlass=True, arch="sm_80", nvcc="nvcc")
    assert [flag for flag in plan.command if flag.startswith("-I")] == [f"-I{include}"]
    assert "-arch=sm_80" in plan.command


def test_custom_output_path(kernel_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "lib.so"
    plan = plan_build(kernel_dir / "kernel.cu", arch="sm_90", nvcc="nvcc", output=out)
    assert plan.output == out
    assert plan.command[-3:] == ("-o", str(out), str(kernel_dir / "kernel.cu"))


def test_plan_of_missing_source_is_a_user_file_error(tmp_path: Path) -> None:
    with pytest.raises(UserFileError, match="does not exist"):
        plan_build(tmp_path / "nope.cu", arch="sm_90", nvcc="nvcc")


def test_format_command_round_trips_through_a_shell(tmp_path: Path) -> None:
    folder = tmp_path / "with space"
    folder.mkdir()
    (folder / "k.cu").write_text("__global__ void k() {}\n")
    plan = plan_build(folder / "k.cu", arch="sm_90", nvcc="nvcc")
    line = format_command(plan)
    assert "'" in line  # the path with a space is quoted
    assert tuple(shlex.split(line)) == plan.command
    assert line.startswith("nvcc -shared -std=c++17 -O3 -Xcompiler -fPIC -lineinfo --resource-usage -arch=sm_90 ")


# --------------------------------------------------------------------------- sm_90a


@pytest.mark.parametrize(
    "snippet",
    [
        'asm volatile("wgmma.fence.sync.aligned;");',
        'asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");',
        "using K = cutlass::gemm::KernelTmaWarpSpecializedPingpong;",
        "using Arch = cutlass::arch::Sm90;",
        "using Copy = cute::SM90_TMA_LOAD;",
        "using Mma = SM90_64x128x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>;",
    ],
)
def test_hopper_only_features_need_sm_90a(snippet: str) -> None:
    assert needs_arch_specific(f"__global__ void k() {{ }}\n{snippet}\n")


@pytest.mark.parametrize(
    "text",
    [
        "__global__ void k(float* y) { y[threadIdx.x] = __shfl_xor_sync(~0u, 1.f, 1); }",
        "// TODO: port this to wgmma some day\n__global__ void k() {}",
        "/* setmaxnreg would help here */ __global__ void k() {}",
    ],
)
def test_plain_kernels_do_not_need_sm_90a(text: str) -> None:
    assert not needs_arch_specific(text)


def test_hopper_source_upgrades_sm_90_to_gencode_90a(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text('asm volatile("wgmma.fence.sync.aligned;");\n')
    plan = plan_build(source, arch="sm_90", nvcc="nvcc")
    assert "-gencode=arch=compute_90a,code=sm_90a" in plan.command
    # -arch=sm_90a would make nvcc 13 also run a plain sm_90 pass, which rejects wgmma
    assert not any(flag.startswith("-arch") for flag in plan.command)
    assert plan.arch == "sm_90a"


def test_explicit_sm_90a_uses_gencode_even_for_plain_source(kernel_dir: Path) -> None:
    plan = plan_build(kernel_dir / "kernel.cu", arch="sm_90a", nvcc="nvcc")
    assert "-gencode=arch=compute_90a,code=sm_90a" in plan.command
    assert plan.arch == "sm_90a"


def test_pre_hopper_arch_is_never_upgraded(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text('asm volatile("wgmma.fence.sync.aligned;");\n')
    plan = plan_build(source, arch="sm_80", nvcc="nvcc")
    assert "-arch=sm_80" in plan.command  # nvcc will say why it fails; no invented target


# --------------------------------------------------------------------------- arch detection


@pytest.mark.parametrize(
    ("value", "expected"),
    [("sm_90", "sm_90"), ("90", "sm_90"), ("SM_90A", "sm_90a"), (" sm_100 ", "sm_100")],
)
def test_kbench_cuda_arch_overrides_detection(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("KBENCH_CUDA_ARCH", value)
    assert detect_arch() == expected


def test_malformed_kbench_cuda_arch_is_an_environment_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KBENCH_CUDA_ARCH", "hopper")
    with pytest.raises(EnvironmentProblem, match="KBENCH_CUDA_ARCH"):
        detect_arch()


def test_no_gpu_and_no_override_is_an_environment_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KBENCH_CUDA_ARCH", raising=False)
    monkeypatch.setattr(build_mod, "cuda_devices", lambda: ())
    with pytest.raises(EnvironmentProblem) as info:
        detect_arch()
    assert "KBENCH_CUDA_ARCH" in (info.value.hint or "")
    assert info.value.exit_code is ExitCode.ENVIRONMENT


def test_arch_comes_from_the_drivers_capability_of_that_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KBENCH_CUDA_ARCH", raising=False)
    devices = (CudaDevice(0, "NVIDIA H200", 9, 0), CudaDevice(1, "NVIDIA L40S", 8, 9))
    monkeypatch.setattr(build_mod, "cuda_devices", lambda: devices)
    assert detect_arch() == "sm_90"
    assert detect_arch(1) == "sm_89"
    with pytest.raises(EnvironmentProblem, match="GPU 2 does not exist") as info:
        detect_arch(2)
    assert info.value.exit_code is ExitCode.ENVIRONMENT


def test_a_build_targets_the_gpu_it_will_run_on(kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --gpu 1 on a machine of two models: the library is built for GPU 1, not GPU 0
    monkeypatch.delenv("KBENCH_CUDA_ARCH", raising=False)
    devices = (CudaDevice(0, "NVIDIA H200", 9, 0), CudaDevice(1, "NVIDIA L40S", 8, 9))
    monkeypatch.setattr(build_mod, "cuda_devices", lambda: devices)
    assert "-arch=sm_89" in plan_build(kernel_dir / "kernel.cu", nvcc="nvcc", gpu_index=1).command
    assert "-arch=sm_90" in plan_build(kernel_dir / "kernel.cu", nvcc="nvcc").command


def test_plan_without_arch_uses_the_override(
    kernel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBENCH_CUDA_ARCH", "sm_90")
    plan = plan_build(kernel_dir / "kernel.cu", nvcc="nvcc")
    assert "-arch=sm_90" in plan.command


# --------------------------------------------------------------------------- CUTLASS headers


def test_cutlass_path_may_name_the_repo_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    include = _fake_cutlass(tmp_path / "cutlass")
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "cutlass"))
    assert find_cutlass_include() == include.resolve()


def test_cutlass_path_may_name_the_include_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    include = _fake_cutlass(tmp_path / "cutlass")
    monkeypatch.setenv("CUTLASS_PATH", str(include))
    assert find_cutlass_include() == include.resolve()


def test_a_wrong_cutlass_path_is_not_silently_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "empty"))
    with pytest.raises(EnvironmentProblem, match="CUTLASS_PATH"):
        find_cutlass_include()


def test_cutlass_headers_from_the_nvidia_cutlass_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fake cutlass_library package, first on sys.path, shaped like the wheel's.
    package = tmp_path / "site" / "cutlass_library"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    include = _fake_cutlass(package / "source")
    monkeypatch.delitem(sys.modules, "cutlass_library", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert find_cutlass_include() == include.resolve()
    assert "cutlass_library" not in sys.modules


def _hide_cutlass_library(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None):  # type: ignore[no-untyped-def]
        return None if name == "cutlass_library" else real(name, package)

    monkeypatch.setattr(build_mod.importlib.util, "find_spec", find_spec)


def test_no_cutlass_anywhere_is_a_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide_cutlass_library(monkeypatch)
    with pytest.raises(MissingExtraError) as info:
        find_cutlass_include()
    assert info.value.package == "nvidia-cutlass"
    assert info.value.extra == "cutlass"
    assert "CUTLASS kernels" in info.value.message
    assert info.value.hint == "pip install 'kbench-ci[cutlass]'"


def test_wheel_without_headers_is_a_missing_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "cutlass_library"
    (package / "source" / "include" / "cutlass").mkdir(parents=True)  # no cute/, no cutlass.h
    (package / "__init__.py").write_text("")
    monkeypatch.delitem(sys.modules, "cutlass_library", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(MissingExtraError):
        find_cutlass_include()


def test_plan_with_cutlass_but_none_installed(
    kernel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_cutlass_library(monkeypatch)
    with pytest.raises(MissingExtraError):
        plan_build(kernel_dir / "kernel.cu", cutlass=True, arch="sm_90", nvcc="nvcc")


# --------------------------------------------------------------------------- finding nvcc


def test_nvcc_env_var_wins(kernel_dir: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVCC", str(fake_nvcc))
    plan = plan_build(kernel_dir / "kernel.cu", arch="sm_90")
    assert plan.command[0] == str(fake_nvcc)


def test_nvcc_env_var_that_is_not_executable(
    kernel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NVCC", "/nonexistent/nvcc")
    with pytest.raises(EnvironmentProblem, match="NVCC"):
        plan_build(kernel_dir / "kernel.cu", arch="sm_90")


def test_nvcc_from_path(kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    nvcc = _write_executable(bin_dir / "nvcc", "#!/bin/sh\nexit 0\n")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert plan_build(kernel_dir / "kernel.cu", arch="sm_90").command[0] == str(nvcc)


def test_nvcc_from_the_default_install(
    kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = _write_executable(tmp_path / "nvcc", "#!/bin/sh\nexit 0\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(build_mod, "_DEFAULT_NVCC", default)
    assert plan_build(kernel_dir / "kernel.cu", arch="sm_90").command[0] == str(default)


def test_no_nvcc_anywhere_is_an_environment_problem(
    kernel_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(build_mod, "_DEFAULT_NVCC", tmp_path / "no" / "nvcc")
    with pytest.raises(EnvironmentProblem) as info:
        plan_build(kernel_dir / "kernel.cu", arch="sm_90")
    assert "nvcc" in info.value.message
    assert "CUDA toolkit" in (info.value.hint or "")
    assert info.value.exit_code is ExitCode.ENVIRONMENT


def test_an_nvcc_that_cannot_start_is_an_environment_problem(kernel_dir: Path) -> None:
    plan = plan_build(kernel_dir / "kernel.cu", arch="sm_90", nvcc="/nonexistent/nvcc")
    with pytest.raises(EnvironmentProblem, match="not found"):
        build(plan)


# --------------------------------------------------------------------------- building and the cache


def _plan(kernel_dir: Path, fake_nvcc: Path, **kwargs: object) -> BuildPlan:
    return plan_build(kernel_dir / "kernel.cu", arch="sm_90", nvcc=str(fake_nvcc), **kwargs)  # type: ignore[arg-type]


def test_build_then_cache_hit(kernel_dir: Path, fake_nvcc: Path) -> None:
    plan = _plan(kernel_dir, fake_nvcc)
    first = build(plan)
    assert not first.cached
    assert first.plan is plan
    assert first.duration_s > 0
    assert "ptxas info" in first.compiler_output
    assert plan.output.is_file()
    assert hash_path(plan.output) == kernel_dir / "kernel.so.kbench-hash"
    assert hash_path(plan.output).is_file()

    second = build(plan)
    assert second.cached
    assert second.duration_s == 0.0
    assert _calls(fake_nvcc) == 1


def test_source_change_rebuilds(kernel_dir: Path, fake_nvcc: Path) -> None:
    build(_plan(kernel_dir, fake_nvcc))
    (kernel_dir / "kernel.cu").write_text(PLAIN_SOURCE + "// changed\n")
    assert not build(_plan(kernel_dir, fake_nvcc)).cached
    assert _calls(fake_nvcc) == 2


@pytest.mark.parametrize("header", ["common.cuh", "detail/inner.cuh"])
def test_local_header_change_rebuilds(kernel_dir: Path, fake_nvcc: Path, header: str) -> None:
    build(_plan(kernel_dir, fake_nvcc))
    path = kernel_dir / header
    path.write_text(path.read_text() + "// changed\n")
    assert not build(_plan(kernel_dir, fake_nvcc)).cached


def test_unrelated_file_change_keeps_the_cache(kernel_dir: Path, fake_nvcc: Path) -> None:
    build(_plan(kernel_dir, fake_nvcc))
    (kernel_dir / "notes.cuh").write_text("// not included by anyone\n")
    assert build(_plan(kernel_dir, fake_nvcc)).cached


def test_flag_change_rebuilds(kernel_dir: Path, fake_nvcc: Path) -> None:
    build(_plan(kernel_dir, fake_nvcc))
    assert not build(_plan(kernel_dir, fake_nvcc, extra_flags=["-DFAST"])).cached
    assert build(_plan(kernel_dir, fake_nvcc, extra_flags=["-DFAST"])).cached


def test_arch_change_rebuilds(kernel_dir: Path, fake_nvcc: Path) -> None:
    build(_plan(kernel_dir, fake_nvcc))
    other = plan_build(kernel_dir / "kernel.cu", arch="sm_100", nvcc=str(fake_nvcc))
    assert not build(other).cached


def test_missing_library_rebuilds_even_with_a_matching_hash(
    kernel_dir: Path, fake_nvcc: Path
) -> None:
    plan = _plan(kernel_dir, fake_nvcc)
    build(plan)
    plan.output.unlink()
    assert not build(plan).cached


def test_use_cache_false_always_compiles(kernel_dir: Path, fake_nvcc: Path) -> None:
    plan = _plan(kernel_dir, fake_nvcc)
    build(plan)
    assert not build(plan, use_cache=False).cached
    assert _calls(fake_nvcc) == 2


def test_compiler_failure_is_a_compile_error_with_the_output(
    kernel_dir: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(kernel_dir, fake_nvcc)
    build(plan)  # a good build first: its hash must not survive the failed one
    monkeypatch.setenv("FAKE_NVCC_FAIL", "1")
    with pytest.raises(CompileError) as info:
        build(plan, use_cache=False)
    error = info.value
    assert isinstance(error, BuildError)
    assert error.exit_code is ExitCode.GATE_FAILED
    assert error.message == "nvcc failed for kernel.cu (exit 2)"
    assert "\n" not in error.message
    assert error.returncode == 2
    assert 'error: identifier "oops" is undefined' in error.compiler_output
    assert "warning: something harmless" in error.compiler_output
    assert error.hint is not None and "oops" in error.hint
    assert error.command == plan.command
    assert not hash_path(plan.output).exists()

    monkeypatch.delenv("FAKE_NVCC_FAIL")
    assert not build(plan).cached


def test_success_without_the_library_is_a_compile_error(
    kernel_dir: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVCC_NO_OUTPUT", "1")
    with pytest.raises(CompileError):
        build(_plan(kernel_dir, fake_nvcc))


def test_timeout_is_a_build_error_and_kills_the_compiler(
    kernel_dir: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVCC_SLEEP", "30")
    started = time.monotonic()
    with pytest.raises(BuildError, match="timed out") as info:
        build(_plan(kernel_dir, fake_nvcc), timeout_s=1)
    # Returning at all proves the grandchild `sleep` was killed too: it holds the output pipe.
    assert time.monotonic() - started < 15
    assert not isinstance(info.value, CompileError)
    assert not hash_path(kernel_dir / "kernel.so").exists()


def test_build_of_a_vanished_source(kernel_dir: Path, fake_nvcc: Path) -> None:
    plan = _plan(kernel_dir, fake_nvcc)
    (kernel_dir / "kernel.cu").unlink()
    with pytest.raises(UserFileError):
        build(plan)


# --------------------------------------------------------------------------- library_status


def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_library_status_missing(kernel_dir: Path) -> None:
    assert library_status(kernel_dir / "kernel.cu") == "missing"


def test_library_status_ok(kernel_dir: Path) -> None:
    for name in ("kernel.cu", "common.cuh", "detail/inner.cuh"):
        _age(kernel_dir / name, 60)
    (kernel_dir / "kernel.so").write_bytes(b"lib")
    assert library_status(kernel_dir / "kernel.cu") == "ok"


def test_library_status_stale_source(kernel_dir: Path) -> None:
    (kernel_dir / "kernel.so").write_bytes(b"lib")
    _age(kernel_dir / "kernel.so", 60)
    assert library_status(kernel_dir / "kernel.cu") == "stale"


def test_library_status_stale_header(kernel_dir: Path) -> None:
    _age(kernel_dir / "kernel.cu", 120)
    _age(kernel_dir / "common.cuh", 120)
    (kernel_dir / "kernel.so").write_bytes(b"lib")
    _age(kernel_dir / "kernel.so", 60)  # newer than the .cu, older than inner.cuh
    assert library_status(kernel_dir / "kernel.cu") == "stale"


def test_library_status_of_a_missing_source(tmp_path: Path) -> None:
    with pytest.raises(UserFileError):
        library_status(tmp_path / "nope.cu")


def test_a_replaced_compiler_rebuilds(kernel_dir: Path, fake_nvcc: Path) -> None:
    plan = _plan(kernel_dir, fake_nvcc)
    build(plan)
    # Same path, new binary: a toolkit upgraded in place.
    fake_nvcc.write_text(fake_nvcc.read_text() + "# new version\n")
    assert not build(plan).cached


def test_make_rule_parsing_joins_continuations_unescapes_and_refuses_a_missing_rule(tmp_path: Path) -> None:
    rule = "kbench-deps : k.cu \\\n    inc/h\\ one.cuh \\\n    ../up.h\nother: nope.h\n"
    assert build_mod._parse_make_rule(rule, cwd=tmp_path / "src") == {
        (tmp_path / "src" / "k.cu").resolve(), (tmp_path / "src" / "inc" / "h one.cuh").resolve(), (tmp_path / "up.h").resolve(),
    }
    with pytest.raises(BuildError):
        build_mod._parse_make_rule("something-else: a.h\n", cwd=tmp_path)
