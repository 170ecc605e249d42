"""Hypothesis strategies the adapters' property tests share: any JSON value, and RFC 3339
timestamps with the instant each names (so that a document can be readable where it must be
and anything at all everywhere else)."""

from __future__ import annotations

from typing import Any, Final

from hypothesis import strategies as st

__all__ = ["ANY_JSON", "TIMES", "TIMESTAMPS", "instant"]

_T0: Final = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z

#: Readable timestamps, in the forms adapters meet, and the instant each names.
TIMES: Final = {
    "2026-11-22T13:11:19Z": _T0,
    "2026-11-22T14:11:20.5+01:00": _T0 + 1_500_000_000,
    "2026-11-22t13:11:21.000000001z": _T0 + 2_000_000_001,
    "2026-11-22 08:11:22-0500": _T0 + 3_000_000_000,
}
TIMESTAMPS: Final = st.sampled_from(sorted(TIMES))

#: Any JSON value orjson writes (integers within 64 bits, finite floats). Its text is too short
#: to be a timestamp: a field drawn from it is never readable as one.
ANY_JSON: Final = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def instant(value: Any) -> int | None:
    """The instant of a field drawn from ``TIMESTAMPS | ANY_JSON``, or None (unreadable)."""
    return TIMES.get(value) if isinstance(value, str) else None
