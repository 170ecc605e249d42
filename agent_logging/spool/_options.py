"""The spool's options: the full and fsync policies, and checking every option once, at open.

What each policy does is in the module doc of ``_spool`` (the size cap, and durability).
:meth:`SpoolOptions.checked` raises :class:`~agent_logging.errors.ConfigurationError` naming
the option that is wrong, before the spool touches its directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from agent_logging.errors import ConfigurationError
from agent_logging.spool._framing import HEADER_BYTES

__all__ = ["FsyncPolicy", "FullPolicy", "SpoolOptions"]

FullPolicy = Literal["drop_oldest", "drop_newest", "block"]
FsyncPolicy = Literal["batch", "interval", "always", "never"]
_FULL_POLICIES: Final = ("drop_oldest", "drop_newest", "block")
_FSYNC_POLICIES: Final = ("batch", "interval", "always", "never")


@dataclass(frozen=True, slots=True)
class SpoolOptions:
    max_bytes: int
    segment_bytes: int
    full_policy: FullPolicy
    block_timeout_s: float
    fsync: FsyncPolicy
    fsync_interval_s: float

    @classmethod
    def checked(
        cls,
        max_bytes: int,
        segment_bytes: int,
        full_policy: FullPolicy,
        block_timeout_s: float,
        fsync: FsyncPolicy,
        fsync_interval_s: float,
    ) -> SpoolOptions:
        if full_policy not in _FULL_POLICIES:
            raise ConfigurationError(
                f"full_policy must be one of {', '.join(_FULL_POLICIES)}, not {full_policy!r}"
            )
        if fsync not in _FSYNC_POLICIES:
            raise ConfigurationError(
                f"fsync must be one of {', '.join(_FSYNC_POLICIES)}, not {fsync!r}"
            )
        if segment_bytes <= HEADER_BYTES or 2 * segment_bytes > max_bytes:
            raise ConfigurationError(
                f"segment_bytes ({segment_bytes}) must exceed {HEADER_BYTES} and be at most half "
                f"of max_bytes ({max_bytes}), so that drop_oldest always has a segment to drop"
            )
        if not (block_timeout_s >= 0 and fsync_interval_s > 0):
            raise ConfigurationError(
                "block_timeout_s must be >= 0 and fsync_interval_s > 0, "
                f"not {block_timeout_s} and {fsync_interval_s}"
            )
        return cls(max_bytes, segment_bytes, full_policy, block_timeout_s, fsync, fsync_interval_s)
