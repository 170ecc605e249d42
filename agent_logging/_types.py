"""The types every module shares, and the vocabulary of :mod:`agent_logging.schema` in the form
the library tests membership with (the names are defined there, once)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Final

from agent_logging import schema

#: As sets, for the membership tests of the pipeline and the owner table.
LAYERS: Final = frozenset(schema.LAYERS)
OWNER_LAYERS: Final = frozenset(schema.OWNER_LAYERS)

#: structlog's event dict: what processors take and return.
EventDict = MutableMapping[str, Any]

#: Identifiers as carried: key to value, only known ones present.
Ids = Mapping[str, str]
