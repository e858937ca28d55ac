"""Write-then-rename, so a crash or Ctrl-C mid-write never leaves a truncated results.json or
benchmark.md behind."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kbench_ci.errors import EnvironmentProblem
from kbench_ci.results.schema import to_jsonable


def write_json_atomically(path: Path, payload: Mapping[str, Any]) -> None:
    """Write-then-rename, so a crash mid-write never leaves a truncated results file."""
    write_text_atomically(path, json.dumps(to_jsonable(payload), indent=1, allow_nan=False) + "\n")


def _umask() -> int:
    """The process's umask (reading it means setting it: put straight back)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def write_text_atomically(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path``.

    An OSError (the folder removed or made read-only mid-run, a full disk) becomes one line that
    names the file, not a traceback.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise EnvironmentProblem(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        # mkstemp makes the file 0600; results.json and benchmark.md are ordinary files that
        # follow the umask, as `open()` would make them (a CI artifact, a shared report folder).
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_umask())
            handle.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise EnvironmentProblem(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
