"""The findings' deadlines and thresholds: one per rule's threshold, and the critical factor.

:class:`FindingsConfig`'s fields are not written out here: they are the thresholds the rules
of ``_rules`` name, with their defaults, so a new rule brings its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from correlator.errors import QueryError
from correlator.findings._rules import RULES

__all__ = ["CRITICAL_FACTOR", "DEFAULTS", "FindingsConfig"]

#: The field that makes a finding critical past that multiple of its threshold.
CRITICAL_FACTOR: Final = "critical_factor"

#: Every field with its default: the rules' thresholds in rule order, then the critical factor.
DEFAULTS: Final[Mapping[str, float]] = MappingProxyType(
    {rule.threshold: rule.default_s for rule in RULES} | {CRITICAL_FACTOR: 4.0}
)


class FindingsConfig:
    """Deadlines and thresholds, in seconds (a finding needs an age strictly greater).

    A value object: keyword arguments by field (:data:`DEFAULTS` names them: each rule's
    ``threshold``, e.g. ``release_failed_deadline_s``, and ``critical_factor``), read back as
    attributes; fields not given keep their defaults. Equal when every value is.

    Raises:
        QueryError: a value is negative, not finite, or not a number; ``critical_factor`` < 1.
        TypeError: a keyword names no field.
    """

    __slots__ = ("_values",)
    _values: Mapping[str, float]

    def __init__(self, **values: float) -> None:
        unknown = sorted(set(values) - DEFAULTS.keys())
        if unknown:
            raise TypeError(
                f"FindingsConfig has no field {unknown[0]!r}; use one of {list(DEFAULTS)}"
            )
        merged = {**DEFAULTS, **values}
        for name, value in merged.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise QueryError(f"{name} must be a number of seconds, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise QueryError(f"{name} must be a finite number >= 0, not {value!r}")
        if merged[CRITICAL_FACTOR] < 1:
            raise QueryError(f"critical_factor must be >= 1, not {merged[CRITICAL_FACTOR]!r}")
        object.__setattr__(self, "_values", MappingProxyType(merged))

    def __getattr__(self, name: str) -> float:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"FindingsConfig has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FindingsConfig is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FindingsConfig) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self._values.items())
        return f"FindingsConfig({fields})"

    def threshold(self, name: str) -> float:
        """The value of the field ``name`` (a rule's ``threshold``)."""
        return self._values[name]

    @property
    def critical_factor(self) -> float:
        """A finding is critical past this multiple of its threshold."""
        return self._values[CRITICAL_FACTOR]
