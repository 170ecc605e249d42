"""``configure()``: the library wired from its settings (``_settings``: arguments, then
``AGENT_LOGGING_*`` variables, then defaults).

Configuring builds a new pipeline and swaps it in atomically; loggers obtained earlier keep
working because structlog is configured once with a trampoline processor that always calls the
pipeline in force. Reconfiguring closes the previous pipeline's sinks first (with a deadline).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import structlog

from agent_logging import _environ, _state
from agent_logging._settings import Settings, resolve
from agent_logging._types import EventDict
from agent_logging.context._propagation import ids_from_env
from agent_logging.errors import ConfigurationError
from agent_logging.owner import DEFAULT_RULES, OwnerRule, rules_with_defaults
from agent_logging.pipeline._bound import BoundLogger
from agent_logging.pipeline._pipeline import Pipeline, Processor, Sink
from agent_logging.pipeline._sinks import ConsoleSink, RotatingFileSink, StreamSink
from agent_logging.pipeline._stdlib import StdlibBridge

__all__ = ["configure", "dispatch", "get_logger", "shutdown"]

#: The settings in force, or None before ``configure()``.
settings: Settings | None = None
_hooks_installed = False
_bridge: StdlibBridge | None = None


def dispatch(logger: object, method_name: str, event_dict: EventDict) -> str:
    """structlog's only processor: hands the record to the pipeline in force.

    Returns an empty string for structlog to pass to :class:`_NullLogger`; the pipeline has
    already written the record everywhere it goes.
    """
    pipeline = _state.pipeline
    if pipeline is None and not _state.shut_down:
        _configure_from_environment()
        pipeline = _state.pipeline
    if pipeline is not None:
        pipeline.handle(method_name, event_dict)
    return ""


def _first_record(method_name: str, event_dict: EventDict) -> None:
    """A record that reached the pipeline's modules with no pipeline in force."""
    dispatch(None, method_name, event_dict)


_state.unconfigured = _first_record


def _configure_from_environment() -> None:
    """A record before any ``configure()``: configure from ``AGENT_LOGGING_*`` once, so a
    service that forgot to call it still gets JSON lines on stderr rather than silence."""
    with _state.configure_lock:
        if _state.pipeline is None and not _state.shut_down:
            try:
                configure()
            except Exception as exc:  # noqa: BLE001 - a bad variable must not raise from a log call
                _state.shut_down = True
                _state.report_once("autoconfigure", f"logging is off: {exc}")


def _install_structlog() -> None:
    """Point structlog at the trampoline; loggers bound at any time then follow every
    later ``configure()``."""
    structlog.configure(
        processors=[dispatch],
        wrapper_class=BoundLogger,
        logger_factory=_null_logger_factory,
        cache_logger_on_first_use=True,
    )


class _NullLogger:
    """The structlog "logger" at the end of the chain: the pipeline did the writing."""

    def _discard(self, *args: object, **kwargs: object) -> None:
        return None

    msg = debug = info = warning = warn = error = critical = fatal = exception = log = _discard


_NULL_LOGGER: Final = _NullLogger()


def _null_logger_factory(*args: object) -> _NullLogger:
    return _NULL_LOGGER


