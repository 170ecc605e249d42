"""A drop-in for python-logging-loki, backed by the durable pipeline.

python-logging-loki (unmaintained since 2019) sends one blocking HTTP POST per record and
drops records on any error. Migrating is one import::

    # import logging_loki
    from agent_logging import compat as logging_loki

    handler = logging_loki.LokiHandler(
        url="https://loki.example/loki/api/v1/push",
        tags={"application": "my-app"},
        auth=("user", "password"),
        version="1",
    )
    logging.getLogger("my-logger").addHandler(handler)

Records then go through ``agent_logging``'s pipeline (identifiers, redaction, JSON line) into
the on-disk spool and are shipped in batches by a background thread. The spool directory is
``AGENT_LOGGING_SPOOL_DIR`` or ``$XDG_STATE_HOME/agent-logging/spool``.

Tags: ``application``, ``service``, ``service_name``, ``app`` or ``job`` names the service (the
``service_name`` label), ``env`` and a known ``layer`` set those labels; the others become
fields of every record (our labels stay few and static, as Loki recommends), and
``extra={"tags": {...}}`` on a call adds fields to that record.

Levels: as with python-logging-loki, the stdlib levels (the logger's and the handler's own)
decide what is shipped: the pipeline the handler configures passes every level, unless
``AGENT_LOGGING_LEVEL`` sets a floor.

A process that already called ``agent_logging.configure()`` with ``loki_url`` ships through that
configuration. One configured without Loki makes the constructor raise ``ConfigurationError``:
the handler would have to replace that configuration (its outputs, stdlib capture, level and
processors) behind the application's back; give ``loki_url`` and ``spool_dir`` to that
``configure()`` call instead, and its stdlib capture ships the records a ``LokiHandler`` would.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from queue import Queue
from typing import Any, Final

from agent_logging import _config, _environ, _state
from agent_logging._types import LAYERS
from agent_logging.errors import ConfigurationError
from agent_logging.pipeline._stdlib import StdlibBridge

__all__ = ["LokiHandler", "LokiQueueHandler"]

_PUSH_SUFFIX: Final = "/loki/api/v1/push"
_SERVICE_TAGS: Final = ("service_name", "service", "application", "app", "job")


def _default_spool_dir() -> Path:
    configured = os.environ.get(_environ.SPOOL_DIR)
    if configured:
        return Path(configured)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "agent-logging" / "spool"


class LokiHandler(logging.Handler):
    """python-logging-loki's ``LokiHandler`` constructor, durable underneath.

    Args:
        url: Loki's push URL (``.../loki/api/v1/push``) or its base URL.
        tags: stream tags; see the module docstring for how they map.
        auth: ``(user, password)`` for basic authentication.
        version: accepted for compatibility ("0" or "1"); the push API used is always v1.

    Raises:
        ConfigurationError: ``agent_logging`` is already configured in this process without
            Loki (see the module docstring), or the URL or spool directory is unusable.
        SpoolError: the spool directory cannot be created or opened.
    """

    def __init__(
        self,
        url: str,
        tags: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        version: str | None = None,
    ) -> None:
        super().__init__()
        tags = dict(tags or {})
        service = next((str(tags.pop(k)) for k in _SERVICE_TAGS if k in tags), None)
        # env and a known layer are labels here as in python-logging-loki: they configure the
        # pipeline (a field of either name would only be kept as env_field / layer_field).
        env = str(tags.pop("env")) if "env" in tags else None
        layer = str(tags.pop("layer")) if tags.get("layer") in LAYERS else None
        self._fields = tags
        self._bridge = StdlibBridge()
        settings = _config.settings
        if settings is not None and settings.loki_url is None:
            # Reconfiguring would drop the application's outputs, stdlib capture, level and
            # processors (Settings does not even hold the processors): say what to do instead.
            raise ConfigurationError(
                "agent_logging is already configured in this process without Loki (by "
                "agent_logging.configure(), or by a record logged before it); a LokiHandler "
                "would replace that configuration: give loki_url= and spool_dir= to that "
                f"configure() call (or set {_environ.LOKI_URL} and {_environ.SPOOL_DIR}) "
                "instead of adding a LokiHandler"
            )
        if settings is None:
            base = url.removesuffix("/").removesuffix(_PUSH_SUFFIX)
            options: dict[str, Any] = {
                "loki_url": base,
                "spool_dir": _default_spool_dir(),
                "capture_stdlib": False,
                "output": "none",
            }
            if not os.environ.get(_environ.LEVEL):
                # python-logging-loki ships whatever its handler lets through: the stdlib
                # levels filter, and the pipeline must not drop DEBUG behind them.
                options["level"] = "debug"
            if auth is not None:
                options["loki_username"], options["loki_password"] = auth
            _config.configure(service=service, layer=layer, env=env, **options)

    def emit(self, record: logging.LogRecord) -> None:
        extra_tags = getattr(record, "tags", None)
        fields = {**self._fields, **extra_tags} if isinstance(extra_tags, Mapping) else self._fields
        for key, value in fields.items():
            if not hasattr(record, key):
                setattr(record, key, value)
        if isinstance(extra_tags, Mapping):
            delattr(record, "tags")
        self._bridge.emit(record)

    def flush(self) -> None:
        pipeline = _state.pipeline
        if pipeline is not None:
            for sink in pipeline.sinks:
                flush = getattr(sink, "flush", None)
                if flush is not None:
                    flush(5.0)


class LokiQueueHandler(LokiHandler):
    """python-logging-loki's ``LokiQueueHandler(queue, **kwargs)``.

    The queue is accepted and not needed: our logging call never blocks on the network (it
    appends to the spool, and a shipper thread does the sending).
    """

    def __init__(self, queue: Queue[Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.queue = queue
