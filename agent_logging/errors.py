"""Exceptions raised by agent_logging.

The tree::

    AgentLoggingError
     ├── ConfigurationError      (also ValueError) a setting is missing or malformed
     ├── InvalidIdentifierError  (also ValueError) an identifier value is unsafe to carry
     └── SpoolError              the on-disk spool cannot be opened or written
          └── SpoolFullError     the spool is at its size cap and the policy refuses the record

After :func:`agent_logging.configure`, none of these reach a service from a logging call: a
logging failure is counted and reported once on an internal logger instead.
"""

from __future__ import annotations

__all__ = [
    "AgentLoggingError",
    "ConfigurationError",
    "InvalidIdentifierError",
    "SpoolError",
    "SpoolFullError",
]


class AgentLoggingError(Exception):
    """Root of every exception this package raises."""


class ConfigurationError(AgentLoggingError, ValueError):
    """A configuration value (argument or ``AGENT_LOGGING_*`` variable) is invalid."""


class InvalidIdentifierError(AgentLoggingError, ValueError):
    """An identifier value is empty, too long, or holds characters unsafe to propagate.

    Attributes:
        key: the identifier's name, e.g. ``allocation_id``.
        reason: what is wrong with the value, in words.
    """

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"invalid {key}: {reason}")
        self.key = key
        self.reason = reason


class SpoolError(AgentLoggingError):
    """The spool directory or one of its segment files cannot be used."""


class SpoolFullError(SpoolError):
    """The spool reached its size cap and its policy refuses the record."""
