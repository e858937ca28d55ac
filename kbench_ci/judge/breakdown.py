"""Where a judged command's time goes, by process and step (``KBENCH_CI_JUDGE_BREAKDOWN``: a
file the judge appends one JSON line a case, process and step to; unset, nothing is recorded).

A step is timed by the judge, on its own clock, whoever does the work: a side's load is the
judge's wait for that side's reply (imports, compiles, a first call in the side's worker), a
side's timed calls are the judge's handoffs to it. Steps nest (a turn's quiet-GPU wait inside
a round): each keeps only its own time, the time of the steps inside it taken out, so a case's
lines add up to the judge's time on the case. ``scripts/acceptance/judge_breakdown.py`` reads the file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kbench_ci.suite.settings import JUDGE_BREAKDOWN_ENV

__all__ = ["RECORD", "Breakdown", "Line"]

#: the process of the judge's own steps; a side's steps carry its label
JUDGE = "judge"


@dataclass(frozen=True, slots=True)
class Line:
    """One case's time in one step of one process (seconds, the steps inside it left out)."""

    case: str
    process: str
    step: str
    seconds: float
    count: int
    #: the judge process's id: one a command (or a lane of one), which tells commands apart in a file
    judge: int = 0

    def to_json(self) -> str:
        return json.dumps({"judge": self.judge, "case": self.case, "process": self.process, "step": self.step,
                           "seconds": self.seconds, "count": self.count})

    @classmethod
    def from_json(cls, text: str) -> Line:
        data = json.loads(text)
        return cls(str(data["case"]), str(data["process"]), str(data["step"]), float(data["seconds"]), int(data["count"]),
                   int(data.get("judge", 0)))


@dataclass(slots=True)
class _Open:
    key: tuple[str, str]
    began: float
    inner_s: float = 0.0


class Breakdown:
    """The steps of the case under way, written out at its end (:meth:`write`). Off (``path``
    None): :meth:`step` records nothing."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._open: list[_Open] = []
        self._own_s: dict[tuple[str, str], float] = {}
        self._count: dict[tuple[str, str], int] = {}

    @property
    def on(self) -> bool:
        return self.path is not None

    @contextmanager
    def step(self, process: str, step: str) -> Iterator[None]:
        if self.path is None:
            yield
            return
        entry = _Open((process, step), time.perf_counter())
        self._open.append(entry)
        try:
            yield
        finally:
            self._open.pop()
            took = time.perf_counter() - entry.began
            self._add(entry.key, took - entry.inner_s)
            if self._open:
                self._open[-1].inner_s += took

    def split(self, process: str, step: str, seconds: float | None) -> None:
        """``seconds`` of the innermost open step were spent on ``step`` (a side's figure for a
        part of what the judge waited for): moved there."""
        if self.path is None or not self._open or seconds is None or seconds <= 0:
            return
        self._open[-1].inner_s += seconds
        self._add((process, step), seconds)

    def add(self, process: str, step: str, seconds: float) -> None:
        """A step timed before this record could time it (the judge's own start)."""
        if self.path is not None:
            self._add((process, step), seconds)

    def lines(self, case: str) -> list[Line]:
        return [Line(case, process, step, seconds, self._count[(process, step)], os.getpid())
                for (process, step), seconds in self._own_s.items()]

    def write(self, case: str) -> None:
        """The case's lines appended to the file, and forgotten."""
        if self.path is None:
            return
        lines = self.lines(case)
        self._own_s.clear()
        self._count.clear()
        with open(self.path, "a", encoding="utf-8") as out:
            out.writelines(line.to_json() + "\n" for line in lines)

    def _add(self, key: tuple[str, str], seconds: float) -> None:
        self._own_s[key] = self._own_s.get(key, 0.0) + seconds
        self._count[key] = self._count.get(key, 0) + 1


#: the judge process's record (the environment as the judge started)
RECORD = Breakdown(os.environ.get(JUDGE_BREAKDOWN_ENV) or None)
