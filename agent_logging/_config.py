"""``configure()``: settings from arguments, then ``AGENT_LOGGING_*`` variables, then defaults.

Configuring builds a new pipeline and swaps it in atomically; loggers obtained earlier keep
working because structlog is configured once with a trampoline processor that always calls the
pipeline in force. Reconfiguring closes the previous pipeline's sinks first (with a deadline).
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Literal

import structlog

from agent_logging import _environ, _state
from agent_logging._types import LAYERS, EventDict
from agent_logging.context._propagation import ids_from_env
from agent_logging.errors import ConfigurationError
from agent_logging.owner import DEFAULT_RULES, OwnerRule, rules_with_defaults
from agent_logging.pipeline._bound import BoundLogger
from agent_logging.pipeline._pipeline import Pipeline, Processor, Sink
from agent_logging.pipeline._sinks import ConsoleSink, RotatingFileSink, StreamSink
from agent_logging.pipeline._stdlib import StdlibBridge
from agent_logging.schema import check_id

__all__ = ["Settings", "configure", "dispatch", "get_logger", "shutdown"]

_LEVEL_NUMBERS: Final = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}

Output = Literal["stderr", "stdout", "none"] | IO[Any]


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ``configure()`` resolved, for introspection and for the durable path."""

    service: str
    layer: str
    env: str
    level: int = 20
    output: Output = "stderr"
    format: Literal["json", "console", "auto"] = "auto"
    capture_stdlib: bool = True
    propagate_hosts: tuple[str, ...] = ()
    node_id_label: bool = False  # resolved: on by default for layer "node"
    ids: Mapping[str, str] = field(default_factory=dict)
    loki_url: str | None = None
    loki_tenant: str | None = None
    loki_username: str | None = None
    loki_password: str | None = field(default=None, repr=False)
    loki_bearer_token: str | None = field(default=None, repr=False)
    loki_ca_bundle: str | None = None
    loki_encoding: Literal["protobuf", "json"] = "protobuf"
    spool_dir: Path | None = None
    spool_max_bytes: int = 256 * 1024 * 1024
    spool_full_policy: Literal["drop_oldest", "drop_newest", "block"] = "drop_oldest"
    spool_fsync: Literal["batch", "interval", "always", "never"] = "batch"
    batch_max_bytes: int = 1024 * 1024
    batch_interval_s: float = 1.0
    shipper: Literal["thread", "process"] = "thread"
    file_path: Path | None = None
    file_max_bytes: int = 100 * 1024 * 1024
    file_backups: int = 5
    otlp_endpoint: str | None = None
    health_interval_s: float = 60.0
    owner_rules: Path | None = None  # an operator's owner rules file (TOML)


def _pick(value: Any, variable: str, default: Any, environ: Mapping[str, str]) -> Any:
    if value is not None:
        return value
    raw = environ.get(variable)
    return default if raw is None or raw == "" else raw


def _number(value: Any, variable: str, kind: type[int] | type[float]) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{variable}: expected a number, got {value!r}") from exc
    if number < 0:
        raise ConfigurationError(f"{variable}: must not be negative, got {value!r}")
    return number


