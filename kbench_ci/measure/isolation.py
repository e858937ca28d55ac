"""What one case leaves behind in a warm worker, taken away before the next case.

A warm worker (:func:`kbench_ci.measure.child.serve`) runs case after case in one process, so
that torch is imported and the CUDA context created once per suite rather than once per case.
A fresh process was also a clean slate; here is what makes the next case start from one:

* **torch's global settings** (default dtype and device, grad mode, matmul precision, ...):
  put back with the same :class:`~kbench_ci.measure.torch_state.TorchGlobals` that restores them
  between variants.
* **user modules**: every module the case imported from outside the Python installation and
  kbench-ci's own dependencies is dropped from ``sys.modules``, so the next case imports the
  user's files afresh (a module-level counter starts at zero again; ``load_module`` would
  otherwise hand back the cached module of the same path). Modules of installed packages stay:
  importing torch's submodules twice breaks torch.
* **Triton's in-memory caches**: the compiled kernels (and autotuning choices) held by the
  dropped modules' ``@triton.jit`` functions are cleared, and torch.compile's caches reset.
* **the process**: ``sys.path``, ``os.environ`` and the working directory as they were.
* **a sticky CUDA error**: a kernel that hit an illegal address leaves every later CUDA call
  failing; such a worker retires (the parent starts a fresh one for the next case).
* **a loaded ``.so``** keeps its static state and cannot be unloaded reliably (``dlclose`` is a
  request, not a promise, and the dynamic loader returns the already-loaded library for a path
  it has seen), so each side's library is loaded from a copy at a path of the case's own
  (:func:`private_libraries`).
"""

from __future__ import annotations

import gc
import os
import shutil
import site
import sys
import sysconfig
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import torch

from kbench_ci.cuda import ptxas
from kbench_ci.cuda.build import shared_library_path
from kbench_ci.measure.impls import COMPILED_KINDS
from kbench_ci.measure.torch_state import TorchGlobals
from kbench_ci.wire.protocol import CaseJob

__all__ = ["ProcessBaseline", "private_libraries"]


def private_libraries(job: CaseJob, directory: Path) -> CaseJob:
    """``job`` with each compiled side's ``.cu`` and ``.so`` copied to ``directory/<label>/``.

    The worker loads ``<stem>.so`` beside the ``.cu`` it is given, so a copy of both at a path
    no other case uses gives every case (and every side) a library of its own: a new path and a
    new inode, which the dynamic loader maps afresh, statics and all. A side without a built
    library is left as it is, so the loader's error names the user's own path.
    """
    sides = []
    for side in job.sides:
        source = Path(side.solution)
        library = shared_library_path(source)
        if side.implementation not in COMPILED_KINDS or not library.is_file():
            sides.append(side)
            continue
        target = directory / side.label
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / source.name)
        shutil.copyfile(library, target / library.name)
        resources = ptxas.resources_path(library)  # the compiler's figures travel with their library
        if resources.is_file():
            shutil.copyfile(resources, ptxas.resources_path(target / library.name))
        sides.append(replace(side, solution=str(target / source.name)))
    return replace(job, sides=tuple(sides))


def _library_roots() -> tuple[Path, ...]:
    """Where installed code lives: the standard library, site-packages, and the folder of every
    top-level package imported before any user code (torch, triton, kbench_ci itself, wherever
    they are installed). A module under none of these was the user's."""
    roots: set[str] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(path)
    try:
        roots.update(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    roots.add(site.getusersitepackages())
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        paths = list(getattr(module, "__path__", None) or [])
        # A package's own folder only: its parent may be a source checkout that also holds the
        # user's kernels (an editable install of kbench_ci in the repository under test).
        roots.update(str(p) for p in paths)
        if not paths and getattr(module, "__file__", None):
            roots.add(str(module.__file__))
    return tuple(sorted({Path(os.path.realpath(r)) for r in roots if r}))


def _module_location(module: ModuleType) -> Path | None:
    where = getattr(module, "__file__", None)
    if not where:
        paths = list(getattr(module, "__path__", None) or [])
        where = paths[0] if paths else None
    return Path(os.path.realpath(where)) if isinstance(where, str) else None


def _clear_triton_caches(value: object, depth: int = 0) -> None:
    """Clear what a Triton kernel object holds in memory: compiled kernels per device
    (``JITFunction.device_caches``) and autotuning choices (``Autotuner.cache``), through the
    ``.fn`` chain of ``@autotune`` / ``@heuristics`` wrappers."""
    if depth > 8 or not type(value).__module__.startswith("triton."):
        return
    for attribute in ("device_caches", "cache"):
        cache = getattr(value, attribute, None)
        if isinstance(cache, dict):
            cache.clear()
    inner = getattr(value, "fn", None)
    if inner is not None and inner is not value:
        _clear_triton_caches(inner, depth + 1)


@dataclass(frozen=True, slots=True)
class ProcessBaseline:
    """The worker's process as it was before any user code ran; :meth:`after_case` returns to it."""

    torch_globals: TorchGlobals
    sys_path: tuple[str, ...]
    environ: tuple[tuple[str, str], ...]
    cwd: str
    library_roots: tuple[Path, ...]

    @staticmethod
    def capture() -> ProcessBaseline:
        return ProcessBaseline(
            torch_globals=TorchGlobals.capture(),
            sys_path=tuple(sys.path),
            environ=tuple(os.environ.items()),
            cwd=os.getcwd(),
            library_roots=_library_roots(),
        )

    def is_library(self, module: ModuleType) -> bool:
        location = _module_location(module)
        if location is None:  # built in, frozen, or made in memory: nothing of the user's
            return True
        return any(location == root or location.is_relative_to(root) for root in self.library_roots)

    def after_case(self, modules_before: frozenset[str], device: torch.device) -> str | None:
        """Take away what the case left; the reason this worker must not serve another case
        (then it retires), or None."""
        self.torch_globals.restore()
        sys.path[:] = self.sys_path
        environ = dict(self.environ)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        try:
            os.chdir(self.cwd)
        except OSError as exc:
            return f"cannot return to the worker's folder after the case: {exc}"
        for name in set(sys.modules) - modules_before:
            module = sys.modules.get(name)
            if module is None or self.is_library(module):
                continue
            for value in list(vars(module).values()):
                _clear_triton_caches(value)
            del sys.modules[name]
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None:
            dynamo.reset()  # torch.compile's compiled graphs and guards, the baseline's included
        gc.collect()
        if device.type == "cuda" and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            try:
                torch.cuda.synchronize(device)
                torch.zeros(1, device=device).add_(1).item()
            except Exception as exc:
                # An illegal address or a trap makes every later CUDA call in this process fail.
                text = str(exc).strip().splitlines()
                return f"a CUDA error outlived the case: {text[0] if text else type(exc).__name__}"
            torch.cuda.empty_cache()  # the next case starts with the allocator as a fresh process
        return None
