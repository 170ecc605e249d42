"""The vocabulary shared by every module: identifier keys, layers, owner layers."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Final

#: The five identifiers of DESIGN §3, in the order they are rendered and propagated.
IDENTIFIER_KEYS: Final = (
    "node_id",
    "node_instance_id",
    "correlation_id",
    "allocation_id",
    "workflow_id",
)

#: Trace context carried beside the identifiers (lower-case hex, 32 and 16 digits).
TRACE_KEYS: Final = ("trace_id", "span_id")

#: Everything the context carries across hops.
CONTEXT_KEYS: Final = IDENTIFIER_KEYS + TRACE_KEYS

#: Where a record comes from.
LAYERS: Final = frozenset({"node", "ingress", "api", "workflow", "db"})

#: Who owns a failure (DESIGN §4).
OWNER_LAYERS: Final = frozenset(
    {
        "deploy",
        "cert",
        "ingress",
        "api_auth",
        "api",
        "workflow_state",
        "db",
        "node",
        "provider",
        "unknown",
    }
)

#: structlog's event dict: what processors take and return.
EventDict = MutableMapping[str, Any]

#: Identifiers as carried: key to value, only known ones present.
Ids = Mapping[str, str]
