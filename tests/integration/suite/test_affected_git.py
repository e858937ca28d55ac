"""affected_kernels end to end, as compare --changed-only will call it: a real git repository,
GitRepo.changed_paths between the two sides, the base checked out into a worktree, and the
headers from nvcc's own dependency output (no GPU needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbench_ci.cuda.build import header_dependencies
from kbench_ci.git import GitRepo
from kbench_ci.suite.affected import AffectedPlan, Side, affected_kernels
from kbench_ci.suite.loader import load_suite
from tests.support.suite_repo import TempRepo, kernel_source, ref_source

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")

SOLVE = 'extern "C" void solve(const float* x, float* y, int N) {}\n'


def entry(name: str, solution: str, ref: str, extra: str = "") -> str:
    return f'\n[[kernels]]\nname = "{name}"\nsolution = "{solution}"\nref = "{ref}"\nshapes = [{{N = 64}}]\n{extra}'


def suite_text(*, scale_threshold: str = "", with_relu: bool = False) -> str:
    text = "[defaults]\nrounds = 4\n"
    text += entry("scale", "cuda/scale.cu", "cuda/scale_ref.py", scale_threshold)
    text += entry("reduce", "cuda/reduce.cu", "cuda/reduce_ref.py")
    text += entry("add", "py/add.py", "py/add_ref.py", 'implementation = "triton"\n')
    if with_relu:
        text += entry("relu", "cuda/relu.cu", "cuda/scale_ref.py")
    return text


BASE = {
    "kbench.toml": suite_text(),
    # scale's header is reached through a macro: a scan of #include lines would miss it.
    "cuda/scale.cu": '#define VEC_HEADER "../include/vec.cuh"\n#include VEC_HEADER\n' + SOLVE,
    "cuda/reduce.cu": '#include "../include/warp.cuh"\n' + SOLVE,
    "include/vec.cuh": "// float4 loads\n",
    "include/warp.cuh": "// warp shuffles\n",
    "cuda/scale_ref.py": "def reference(x, **_):\n    return x * 2\n",
    "cuda/reduce_ref.py": "from refhelpers import total\n\ndef reference(x, **_):\n    return total(x)\n",
    "refhelpers.py": "def total(x):\n    return x.sum()\n",
    "py/add.py": kernel_source("triton"),
    "py/add_ref.py": ref_source("triton"),
}


def plan_between(repo: TempRepo, base_sha: str, head_sha: str | None) -> AffectedPlan:
    git_repo = GitRepo(repo.root)
    changed = git_repo.changed_paths(base_sha, head_sha)
    with git_repo.worktree(base_sha) as base_tree:
        if head_sha is None:
            return _plan(base_tree, repo.root, changed)
        with git_repo.worktree(head_sha) as head_tree:
            return _plan(base_tree, head_tree, changed)


def _plan(base_tree: Path, head_tree: Path, changed: frozenset[str]) -> AffectedPlan:
    base = Side(base_tree, load_suite(base_tree / "kbench.toml", check_files=False), "nvcc 13.0", "0.1.0")
    head = Side(head_tree, load_suite(head_tree / "kbench.toml"), "nvcc 13.0", "0.1.0")
    return affected_kernels(base, head, changed, scan_headers=header_dependencies)


@pytest.fixture
def repo(tmp_path: Path) -> TempRepo:
    repo = TempRepo(tmp_path / "repo")
    repo.commit(dict(BASE), "base")
    return repo


def test_a_header_change_between_commits_marks_only_its_includer(repo: TempRepo) -> None:
    base_sha = repo.git("rev-parse", "HEAD")
    head_sha = repo.commit({"include/vec.cuh": "// float4 loads, unrolled\n"}, "faster vec")

    plan = plan_between(repo, base_sha, head_sha)

    assert plan.notes == ()  # nvcc answered for every kernel, on both sides
    assert [(c.name, c.reasons) for c in plan.affected] == [("scale", ("include/vec.cuh changed (a header scale.cu includes)",))]
    assert plan.not_affected == ("reduce", "add")


def test_a_renamed_helper_module_an_entry_edit_and_an_added_kernel(repo: TempRepo) -> None:
    base_sha = repo.git("rev-parse", "HEAD")
    repo.git("mv", "refhelpers.py", "cuda/refhelpers.py")  # still importable: beside reduce_ref.py
    head_sha = repo.commit(
        {
            "kbench.toml": suite_text(scale_threshold='threshold = "4%"\n', with_relu=True),
            "cuda/relu.cu": '#include "../include/vec.cuh"\n' + SOLVE,
        },
        "move a helper, loosen scale, add relu",
    )

    plan = plan_between(repo, base_sha, head_sha)

    by_name = {change.name: change for change in plan.affected}
    assert set(by_name) == {"scale", "reduce", "relu"}
    assert by_name["scale"].reasons == ("its kbench.toml entry changed (threshold)",)
    # The module ref.py imported is gone from the base's place and new in the head's: both count.
    assert by_name["reduce"].changed_files == ("cuda/refhelpers.py", "refhelpers.py")
    assert by_name["relu"].reasons == ("added in the head",)
    assert plan.not_affected == ("add",)


def test_an_untracked_header_in_the_working_tree_counts(repo: TempRepo) -> None:
    base_sha = repo.git("rev-parse", "HEAD")
    repo.write({
        "cuda/reduce.cu": '#include "../include/warp.cuh"\n#include "../include/new_tile.cuh"\n' + SOLVE,
        "include/new_tile.cuh": "// not yet added to git\n",
    })

    plan = plan_between(repo, base_sha, None)

    reduce = plan.change_of("reduce")
    assert reduce is not None
    assert reduce.changed_files == ("cuda/reduce.cu", "include/new_tile.cuh")
    assert plan.affected_names == {"reduce"}


def test_a_global_setting_change_measures_everything(repo: TempRepo) -> None:
    base_sha = repo.git("rev-parse", "HEAD")
    head_sha = repo.commit({"kbench.toml": suite_text().replace("rounds = 4", "rounds = 8")}, "more rounds")

    plan = plan_between(repo, base_sha, head_sha)

    assert plan.everything_reason == "the suite's settings in [defaults] changed (rounds)"
    assert plan.affected_names == {"scale", "reduce", "add"}
