"""header_dependencies with the real nvcc (no GPU needed: -MM only preprocesses): the compiler's
own answer follows includes through macros and #if, which a scan of #include lines cannot."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbench_ci.cuda.build import CompileError, header_dependencies
from kbench_ci.errors import EnvironmentProblem, UserFileError

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_follows_nested_macro_and_conditional_includes_and_skips_the_dead_branch(tmp_path: Path) -> None:
    write(tmp_path, {
        "kernels/k.cu": '#include "../include/common.cuh"\n#define PICK "picked.h"\n#include PICK\n'
                        '#if 0\n#include "dead.h"\n#endif\n__global__ void k() {}\n',
        "include/common.cuh": '#include "detail/inner.h"\n',
        "include/detail/inner.h": "// inner\n",
        "kernels/picked.h": "// picked by a macro\n",
        "kernels/dead.h": "// never included\n",
        "kernels/unrelated.cuh": "// not included\n",
    })

    found = header_dependencies(tmp_path / "kernels" / "k.cu")
    local = {path.relative_to(tmp_path).as_posix() for path in found if path.is_relative_to(tmp_path)}

    assert local == {"include/common.cuh", "include/detail/inner.h", "kernels/picked.h"}


def test_a_path_with_a_space_comes_back_whole(tmp_path: Path) -> None:
    write(tmp_path, {"k.cu": '#include "my headers/a b.cuh"\n', "my headers/a b.cuh": "// spaced\n"})

    assert (tmp_path / "my headers" / "a b.cuh").resolve() in header_dependencies(tmp_path / "k.cu")


def test_failures_are_typed(tmp_path: Path) -> None:
    write(tmp_path, {"k.cu": '#include "missing.cuh"\n'})
    with pytest.raises(CompileError, match="missing.cuh|nvcc failed"):
        header_dependencies(tmp_path / "k.cu")
    with pytest.raises(UserFileError):
        header_dependencies(tmp_path / "absent.cu")
    with pytest.raises(EnvironmentProblem):
        header_dependencies(tmp_path / "k.cu", nvcc=str(tmp_path / "no-nvcc"))
