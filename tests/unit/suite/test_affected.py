"""affected_kernels on two trees on disk (no git: the changed paths are the files whose content
differs between the trees, as git would list them), with a header scanner that reads
``#include "..."`` lines, so each test decides what a kernel includes."""

from __future__ import annotations

import re
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

from kbench_ci.errors import EnvironmentProblem
from kbench_ci.suite.affected import AffectedPlan, Side, affected_kernels
from kbench_ci.suite.loader import load_suite

INCLUDE = re.compile(r'#include "([^"]+)"')


def include_scanner(calls: list[Path] | None = None) -> object:
    """Follows quoted includes beside the includer, as nvcc would for these plain sources."""

    def scan(source: Path, *, cutlass: bool) -> Collection[Path]:
        if calls is not None:
            calls.append(source)
        found: set[Path] = set()
        pending = [source]
        while pending:
            current = pending.pop()
            for name in INCLUDE.findall(current.read_text()):
                header = (current.parent / name).resolve()
                if header not in found and header.is_file():
                    found.add(header)
                    pending.append(header)
        return found

    return scan


def failing_scanner(source: Path, *, cutlass: bool) -> Collection[Path]:
    raise EnvironmentProblem("nvcc, the CUDA compiler, was not found")


CONFIG = """\
[defaults]
rounds = {rounds}
{defaults}

[[kernels]]
name = "gemm"
solution = "kernels/gemm.cu"
ref = "kernels/gemm_ref.py"
shapes = [{{N = 64}}]
{gemm}

[[kernels]]
name = "softmax"
solution = "kernels/softmax.cu"
ref = "kernels/softmax_ref.py"
shapes = [{{N = 64}}]
{softmax}

[[kernels]]
name = "add"
solution = "kernels/add.py"
ref = "kernels/add_ref.py"
implementation = "triton"
shapes = [{{N = 64}}]
{add}
"""


def config(*, rounds: int = 10, defaults: str = "", gemm: str = "", softmax: str = "", add: str = "", extra: str = "") -> str:
    return CONFIG.format(rounds=rounds, defaults=defaults, gemm=gemm, softmax=softmax, add=add) + extra


BASE_FILES: dict[str, str] = {
    "kbench.toml": config(),
    "include/tiles.cuh": "// tile helpers\n",
    "include/common.cuh": '#include "tiles.cuh"\n',
    "include/reduce.cuh": "// warp reductions\n",
    "kernels/gemm.cu": '#include "../include/common.cuh"\nextern "C" void solve(const float* a, float* c, int N) {}\n',
    "kernels/softmax.cu": '#include "../include/reduce.cuh"\nextern "C" void solve(const float* x, float* y, int N) {}\n',
    "kernels/gemm_ref.py": "def reference(a, **_):\n    return a\n",
    "kernels/softmax_ref.py": "from refs.numerics import stable_softmax\n\ndef reference(x, **_):\n    return stable_softmax(x)\n",
    "refs/__init__.py": "",
    "refs/numerics.py": "from .constants import EPS\n\ndef stable_softmax(x):\n    return x + EPS\n",
    "refs/constants.py": "EPS = 1e-6\n",
    "kernels/add.py": "import triton\nfrom kernels_common import launch\n\ndef run_kernel(x, out, **_):\n    launch(x, out)\n",
    "kernels/kernels_common.py": "def launch(x, out):\n    out.copy_(x)\n",
    "kernels/add_ref.py": "def reference(x, **_):\n    return x\n",
    "README.md": "the suite\n",
}


def write_tree(root: Path, files: Mapping[str, str | None]) -> None:
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


