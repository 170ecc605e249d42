"""Every environment variable the library reads, declared once.

Arguments to :func:`agent_logging.configure` win over these; these win over the defaults.
The identifier variables (``AGENT_LOGGING_NODE_ID`` ...) are how :func:`agent_logging.env`
hands a parent's context to a child process: ``configure()`` in the child binds them.
"""

from __future__ import annotations

from typing import Final

from agent_logging.schema import IDENTIFIER_KEYS

SERVICE: Final = "AGENT_LOGGING_SERVICE"
"""The service name (label ``service_name`` in Loki). Default: the program's name."""

LAYER: Final = "AGENT_LOGGING_LAYER"
"""The layer: ``node``, ``ingress``, ``api``, ``workflow`` or ``db``."""

ENV: Final = "AGENT_LOGGING_ENV"
"""The deployment environment (``prod``, ``staging``, ``dev``...). Default ``dev``."""

LEVEL: Final = "AGENT_LOGGING_LEVEL"
"""Lowest level emitted: ``debug``, ``info`` (default), ``warning``, ``error``, ``critical``."""

OUTPUT: Final = "AGENT_LOGGING_OUTPUT"
"""Where JSON lines go besides the durable path: ``stderr`` (default), ``stdout`` or ``none``."""

FORMAT: Final = "AGENT_LOGGING_FORMAT"
"""``json``, ``console`` or ``auto`` (default: console when the output is a terminal)."""

PROPAGATE_HOSTS: Final = "AGENT_LOGGING_PROPAGATE_HOSTS"
"""Comma-separated hosts that outbound hooks may send identifiers to (``*.suffix`` allowed).
Empty by default: baggage never leaks to a host nobody allowed."""

NODE_ID_LABEL: Final = "AGENT_LOGGING_NODE_ID_LABEL"
"""``1`` to make ``node_id`` a Loki stream label, ``0`` not to. Default: on for the ``node``
layer (one stream per node, so a node's backlog after a long outage is not refused as "too far
behind" by streams its peers kept pushing to), off for the other layers."""

LOKI_URL: Final = "AGENT_LOGGING_LOKI_URL"
"""Loki base URL, e.g. ``http://loki:3100``. With a spool directory it turns on shipping."""

LOKI_TENANT: Final = "AGENT_LOGGING_LOKI_TENANT"
"""Sent as ``X-Scope-OrgID`` on every push and query."""

LOKI_USERNAME: Final = "AGENT_LOGGING_LOKI_USERNAME"
"""Basic-auth user for Loki."""

LOKI_PASSWORD: Final = "AGENT_LOGGING_LOKI_PASSWORD"  # noqa: S105 - a variable name
"""Basic-auth password for Loki."""

LOKI_BEARER_TOKEN: Final = "AGENT_LOGGING_LOKI_BEARER_TOKEN"  # noqa: S105 - a variable name
"""Bearer token for Loki (instead of basic auth)."""

LOKI_CA_BUNDLE: Final = "AGENT_LOGGING_LOKI_CA_BUNDLE"
"""Path of a PEM CA bundle that signs Loki's TLS certificate."""

LOKI_ENCODING: Final = "AGENT_LOGGING_LOKI_ENCODING"
"""``protobuf`` (default: protobuf + snappy) or ``json``."""

SPOOL_DIR: Final = "AGENT_LOGGING_SPOOL_DIR"
"""Directory of the durable spool. Put it on storage that survives a restart of the service."""

SPOOL_MAX_BYTES: Final = "AGENT_LOGGING_SPOOL_MAX_BYTES"
"""Size cap of the spool in bytes. Default 268435456 (256 MiB)."""

SPOOL_FULL_POLICY: Final = "AGENT_LOGGING_SPOOL_FULL_POLICY"
"""``drop_oldest`` (default), ``drop_newest`` or ``block`` (briefly) when the spool is full."""

SPOOL_FSYNC: Final = "AGENT_LOGGING_SPOOL_FSYNC"
"""``batch`` (default), ``interval``, ``always`` or ``never``: when the spool is fsynced."""

BATCH_MAX_BYTES: Final = "AGENT_LOGGING_BATCH_MAX_BYTES"
"""Largest push to Loki in bytes of lines. Default 1048576."""

BATCH_INTERVAL_S: Final = "AGENT_LOGGING_BATCH_INTERVAL_S"
"""Longest a record waits before it is pushed, in seconds. Default 1.0."""

SHIPPER: Final = "AGENT_LOGGING_SHIPPER"
"""``thread`` (default): ship from a thread of the service; ``process``: from a helper process
the service starts, whose CPU time does not compete with the service's threads for the GIL."""

FILE_PATH: Final = "AGENT_LOGGING_FILE_PATH"
"""A JSON-lines file (rotated by size) for sites whose collector tails files."""

FILE_MAX_BYTES: Final = "AGENT_LOGGING_FILE_MAX_BYTES"
"""Rotate the JSON-lines file at this size. Default 104857600 (100 MiB)."""

FILE_BACKUPS: Final = "AGENT_LOGGING_FILE_BACKUPS"
"""Rotated files kept. Default 5."""

OTLP_ENDPOINT: Final = "AGENT_LOGGING_OTLP_ENDPOINT"
"""OTLP/HTTP logs endpoint (``http://collector:4318/v1/logs``): also export records over OTLP."""

HEALTH_INTERVAL_S: Final = "AGENT_LOGGING_HEALTH_INTERVAL_S"
"""Seconds between shipping-health self-records (0 turns them off). Default 60."""

OWNER_RULES: Final = "AGENT_LOGGING_OWNER_RULES"
"""Path of a TOML file of owner rules, tried before the built-in table to name the owner
layer of a logged exception (format: :func:`agent_logging.owner.load_rules`). Read once by
``configure()``, which refuses a bad file. Default: the built-in table alone."""

TRACEPARENT: Final = "AGENT_LOGGING_TRACEPARENT"
"""The parent's W3C ``traceparent``, handed to child processes by :func:`agent_logging.env`."""

#: ``AGENT_LOGGING_NODE_ID`` ... one per identifier, for child processes.
IDENTIFIERS: Final = {key: f"AGENT_LOGGING_{key.upper()}" for key in IDENTIFIER_KEYS}
