"""agent_logging: the same identifiers in every record, across every layer and process hop.

Five-minute tour::

    import agent_logging

    agent_logging.configure(service="node-agent", layer="node", env="prod")
    log = agent_logging.get_logger(__name__)
    agent_logging.bind(node_id="n-17", node_instance_id="ni-3")
    with agent_logging.bound(allocation_id="a-9", workflow_id="wf-2"):
        log.info("task claimed", task="reimage")

Every record is one JSON line (DESIGN §4). See README.md for propagation over HTTP,
subprocesses, job payloads and SQL, and for durable shipping to Loki.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent_logging import _state
from agent_logging._settings import Settings
from agent_logging._types import OWNER_LAYERS
from agent_logging.context import _context, _otel, _propagation
from agent_logging.context._context import bind, bound, unbind
from agent_logging.context._ids import new_correlation_id
from agent_logging.context._threads import ContextThreadPoolExecutor, carry_context
from agent_logging.errors import (
    AgentLoggingError,
    ConfigurationError,
    InvalidIdentifierError,
    SpoolError,
    SpoolFullError,
)
from agent_logging.schema import CONTEXT_KEYS, IDENTIFIER_KEYS, check_id

if TYPE_CHECKING:
    from agent_logging._config import configure, get_logger, shutdown

__all__ = [
    "CONTEXT_KEYS",
    "IDENTIFIER_KEYS",
    "OWNER_LAYERS",
    "AgentLoggingError",
    "ConfigurationError",
    "ContextThreadPoolExecutor",
    "InvalidIdentifierError",
    "Settings",
    "SpoolError",
    "SpoolFullError",
    "bind",
    "bound",
    "carry_context",
    "configure",
    "current_ids",
    "env",
    "flush",
    "get_logger",
    "headers",
    "health",
    "ids_from_headers",
    "ids_from_payload",
    "new_correlation_id",
    "payload",
    "shutdown",
    "sql_comment",
    "unbind",
]

__version__ = "0.1.0"

#: Names loaded on first use: the pipeline (structlog, the shipping client) costs about a
#: tenth of a second to import, and a reader of evidence (the correlator, ``schema`` or
#: ``owner`` alone) never configures one.
_LAZY = {"configure": "_config", "get_logger": "_config", "shutdown": "_config"}


def __getattr__(name: str) -> Any:
    """PEP 562: ``configure``, ``get_logger`` and ``shutdown`` import the pipeline when first
    asked for, then stay as plain attributes."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_logging' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"agent_logging.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def current_ids() -> dict[str, str]:
    """The identifiers known now: process-wide ones, then those bound in this context, then
    the active OpenTelemetry span's ``trace_id``/``span_id``.

    Returns:
        A new dict; keys are among :data:`CONTEXT_KEYS`, unknown ones absent.
    """
    pipeline = _state.pipeline
    ids = dict(pipeline.base_ids) if pipeline is not None else {}
    ids.update(_context.current())
    span = _otel.span_ids()
    if span is not None:
        ids["trace_id"], ids["span_id"] = span
    return ids


def headers() -> dict[str, str]:
    """Outbound HTTP headers for the current context: ``traceparent``, ``baggage`` (the five
    identifiers) and ``X-Correlation-ID``, each only when known.

    Send them only to peers you trust: the integrations in ``agent_logging.integrations`` check
    the host against ``propagate_hosts`` for you.
    """
    return _propagation.render_headers(current_ids())


def ids_from_headers(request_headers: Mapping[str, str] | Any) -> dict[str, str]:
    """Identifiers carried by incoming headers (the inverse of :func:`headers`).

    Args:
        request_headers: a mapping or (name, value) pairs; names are case-insensitive.

    Returns:
        The acceptable identifiers; unsafe or malformed values are left out, and so is
        anything that is not a header (``{}`` for ``None``, a string, a number...). Never
        raises.
    """
    return _propagation.parse_headers(request_headers)[0]


def env() -> dict[str, str]:
    """``AGENT_LOGGING_*`` variables that hand the current identifiers to a subprocess.

    ``configure()`` in the child reads them and binds them process-wide::

        subprocess.run(cmd, env={**os.environ, **agent_logging.env()})
    """
    return _propagation.env_for_child(current_ids())


def payload() -> dict[str, str]:
    """The current identifiers as a plain dict for job payloads (AAP/EDA ``extra_vars``,
    queue messages); :func:`ids_from_payload` reads them back on the other side."""
    return current_ids()


def ids_from_payload(data: Mapping[str, Any] | Any) -> dict[str, str]:
    """Identifiers found in a job payload (the inverse of :func:`payload`).

    Args:
        data: the payload, a mapping (AAP/EDA ``extra_vars``, a queue message).

    Returns:
        The acceptable identifiers. An integer is taken as its decimal text, as
        :func:`bind` takes it (inventories number their nodes); unsafe values are left out,
        and anything that is not a mapping gives ``{}``. Never raises.
    """
    if not isinstance(data, Mapping):
        return {}
    ids: dict[str, str] = {}
    for key in CONTEXT_KEYS:
        try:
            value = data.get(key)
            if value is not None:
                ids[key] = check_id(key, value)
        except Exception:  # noqa: BLE001, S112 - unsafe or unreadable: left out, as documented
            continue
    return ids


def sql_comment() -> str:
    """A sqlcommenter comment with the current identifiers, to append to a SQL statement so
    PostgreSQL's own logs carry them: ``/*allocation_id='a-9',correlation_id='c-1'*/``.

    Values are URL-encoded per the sqlcommenter spec; the result is safe to append.
    """
    return _propagation.sql_comment_for(current_ids())


def flush(timeout_s: float = 5.0) -> bool:
    """Ship everything spooled so far now, without waiting for a batch to fill or age.

    Blocks the caller up to ``timeout_s`` (the logging calls themselves never wait). For the
    end of a batch job or a test; ``agent-logging drain`` is the gate before a reimage.

    Returns:
        True when everything was shipped in time, or nothing ships (no durable path).
    """
    pipeline = _state.pipeline
    return True if pipeline is None else pipeline.flush(timeout_s)


def health() -> dict[str, Any]:
    """Pipeline and shipping health: records, failures, and for the durable path the spool's
    depth, oldest unsent age, sent, retried, dropped and dead-lettered counts, ``reconciled``
    (records that may have reached Loki before a crash or a failure, found there and not pushed
    again) and ``resent_unreconciled`` (records pushed again without knowing whether Loki held
    them: each may be visible twice), and the last shipping error with its age in seconds
    (``last_error``, ``last_error_age_s``)."""
    pipeline = _state.pipeline
    if pipeline is None:
        return {"configured": False}
    return pipeline.health()
