"""Helpers to build temporary git repositories holding a kbench suite, for compare/run tests.

Kernels are tiny Triton and PyTorch programs that run on the CPU (Triton under its
interpreter). Each comes in variants: ``ok`` (correct), ``wrong`` (off by one), ``raises``
(run_kernel raises), ``hangs`` (run_kernel sleeps for an hour). The test's own git calls go straight to the git CLI, so they do not depend
on the code under test.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00",
}

TRITON_ADD = '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y{extra}, mask=mask)


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    y = torch.randn(N, dtype=torch.float32)
    out = torch.empty(N, dtype=torch.float32)
    return {{"inputs": {{"x": x, "y": y, "out": out}}, "outputs": ["out"]}}


def run_kernel(x, y, out, **_):
{raise_line}    n = x.numel()
    _add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
'''

ADD_REF = '''\
def reference(x, y, **_):
    return x + y
'''

TORCH_SCALE = '''\
import torch


def setup(N, **_):
    x = torch.randn(N, dtype=torch.float32)
    out = torch.empty(N, dtype=torch.float32)
    return {{"inputs": {{"x": x, "out": out}}, "outputs": ["out"]}}


def run_kernel(x, out, **_):
{raise_line}    torch.mul(x, 2.0, out=out)
{extra_line}'''

SCALE_REF = '''\
def reference(x, **_):
    return x * 2.0
'''


def kernel_source(kind: str, variant: str = "ok") -> str:
    """The solution file of a ``triton`` (vector add) or ``pytorch`` (scale by 2) kernel."""
    if variant not in ("ok", "wrong", "raises", "hangs"):
        raise ValueError(variant)
    raise_line = {
        "raises": '    raise RuntimeError("boom: the head kernel is broken")\n',
        "hangs": "    import time; time.sleep(3600)\n",
    }.get(variant, "")
    if kind == "triton":
        return TRITON_ADD.format(extra=" + 1.0" if variant == "wrong" else "", raise_line=raise_line)
    if kind == "pytorch":
        extra_line = "    out.add_(1.0)\n" if variant == "wrong" else ""
        return TORCH_SCALE.format(raise_line=raise_line, extra_line=extra_line)
    raise ValueError(kind)


def ref_source(kind: str) -> str:
    return ADD_REF if kind == "triton" else SCALE_REF


def kernel_files(name: str, kind: str, variant: str = "ok") -> dict[str, str]:
    """``kernels/<name>.py`` and ``kernels/<name>_ref.py``."""
    return {f"kernels/{name}.py": kernel_source(kind, variant), f"kernels/{name}_ref.py": ref_source(kind)}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


#: suite defaults that keep a CPU run short: few rounds, few trials, 2 seeds
FAST_DEFAULTS: dict[str, Any] = {
    "num_warmup": 1, "num_trials": 10, "discard_first": 1, "correctness_trials": 2, "rounds": 2,
    # Exactly `rounds` rounds: CPU timing cannot decide a 1-2% question, and the compare tests
    # count rounds. Adaptive rounds have tests of their own (tests/unit/measure).
    "time_budget": 0,
}


def suite_toml(kernels: Sequence[Mapping[str, Any]], defaults: Mapping[str, Any] | None = None) -> str:
    """kbench.toml text; each kernel is ``{"name", "kind", "shapes", ...extra keys}``."""
    lines = ["[defaults]"]
    for key, value in {**FAST_DEFAULTS, **(defaults or {})}.items():
        lines.append(f"{key} = {_toml_value(value)}")
    for kernel in kernels:
        name = kernel["name"]
        lines += [
            "",
            "[[kernels]]",
            f'name = "{name}"',
            f'solution = "kernels/{name}.py"',
            f'ref = "kernels/{name}_ref.py"',
            f'implementation = "{kernel["kind"]}"',
            f"shapes = {_toml_value(list(kernel['shapes']))}",
        ]
        for key, value in kernel.items():
            if key not in ("name", "kind", "shapes"):
                lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


class TempRepo:
    """A git repository in a temporary directory, on branch ``main``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "kbench test")
        self.git("config", "user.email", "kbench@example.invalid")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        result = subprocess.run(
            ["git", *args], cwd=self.root, env={**os.environ, **GIT_ENV}, check=True,
            capture_output=True, text=True,
        )
        return result.stdout.strip()

    def write(self, files: Mapping[str, str | None]) -> None:
        """Write (or, for None, delete) files in the working tree without committing."""
        for rel, content in files.items():
            path = self.root / rel
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)

    def commit(self, files: Mapping[str, str | None], message: str) -> str:
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def worktrees(self) -> list[str]:
        """Paths of every worktree git knows of (the main one first)."""
        out = self.git("worktree", "list", "--porcelain")
        return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]

    def status(self) -> str:
        return self.git("status", "--porcelain", "--untracked-files=all", "--ignored")


def make_suite_repo(
    root: Path, kernels: Sequence[Mapping[str, Any]], *, defaults: Mapping[str, Any] | None = None,
    message: str = "suite",
) -> TempRepo:
    """A repository with one commit: kbench.toml and every kernel's files (variants as given by
    ``kernel.get("variant", "ok")``)."""
    repo = TempRepo(root)
    files: dict[str, str | None] = {"kbench.toml": suite_toml(_config_only(kernels), defaults)}
    for kernel in kernels:
        files.update(kernel_files(kernel["name"], kernel["kind"], kernel.get("variant", "ok")))
    repo.commit(files, message)
    return repo


def _config_only(kernels: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in kernel.items() if k != "variant"} for kernel in kernels]


def suite_files(kernels: Sequence[Mapping[str, Any]], defaults: Mapping[str, Any] | None = None) -> dict[str, str | None]:
    """kbench.toml plus the kernels' files, for :meth:`TempRepo.commit` at a later commit."""
    files: dict[str, str | None] = {"kbench.toml": suite_toml(_config_only(kernels), defaults)}
    for kernel in kernels:
        files.update(kernel_files(kernel["name"], kernel["kind"], kernel.get("variant", "ok")))
    return files