def differing_paths(base: Path, head: Path) -> frozenset[str]:
    """What ``git diff --name-only`` would list between the two trees."""

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    before, after = files(base), files(head)
    return frozenset(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


def plan_for(
    tmp_path: Path,
    head_changes: Mapping[str, str | None],
    *,
    base_changes: Mapping[str, str | None] | None = None,
    scanner: object | None = None,
    toolchains: tuple[str, str] = ("nvcc 13.0", "nvcc 13.0"),
    versions: tuple[str, str] = ("0.1.0", "0.1.0"),
) -> AffectedPlan:
    base_tree, head_tree = tmp_path / "base", tmp_path / "head"
    write_tree(base_tree, {**BASE_FILES, **(base_changes or {})})
    shutil.copytree(base_tree, head_tree)
    write_tree(head_tree, head_changes)
    base = Side(base_tree, load_suite(base_tree / "kbench.toml"), toolchains[0], versions[0])
    head = Side(head_tree, load_suite(head_tree / "kbench.toml"), toolchains[1], versions[1])
    return affected_kernels(
        base, head, differing_paths(base_tree, head_tree),
        scan_headers=include_scanner() if scanner is None else scanner,  # type: ignore[arg-type]
    )  # fmt: skip


def test_nothing_changed_measures_nothing(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"README.md": "only the readme\n"})

    assert plan.affected == ()
    assert plan.not_affected == ("gemm", "softmax", "add")
    assert not plan.everything


def test_a_header_change_marks_only_the_kernels_that_include_it(tmp_path: Path) -> None:
    # tiles.cuh reaches gemm through common.cuh: a nested include.
    plan = plan_for(tmp_path, {"include/tiles.cuh": "// tile helpers, faster\n"})

    assert plan.affected_names == {"gemm"}
    assert plan.not_affected == ("softmax", "add")
    gemm = plan.change_of("gemm")
    assert gemm is not None
    assert gemm.changed_files == ("include/tiles.cuh",)
    assert gemm.reasons == ("include/tiles.cuh changed (a header gemm.cu includes)",)


def test_a_header_no_longer_included_and_deleted_still_counts(tmp_path: Path) -> None:
    # The head drops reduce.cuh and inlines it: the dependency exists only at the base.
    plan = plan_for(tmp_path, {
        "include/reduce.cuh": None,
        "kernels/softmax.cu": '// reductions inlined\nextern "C" void solve(const float* x, float* y, int N) {}\n',
    })

    softmax = plan.change_of("softmax")
    assert softmax is not None
    assert softmax.changed_files == ("include/reduce.cuh", "kernels/softmax.cu")
    assert plan.affected_names == {"softmax"}


def test_a_header_added_in_the_head_and_included_counts(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {
        "include/tiles.cuh": '#include "swizzle.cuh"\n',
        "include/swizzle.cuh": "// new\n",
    })

    gemm = plan.change_of("gemm")
    assert gemm is not None and "include/swizzle.cuh" in gemm.changed_files


def test_an_imported_helper_module_change_marks_its_importer_only(tmp_path: Path) -> None:
    # kernels_common.py sits beside add.py: a top-level import resolved in the kernel's folder.
    plan = plan_for(tmp_path, {"kernels/kernels_common.py": "def launch(x, out):\n    out.copy_(x * 1)\n"})

    assert plan.affected_names == {"add"}
    add = plan.change_of("add")
    assert add is not None
    assert add.reasons == ("kernels/kernels_common.py changed (a module the solution imports)",)


def test_a_module_ref_py_imports_through_a_package_and_a_relative_import_counts(tmp_path: Path) -> None:
    # softmax_ref.py -> refs.numerics (repository root) -> .constants (relative)
    plan = plan_for(tmp_path, {"refs/constants.py": "EPS = 1e-7\n"})

    assert plan.affected_names == {"softmax"}
    softmax = plan.change_of("softmax")
    assert softmax is not None
    assert softmax.reasons == ("refs/constants.py changed (a module ref.py imports through refs/numerics.py)",)


def test_a_package_init_on_the_import_path_counts(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"refs/__init__.py": "import os\n"})

    assert plan.affected_names == {"softmax"}


def test_a_ref_py_change_marks_that_kernel_only(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"kernels/gemm_ref.py": "def reference(a, **_):\n    return a * 1\n"})

    assert plan.affected_names == {"gemm"}
    gemm = plan.change_of("gemm")
    assert gemm is not None and gemm.reasons == ("kernels/gemm_ref.py changed (ref.py)",)


def test_a_solution_change_marks_that_kernel_only(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"kernels/add.py": BASE_FILES["kernels/add.py"] + "# tuned\n"})

    assert plan.affected_names == {"add"}


