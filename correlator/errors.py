"""Exceptions raised by the correlator.

The tree::

    CorrelatorError
     ├── InputError         a line, document or request body cannot be read (names where)
     │    └── TooLargeError  a request body is over the configured limit
     ├── QueryError         a query is malformed: unknown identifier key, unsafe value, bad time
     ├── NotFoundError      nothing is known about the identifier asked for
     ├── AuthError          a write (or, when configured, a read) came without the right token
     └── SourceError        a source (Loki, a file, PostgreSQL) cannot be reached or read

Domain code raises these; ``correlator.api`` maps them to HTTP statuses in one place and the
CLI to exit codes.
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "CorrelatorError",
    "InputError",
    "NotFoundError",
    "QueryError",
    "SourceError",
    "TooLargeError",
]


class CorrelatorError(Exception):
    """Root of every exception the correlator raises."""


class InputError(CorrelatorError):
    """Input cannot be read; the message names the file/line/field."""


class TooLargeError(InputError):
    """A request body is larger than the service accepts."""


class QueryError(CorrelatorError):
    """A query or its parameters are malformed or unsafe."""


class NotFoundError(CorrelatorError):
    """No evidence mentions the identifier asked for."""


class AuthError(CorrelatorError):
    """The request lacks the token this endpoint requires."""


class SourceError(CorrelatorError):
    """An evidence source cannot be reached or read."""