def _local_sinks(settings: Settings) -> list[Sink]:
    sinks: list[Sink] = []
    output = settings.output
    if output == "none":
        pass
    else:
        stream = sys.stderr if output == "stderr" else sys.stdout if output == "stdout" else output
        wants_console = settings.format == "console" or (
            settings.format == "auto" and output in ("stderr", "stdout") and _isatty(stream)
        )
        if wants_console:
            sinks.append(ConsoleSink(stream, colors=_isatty(stream)))
        else:
            sinks.append(StreamSink(stream))
    if settings.file_path is not None:
        sinks.append(
            RotatingFileSink(
                settings.file_path, max_bytes=settings.file_max_bytes, backups=settings.file_backups
            )
        )
    return sinks


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def configure(
    service: str | None = None,
    layer: str | None = None,
    env: str | None = None,
    *,
    processors: Sequence[Processor] = (),
    **options: Any,
) -> Settings:
    """Configure logging for this process: structlog and stdlib, one pipeline.

    Args:
        service: service name (label ``service_name``); default ``AGENT_LOGGING_SERVICE`` or
            the program's name.
        layer: ``node``, ``ingress``, ``api``, ``workflow`` or ``db``.
        env: deployment environment.
        processors: extra structlog processors, run before redaction.
        **options: any other field of :class:`Settings` (``level``, ``output``, ``format``,
            ``propagate_hosts``, ``ids``, ``loki_url``, ``spool_dir``, ``owner_rules``, ...).
            Each also has an ``AGENT_LOGGING_*`` variable; arguments win.

    Returns:
        The settings in force.

    Raises:
        ConfigurationError: a setting is invalid (named in the message), or the owner rules
            file is refused (the message names the file, the rule and the key).
        InvalidIdentifierError: an identifier in ``ids`` is unsafe.
    """
    global settings, _hooks_installed, _bridge
    with _state.configure_lock:
        unknown = set(options) - set(Settings.__dataclass_fields__)
        if unknown:
            raise ConfigurationError(
                f"configure() got unknown options: {', '.join(sorted(unknown))}"
            )
        inherited, problems = ids_from_env(os.environ)
        resolved = resolve(
            {"service": service, "layer": layer, "env": env, **options}, inherited_ids=inherited
        )
        # Read before any sink opens a file: a bad rules file stops configure() here, at
        # start-up, rather than misclassifying failures later.
        owner_rules = _owner_rules(resolved.owner_rules)
        sinks = _local_sinks(resolved)
        durable = None
        if resolved.loki_url is not None:
            from agent_logging.shipping import _durable

            durable = _durable.Durable.start(resolved)
            sinks.insert(0, durable)
        if resolved.otlp_endpoint is not None:
            from agent_logging.pipeline import _otlp

            sinks.append(_otlp.OtlpSink(resolved))
        pipeline = Pipeline(
            static={"service": resolved.service, "layer": resolved.layer, "env": resolved.env},
            min_level=resolved.level,
            sinks=sinks,
            processors=processors,
            base_ids=resolved.ids,
        )
        previous, _state.pipeline = _state.pipeline, pipeline
        _state.owner_rules = owner_rules
        settings = resolved
        if previous is not None:
            previous.close(timeout_s=2.0)
        _state.shut_down = False
        _install_structlog()
        root = logging.getLogger()
        if _bridge is not None:
            root.removeHandler(_bridge)
            _bridge = None
        if resolved.capture_stdlib:
            for handler in list(root.handlers):
                root.removeHandler(handler)
            _bridge = StdlibBridge()
            root.addHandler(_bridge)
            root.setLevel(resolved.level)
        if not _hooks_installed:
            atexit.register(shutdown)
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _hooks_installed = True
        for message in problems:
            pipeline.handle(
                "warning", {"event": "inherited identifier ignored", "problem": message}
            )
        return resolved


def _owner_rules(path: Path | None) -> tuple[OwnerRule, ...]:
    """The owner table for ``owner_rules``: the file's rules ahead of the built-in ones."""
    try:
        return rules_with_defaults(path)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{_environ.OWNER_RULES} / owner_rules: {exc}") from exc


def _after_fork_in_child() -> None:
    pipeline = _state.pipeline
    if pipeline is not None:
        pipeline.after_fork_in_child()


def shutdown(timeout_s: float = 5.0) -> None:
    """Flush and close every sink within ``timeout_s``; records not shipped stay spooled.

    Safe to call more than once; logging after shutdown goes nowhere until ``configure()``.
    """
    global settings, _bridge
    _state.shut_down = True
    pipeline, _state.pipeline = _state.pipeline, None
    _state.owner_rules = DEFAULT_RULES
    if _bridge is not None:
        logging.getLogger().removeHandler(_bridge)
        _bridge = None
    if pipeline is not None:
        pipeline.close(timeout_s)
    settings = None


def get_logger(name: str | None = None, **initial_values: Any) -> Any:
    """A structlog logger whose records go through the pipeline.

    Args:
        name: shown as the record's ``logger`` field (pass ``__name__``).
        **initial_values: fields bound to every record of this logger.
    """
    if name is not None:
        initial_values["logger"] = name
    # ``logger`` is a parameter name of structlog.get_logger, so bind the fields instead:
    # structlog already points at the trampoline (see below), so binding early is safe.
    return structlog.get_logger().bind(**initial_values)


_install_structlog()
