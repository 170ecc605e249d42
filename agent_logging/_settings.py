"""The library's settings: :class:`Settings`, and their resolution from ``configure()``'s
arguments, then ``AGENT_LOGGING_*`` variables, then defaults.

At the bottom of the package: it imports only the declarations (``_environ``, ``schema``,
``errors``), so every subsystem can take its options from here while ``_config``, which wires
the subsystems together, stays above them all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Literal

from agent_logging import _environ
from agent_logging.errors import ConfigurationError
from agent_logging.schema import LAYERS, check_id

__all__ = ["LEVEL_NUMBERS", "Output", "Settings", "resolve"]

LEVEL_NUMBERS: Final = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}

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
    arguments: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    inherited_ids: Mapping[str, str] | None = None,
) -> Settings:
    """Settings from ``arguments`` (None = not given) over ``environ`` over defaults.

    Args:
        arguments: ``configure()``'s keyword arguments.
        environ: the environment (default ``os.environ``).
        inherited_ids: identifiers a parent process handed down (``AGENT_LOGGING_ID_*``,
            read by the caller); ``arguments["ids"]`` win over them.

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
    ids = {**(inherited_ids or {}), **{k: check_id(k, v) for k, v in (a.get("ids") or {}).items()}}
    level_name = _choice(pick("level", _environ.LEVEL, "info"), _environ.LEVEL, list(LEVEL_NUMBERS))
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
        level=LEVEL_NUMBERS[level_name],
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
    return settings
