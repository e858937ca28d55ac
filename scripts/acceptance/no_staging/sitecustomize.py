"""For `scripts/acceptance/gate_wall_time.py --modes ...,nostaging` only (the cost of staging and
checks): on PYTHONPATH with KBENCH_CI_PROBE_NO_STAGING=1, every process that imports
kbench_ci.measure.staging gets StagedCalls whose hooks do nothing, so the timed calls run
without new input content and without output checks. Never part of the product: the worker
imports this file only because the probe puts its folder first on PYTHONPATH."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any

TARGET = "kbench_ci.measure.staging"


class _PatchOnLoad(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            module.StagedCalls.before = lambda self, index: None
            module.StagedCalls.after = lambda self, index: None
            print("kbench-ci probe: staging and output checks switched off in this process", file=sys.stderr)
            log = os.environ.get("KBENCH_CI_PROBE_NO_STAGING_LOG")
            if log:  # the probe counts the processes it reached (a worker's stderr is not shown)
                with open(log, "a", encoding="utf-8") as handle:
                    handle.write(f"{os.getpid()} {' '.join(sys.argv)}\n")

        loader.exec_module = exec_module
        return spec


if os.environ.get("KBENCH_CI_PROBE_NO_STAGING") == "1":
    sys.meta_path.insert(0, _PatchOnLoad())
