"""The rules for values a user gives, whether in kbench.toml or on the command line: one home, so
both say the same thing of the same value (the loader prefixes its file and key, the command
line its option).

Each rule returns the value or raises :class:`InvalidValue` with what is wrong, phrased to follow
the value's name: ``--seed must be >= 0, got -1`` / ``kbench.toml [defaults]: "seed" must be >= 0,
got -1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["INT64_MAX", "InvalidValue", "dimension", "distinct", "integer", "kind_of", "non_empty_path"]

#: the largest integer a seed, a count or a dimension may be: torch and the kernels take 64 bits
INT64_MAX = 2**63 - 1


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


def integer(value: object, *, minimum: int) -> int:
    """An integer from ``minimum`` to :data:`INT64_MAX`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidValue(f"must be an integer, got {kind_of(value)}")
    if value < minimum:
        raise InvalidValue(f"must be >= {minimum}, got {value}")
    if value > INT64_MAX:
        raise InvalidValue(f"must be at most {INT64_MAX} (64 bits), got {value}")
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
