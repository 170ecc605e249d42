"""Loki: the HTTP client, and the stream schema's wire form.

:class:`LokiClient` (``_client``) pushes and queries; ``_entries`` maps records to entries of
the stream schema (:mod:`agent_logging.schema`), ``_push`` and ``_record_encoder`` encode them
as a push request (protobuf by hand, ``_wire``, or JSON), ``_time_shards`` puts old entries in a
stream of their hour, and ``_answers`` says what Loki's answer to a push means.
"""

from __future__ import annotations

from agent_logging.loki._client import DEFAULT_QUERY_LIMIT, LokiClient, LokiQueryError

__all__ = ["DEFAULT_QUERY_LIMIT", "LokiClient", "LokiQueryError"]
