"""The rules for values a user gives, whether in kbench.toml or on the command line: one home, so
both say the same thing of the same value (the loader prefixes its file and key, the command
line its option).

Each rule returns the value or raises :class:`InvalidValue` with what is wrong, phrased to follow
the value's name: ``--seed must be >= 0, got -1`` / ``kbench.toml [defaults]: "seed" must be >= 0,
got -1``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = [
    "INT64_MAX", "MIN_TIMEOUT_S", "InvalidValue", "budget_seconds", "dimension", "distinct", "integer", "kind_of",
    "non_empty_path", "timeout_seconds",
]

#: the largest integer a seed, a count or a dimension may be: torch and the kernels take 64 bits
INT64_MAX = 2**63 - 1
#: the shortest timeout (``timeout``, ``--case-timeout``, ``bench --timeout``): a worker cannot
#: even report a case's start in less, so a shorter one would fail every case as hung
MIN_TIMEOUT_S = 0.001


class InvalidValue(Exception):
    """What is wrong with a value, without its name (the caller adds it)."""


def kind_of(value: object) -> str:
    """A TOML-ish name of a value's type, for messages."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a float ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def integer(value: object, *, minimum: int, maximum: int = INT64_MAX) -> int:
    """An integer from ``minimum`` to ``maximum`` (at most :data:`INT64_MAX`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(f"must be an integer, got {kind_of(value)}")
    if value < minimum:
        raise InvalidValue(f"must be >= {minimum}, got {value}")
    if value > min(maximum, INT64_MAX):
        bits = " (64 bits)" if maximum >= INT64_MAX else ""
        raise InvalidValue(f"must be at most {min(maximum, INT64_MAX)}{bits}, got {value}")
    return value


def dimension(value: object) -> int:
    """A size: a positive integer of at most 64 bits."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(f"must be a positive integer, got {kind_of(value)}")
    if value <= 0:
        raise InvalidValue(f"must be a positive integer, got {value}")
    if value > INT64_MAX:
        raise InvalidValue(f"must be at most {INT64_MAX} (64 bits), got {value}")
    return value


def timeout_seconds(value: object) -> float:
    """A timeout: a finite number of seconds, at least :data:`MIN_TIMEOUT_S` (``inf`` is no
    timeout at all: a hung kernel would hold the runner until the job's own limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValue(f"must be a number of seconds, got {kind_of(value)}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidValue(f"must be a positive number of seconds, got {value}")
    if value < MIN_TIMEOUT_S:
        raise InvalidValue(f"must be at least {MIN_TIMEOUT_S:g} seconds, got {value}")
    return float(value)


def budget_seconds(value: object) -> float:
    """A time budget: 0 (none) or a finite positive number of seconds (``inf`` would never
    stop a case's rounds before their cap)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValue(f"must be a number of seconds (0 for exactly `rounds` rounds), got {kind_of(value)}")
    if not math.isfinite(value) or value < 0:
        raise InvalidValue(f"must be 0 or a positive number of seconds, got {value}")
    return float(value)


def distinct(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` with none twice."""
    seen: list[str] = []
    for name in names:
        if name in seen:
            raise InvalidValue(f'lists "{name}" twice')
        seen.append(name)
    return tuple(seen)


def non_empty_path(value: str) -> str:
    if not value.strip():
        raise InvalidValue("must be a folder path, got an empty string")
    return value