def test_a_suite_setting_change_measures_everything(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"kbench.toml": config(rounds=20)})

    assert plan.everything
    assert plan.everything_reason == "the suite's settings in [defaults] changed (rounds)"
    assert [change.name for change in plan.affected] == ["gemm", "softmax", "add"]
    assert plan.not_affected == ()


def test_another_kernels_entry_change_does_not_mark_this_one(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"kbench.toml": config(softmax='threshold = "5%"')})

    assert plan.affected_names == {"softmax"}
    softmax = plan.change_of("softmax")
    assert softmax is not None
    assert softmax.reasons == ("its kbench.toml entry changed (threshold)",)
    assert plan.not_affected == ("gemm", "add")


def test_a_shared_default_marks_the_kernels_that_inherit_it_not_one_that_overrides_it(tmp_path: Path) -> None:
    plan = plan_for(
        tmp_path,
        {"kbench.toml": config(defaults='threshold = "3%"', gemm='threshold = "1%"')},
        base_changes={"kbench.toml": config(gemm='threshold = "1%"')},
    )

    assert not plan.everything
    assert plan.affected_names == {"softmax", "add"}
    assert plan.not_affected == ("gemm",)


def test_reordering_and_reformatting_the_file_marks_nothing(tmp_path: Path) -> None:
    swapped = 'solution = "kernels/gemm.cu"\nname = "gemm"  # keys in another order'
    reordered = config(extra="# a comment\n").replace('name = "gemm"\nsolution = "kernels/gemm.cu"', swapped)
    assert swapped in reordered

    plan = plan_for(tmp_path, {"kbench.toml": reordered})

    assert plan.affected == ()


def test_a_kernel_added_in_the_head_is_affected_and_a_removed_one_is_listed(tmp_path: Path) -> None:
    added = '\n[[kernels]]\nname = "scale"\nsolution = "kernels/scale.py"\nref = "kernels/add_ref.py"\nimplementation = "triton"\nshapes = [{N = 8}]\n'
    without_add = config().split('[[kernels]]\nname = "add"')[0]
    plan = plan_for(tmp_path, {"kbench.toml": without_add + added, "kernels/scale.py": "def run_kernel(x, out, **_):\n    pass\n"})

    assert [(change.name, change.reasons) for change in plan.affected] == [
        ("scale", ("added in the head",)), ("add", ("removed in the head",)),
    ]
    assert plan.not_affected == ("gemm", "softmax")


@pytest.mark.parametrize(
    ("toolchains", "versions", "reason"),
    [
        (("nvcc 12.8", "nvcc 13.0"), ("0.1.0", "0.1.0"), "the toolchain changed (nvcc 12.8 -> nvcc 13.0)"),
        (("nvcc 13.0", "nvcc 13.0"), ("0.1.0", "0.2.0"), "kbench-ci's version changed (0.1.0 -> 0.2.0)"),
    ],
)
def test_a_toolchain_or_kbench_ci_version_change_measures_everything(
    tmp_path: Path, toolchains: tuple[str, str], versions: tuple[str, str], reason: str
) -> None:
    plan = plan_for(tmp_path, {}, toolchains=toolchains, versions=versions)

    assert plan.everything_reason == reason
    assert plan.affected_names == {"gemm", "softmax", "add"}


def test_a_base_without_a_suite_measures_everything(tmp_path: Path) -> None:
    write_tree(tmp_path, BASE_FILES)
    head = Side(tmp_path, load_suite(tmp_path / "kbench.toml"), "t", "v")

    plan = affected_kernels(Side(tmp_path, None, "t", "v"), head, {"kbench.toml"}, scan_headers=None)

    assert plan.everything_reason == "the base has no suite that loads"
    assert plan.affected_names == {"gemm", "softmax", "add"}


def test_without_a_header_scan_every_changed_header_counts_for_cuda_kernels_and_says_so(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"include/reduce.cuh": "// changed\n"}, scanner=failing_scanner)

    # Both CUDA kernels now count every header; the Python kernel does not.
    assert plan.affected_names == {"gemm", "softmax"}
    gemm = plan.change_of("gemm")
    assert gemm is not None
    assert gemm.reasons == (
        "include/reduce.cuh changed (every C/C++/CUDA file counts: the header scan of kernels/gemm.cu failed: "
        "nvcc, the CUDA compiler, was not found)",
    )
    assert any(note.startswith("gemm (head): the header scan of kernels/gemm.cu failed") for note in plan.notes)