def _choice(value: Any, variable: str, choices: Sequence[str]) -> str:
    text = str(value).lower()
    if text not in choices:
        raise ConfigurationError(f"{variable}: expected one of {', '.join(choices)}, got {value!r}")
    return text


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def resolve(
    arguments: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> tuple[Settings, list[str]]:
    """Settings from ``arguments`` (None = not given) over ``environ`` over defaults.

    Returns:
        ``(settings, problems)``: problems are identifier variables left out because unsafe.

    Raises:
        ConfigurationError: naming the argument or variable that is wrong.
    """
    env_map = os.environ if environ is None else environ
    a = arguments

    def pick(name: str, variable: str, default: Any) -> Any:
        return _pick(a.get(name), variable, default, env_map)

    program = Path(sys.argv[0] or "python").stem or "python"
    service = str(pick("service", _environ.SERVICE, program))
    layer = str(pick("layer", _environ.LAYER, "api"))
    if layer not in LAYERS:
        raise ConfigurationError(
            f"{_environ.LAYER} / layer: expected one of {', '.join(sorted(LAYERS))}, got {layer!r}"
        )
    inherited, problems = ids_from_env(env_map)
    ids = {**inherited, **{k: check_id(k, v) for k, v in (a.get("ids") or {}).items()}}
    level_name = _choice(
        pick("level", _environ.LEVEL, "info"), _environ.LEVEL, list(_LEVEL_NUMBERS)
    )
    hosts = pick("propagate_hosts", _environ.PROPAGATE_HOSTS, ())
    if isinstance(hosts, str):
        hosts = tuple(h.strip().lower() for h in hosts.split(",") if h.strip())
    output = pick("output", _environ.OUTPUT, "stderr")
    if isinstance(output, str):
        output = _choice(output, _environ.OUTPUT, ("stderr", "stdout", "none"))
    spool_dir = pick("spool_dir", _environ.SPOOL_DIR, None)
    file_path = pick("file_path", _environ.FILE_PATH, None)
    owner_rules = pick("owner_rules", _environ.OWNER_RULES, None)
    if owner_rules is not None and not isinstance(owner_rules, str | os.PathLike):
        raise ConfigurationError(
            f"{_environ.OWNER_RULES} / owner_rules: expected a path, got {owner_rules!r}"
        )

    def choice(name: str, variable: str, default: str, options: Sequence[str]) -> Any:
        return _choice(pick(name, variable, default), variable, options)

    def number(name: str, variable: str, default: float, kind: type[int] | type[float]) -> Any:
        return _number(pick(name, variable, default), variable, kind)

    e = _environ
    settings = Settings(
        service=service,
        layer=layer,
        env=str(pick("env", e.ENV, "dev")),
        level=_LEVEL_NUMBERS[level_name],
        output=output,
        format=choice("format", e.FORMAT, "auto", ("json", "console", "auto")),
        capture_stdlib=bool(a.get("capture_stdlib", True)),
        propagate_hosts=tuple(hosts),
        # Node agents share a service's stream across the fleet; Loki refuses entries more
        # than an hour behind their stream's newest, so a node's backlog after an outage
        # would be refused. One stream per node (a bounded label) avoids it.
        node_id_label=_flag(pick("node_id_label", e.NODE_ID_LABEL, layer == "node")),
        ids=ids,
        loki_url=pick("loki_url", e.LOKI_URL, None),
        loki_tenant=pick("loki_tenant", e.LOKI_TENANT, None),
        loki_username=pick("loki_username", e.LOKI_USERNAME, None),
        loki_password=pick("loki_password", e.LOKI_PASSWORD, None),
        loki_bearer_token=pick("loki_bearer_token", e.LOKI_BEARER_TOKEN, None),
        loki_ca_bundle=pick("loki_ca_bundle", e.LOKI_CA_BUNDLE, None),
        loki_encoding=choice("loki_encoding", e.LOKI_ENCODING, "protobuf", ("protobuf", "json")),
        spool_dir=Path(spool_dir) if spool_dir is not None else None,
        spool_max_bytes=number("spool_max_bytes", e.SPOOL_MAX_BYTES, 256 * 1024 * 1024, int),
        spool_full_policy=choice(
            "spool_full_policy",
            e.SPOOL_FULL_POLICY,
            "drop_oldest",
            ("drop_oldest", "drop_newest", "block"),
        ),
        spool_fsync=choice(
            "spool_fsync", e.SPOOL_FSYNC, "batch", ("batch", "interval", "always", "never")
        ),
        batch_max_bytes=number("batch_max_bytes", e.BATCH_MAX_BYTES, 1024 * 1024, int),
        batch_interval_s=number("batch_interval_s", e.BATCH_INTERVAL_S, 1.0, float),
        shipper=choice("shipper", e.SHIPPER, "thread", ("thread", "process")),
        file_path=Path(file_path) if file_path is not None else None,
        file_max_bytes=number("file_max_bytes", e.FILE_MAX_BYTES, 100 * 1024 * 1024, int),
        file_backups=number("file_backups", e.FILE_BACKUPS, 5, int),
        otlp_endpoint=pick("otlp_endpoint", e.OTLP_ENDPOINT, None),
        health_interval_s=number("health_interval_s", e.HEALTH_INTERVAL_S, 60.0, float),
        owner_rules=Path(owner_rules) if owner_rules is not None else None,
    )
    if (settings.loki_url is None) != (settings.spool_dir is None):
        given = "loki_url" if settings.loki_url else "spool_dir"
        raise ConfigurationError(
            f"the durable path needs both loki_url ({_environ.LOKI_URL}) and spool_dir "
            f"({_environ.SPOOL_DIR}); only {given} was given"
        )
    return settings, problems


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
        resolved, problems = resolve({"service": service, "layer": layer, "env": env, **options})
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
