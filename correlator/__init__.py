"""correlator: one incident timeline across node, ingress, API, workflow and DB evidence.

The command line is ``correlator`` (see :mod:`correlator.cli`), the HTTP service
``correlator serve`` (:mod:`correlator.api`). The pure core — :mod:`correlator.graph`,
:mod:`correlator.timeline`, :mod:`correlator.verdict`, :mod:`correlator.findings`,
:mod:`correlator.latency` — takes plain events and returns plain data.
"""

from __future__ import annotations

from correlator.errors import (
    AuthError,
    CorrelatorError,
    InputError,
    NotFoundError,
    QueryError,
    SourceError,
    TooLargeError,
)
from correlator.model import Event, Reject

__all__ = [
    "AuthError",
    "CorrelatorError",
    "Event",
    "InputError",
    "NotFoundError",
    "QueryError",
    "Reject",
    "SourceError",
    "TooLargeError",
]

__version__ = "0.1.0"