def test_without_a_header_scan_a_python_only_change_still_marks_no_cuda_kernel(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, {"kernels/add_ref.py": "def reference(x, **_):\n    return x + 0\n"}, scanner=failing_scanner)

    assert plan.affected_names == {"add"}


def test_a_kernel_with_its_own_build_command_counts_its_folder(tmp_path: Path) -> None:
    plan = plan_for(
        tmp_path,
        {"kernels/Makefile": "all:\n\tnvcc -O3\n", "kbench.toml": config(softmax='build = "make -C kernels"')},
        base_changes={"kernels/Makefile": "all:\n\tnvcc -O2\n", "kbench.toml": config(softmax='build = "make -C kernels"')},
    )

    # The Makefile is in the kernels' folder: softmax's command may read it; gemm's build cannot.
    # add.py is a Python solution there: a non-Python file beside it may be one it compiles or
    # reads (torch.utils.cpp_extension), so it counts too (found in review).
    assert plan.affected_names == {"softmax", "add"}


def test_each_side_is_scanned_in_its_own_tree(tmp_path: Path) -> None:
    calls: list[Path] = []
    plan_for(tmp_path, {"include/tiles.cuh": "// changed\n"}, scanner=include_scanner(calls))

    assert sorted(path.relative_to(tmp_path).as_posix() for path in calls) == [
        "base/kernels/gemm.cu", "base/kernels/softmax.cu", "head/kernels/gemm.cu", "head/kernels/softmax.cu",
    ]


def test_a_build_command_kernels_folder_is_read_lexically_from_a_roundabout_path(tmp_path: Path) -> None:
    roundabout = config(softmax='build = "make -C kernels"').replace('"kernels/softmax.cu"', '"kernels/../kernels/softmax.cu"')
    plan = plan_for(
        tmp_path,
        {"kernels/Makefile": "all:\n\tnvcc -O3\n", "kbench.toml": roundabout},
        base_changes={"kernels/Makefile": "all:\n\tnvcc -O2\n", "kbench.toml": roundabout},
    )

    softmax = plan.change_of("softmax")
    assert softmax is not None
    assert softmax.reasons == ("kernels/Makefile changed (in the folder of a kernel built by its own command)",)


def test_a_source_a_python_solution_compiles_beside_it_counts_but_another_kernels_file_does_not(tmp_path: Path) -> None:
    """Found in review: a PyTorch solution that builds kernels/ext.cu with cpp_extension was "not
    affected" by a change to it. Another kernel's .cu in the same folder is that kernel's only."""
    plan = plan_for(tmp_path, {"kernels/ext.cu": "// compiled by add.py at run time\n"})
    assert plan.change_of("add") is not None and "kernels/ext.cu" in plan.change_of("add").changed_files  # type: ignore[union-attr]
    softmax_only = plan_for(tmp_path / "again", {
        "kernels/softmax.cu": '// faster\nextern "C" void solve(const float* x, float* y, int N) {}\n'})
    assert "add" not in softmax_only.affected_names


def test_a_kernel_that_unpickles_counts_every_changed_file_and_the_note_says_where(tmp_path: Path) -> None:
    # A pickle's GLOBAL opcode imports the module it names: the helper stays out of every
    # import statement, so the plan must not call the kernel "not affected".
    add = "import pickle\n\ndef run_kernel(x, out, **_):\n    pickle.loads(b'ckernels_common\\nlaunch\\n.')(x, out)\n"
    plan = plan_for(tmp_path, {"kernels/kernels_common.py": "def launch(x, out):\n    out.copy_(x + 1)\n"},
                    base_changes={"kernels/add.py": add})
    assert plan.affected_names == {"add"}
    assert plan.change_of("add").reasons == (  # type: ignore[union-attr]
        "kernels/kernels_common.py changed (every changed file counts: kernels/add.py:4 (pickle.loads))",)
    assert "add (head): kernels/add.py:4 (pickle.loads); every changed file counts for it" in plan.notes
