"""A strict Loki 3.x protocol test server, in-process.

Import it as ``from tests.lokisim import LokiServer``. Fixtures live in
:mod:`tests.lokisim.fixtures`; ``python -m tests.lokisim --port N`` serves
stand-alone. What it reproduces (push formats, limits and their exact messages,
de-duplication, the out-of-order window, tenants, ``query_range`` with a LogQL
subset, rate-based stream sharding and the ingestion rate limit) and where it stops are
described in each private module's docstring; ``test_parity.py`` holds it to a real Loki.
"""

from __future__ import annotations

from tests.lokisim._http import RequestRecord
from tests.lokisim._labels import format_labels, go_quote, parse_label_set
from tests.lokisim._limits import Limits
from tests.lokisim._proto import (
    PushEntry,
    PushStream,
    decode_protobuf_push,
    encode_protobuf_push,
    push_request_class,
)
from tests.lokisim._server import LokiServer
from tests.lokisim._store import StoredEntry

__all__ = [
    "Limits",
    "LokiServer",
    "PushEntry",
    "PushStream",
    "RequestRecord",
    "StoredEntry",
    "decode_protobuf_push",
    "encode_protobuf_push",
    "format_labels",
    "go_quote",
    "parse_label_set",
    "push_request_class",
]
