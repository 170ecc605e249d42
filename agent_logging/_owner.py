"""Which layer owns a failure, read from an exception and its causes (DESIGN §4).

A wrapper error ("provisioning failed") says nothing about who must act; its innermost cause
usually does. :func:`classify` walks the chain from the innermost cause outwards and applies
:data:`DEFAULT_RULES`, a table kept as data so that services can extend or replace it. Rules
match class names along the MRO (module + qualname), so no optional driver is imported.

Precedence: an explicit ``owner_layer`` argument to :func:`error_info` (``log.error(...,
owner_layer="db")``), then an ``owner_layer`` attribute set on any exception of the chain
(innermost first), then the first rule matching the innermost exception that any rule matches,
then ``"unknown"``. The library defines no exception classes for this: set the attribute.

Decisions a reader may question:

- HTTP 502 and 504 are the ingress reporting that its upstream failed or timed out: ``ingress``.
  503 is left unclassified: nginx returns it for rate limits and exhausted upstreams, and
  applications return it when overloaded or while a dependency is down; the status alone
  does not say which. 401/403 from a peer are ``api_auth``; 500 is left unclassified too (the
  peer could be our API or the provider).
- A timeout alone (``TimeoutError``, ``socket.timeout``, ``httpx.ReadTimeout``) is
  ``unknown``: it says a peer did not answer in time, not which layer was slow (the database,
  the ingress, the provider or the network).
- A TLS error without certificate or alert wording (``WRONG_VERSION_NUMBER``: TLS spoken to
  a plaintext port) is ``unknown``: it is a misconfiguration on either side, not a cert.
- A raw ``ConnectionRefusedError`` is ``ingress`` (DESIGN: "connection refused at the
  ingress"), even if the peer was a database reached by a driver that raises socket errors
  unwrapped (asyncpg): such callers should set ``owner_layer``.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from agent_logging._secrets import redact_text
from agent_logging._types import OWNER_LAYERS
from agent_logging.errors import ConfigurationError

__all__ = [
    "DEFAULT_RULES",
    "MAX_CHAIN",
    "MAX_MESSAGE_CHARS",
    "OwnerRule",
    "classify",
    "error_info",
    "exception_chain",
]

#: The longest chain followed; a longer one (or a cycle) is cut, never an error.
MAX_CHAIN: Final = 32

#: Exception messages are cut to this many characters in :func:`error_info`, once redacted.
MAX_MESSAGE_CHARS: Final = 2048


@dataclass(frozen=True, slots=True)
class OwnerRule:
    """One row of the owner table: which exceptions belong to ``owner_layer``.

    Every criterion that is given must match (and any one value within a criterion); a rule
    must give at least one.

    Attributes:
        owner_layer: one of :data:`agent_logging._types.OWNER_LAYERS`.
        type_names: fully qualified class names (``"ssl.SSLCertVerificationError"``; builtins
            also unqualified, ``"FileNotFoundError"``) matched against every class in the MRO.
        module_prefixes: packages or modules (``"psycopg"`` matches ``psycopg.errors``)
            matched against each MRO class's ``__module__``.
        statuses: HTTP statuses, read from ``exc.status_code``, ``exc.status`` or
            ``exc.response.status_code`` (httpx, requests, aiohttp, starlette/fastapi).
        errnos: ``OSError.errno`` values.
        message_patterns: regular expressions searched, case-insensitively, in ``str(exc)``.
        name: a label for tests and debugging.

    Raises:
        ConfigurationError: unknown owner layer, no criterion, or a pattern that does not compile.
    """

    owner_layer: str
    type_names: tuple[str, ...] = ()
    module_prefixes: tuple[str, ...] = ()
    statuses: frozenset[int] = frozenset()
    errnos: frozenset[int] = frozenset()
    message_patterns: tuple[str, ...] = ()
    name: str = ""
    _message_re: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.owner_layer not in OWNER_LAYERS:
            raise ConfigurationError(
                f"owner rule {self.name!r}: owner_layer {self.owner_layer!r} is not one of "
                f"{sorted(OWNER_LAYERS)}"
            )
        if not (
            self.type_names
            or self.module_prefixes
            or self.statuses
            or self.errnos
            or self.message_patterns
        ):
            raise ConfigurationError(
                f"owner rule {self.name!r} has no criterion: it would match all"
            )
        if self.message_patterns:
            joined = "|".join(f"(?:{pattern})" for pattern in self.message_patterns)
            try:
                compiled = re.compile(joined, re.IGNORECASE)
            except re.error as exc:
                raise ConfigurationError(f"owner rule {self.name!r}: bad pattern: {exc}") from exc
            object.__setattr__(self, "_message_re", compiled)

    def matches(self, exc: BaseException) -> bool:
        """Whether ``exc`` meets every criterion of this rule; never raises.

        Args:
            exc: the exception to test (its causes are not looked at).

        Returns:
            True on a match.
        """
        mro = type(exc).__mro__
        if self.type_names and not any(
            name in self.type_names for cls in mro for name in _class_names(cls)
        ):
            return False
        if self.module_prefixes and not any(
            _in_package(getattr(cls, "__module__", None), self.module_prefixes) for cls in mro
        ):
            return False
        if self.statuses and _http_status(exc) not in self.statuses:
            return False
        if self.errnos and not (isinstance(exc, OSError) and exc.errno in self.errnos):
            return False
        return self._message_re is None or self._message_re.search(_message(exc)) is not None


def _class_names(cls: type) -> tuple[str, ...]:
    qualname = getattr(cls, "__qualname__", cls.__name__)
    module = getattr(cls, "__module__", None)
    if not isinstance(module, str) or module == "builtins":
        return (qualname, f"builtins.{qualname}")
    return (f"{module}.{qualname}",)


def _in_package(module: object, prefixes: tuple[str, ...]) -> bool:
    return isinstance(module, str) and any(
        module == prefix or module.startswith(f"{prefix}.") for prefix in prefixes
    )


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries, if any; attribute access is guarded."""
    try:
        for owner, attribute in ((exc, "status_code"), (exc, "status")):
            status = getattr(owner, attribute, None)
            if isinstance(status, int) and not isinstance(status, bool):
                return status
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
    except Exception:  # noqa: BLE001 - a property of a third-party exception: never raise
        return None
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - like traceback: a broken __str__ must not break logging
        return f"<unprintable {type(exc).__name__} object>"


_CERT_MESSAGES: Final = (
    r"certificate[ _]verify[ _]failed",
    r"certificate has expired",
    r"self[- ]signed certificate",
    r"unable to get local issuer certificate",
    r"certificate is not valid for",  # hostname mismatch
    r"hostname mismatch",
    r"(?:tlsv1|sslv3) alert",
    r"handshake failure",
    r"unknown ca\b",
    r"bad certificate",
)

#: The default owner table, in priority order (within one exception, the first rule wins).
DEFAULT_RULES: Final[tuple[OwnerRule, ...]] = (
    OwnerRule(
        "cert",
        type_names=(
            "ssl.SSLCertVerificationError",
            "requests.exceptions.SSLError",
            "aiohttp.client_exceptions.ClientConnectorCertificateError",
        ),
        name="tls-certificate-type",
    ),
    OwnerRule("cert", message_patterns=_CERT_MESSAGES, name="tls-certificate-message"),
    OwnerRule("api_auth", statuses=frozenset({401, 403}), name="http-401-403"),
    OwnerRule(
        "api_auth",
        message_patterns=(r"\b401\b.{0,40}\bunauthori[sz]ed\b", r"\b403\b.{0,40}\bforbidden\b"),
        name="http-401-403-message",
    ),
    OwnerRule("ingress", statuses=frozenset({502, 504}), name="http-502-504"),
    # Database drivers before the connection rules: their messages say "connection refused"
    # too, and the driver's type is the better evidence.
    OwnerRule(
        "db",
        module_prefixes=(
            "psycopg",
            "psycopg2",
            "psycopg_pool",
            "asyncpg",
            "sqlite3",
            "duckdb",
            "_duckdb",
            "pymysql",
            "MySQLdb",
        ),
        name="db-driver",
    ),
    OwnerRule(
        "db",
        type_names=("sqlalchemy.exc.DBAPIError", "sqlalchemy.exc.TimeoutError"),
        name="sqlalchemy",
    ),
    OwnerRule(
        "ingress",
        errnos=frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH}),
        name="connect-errno",
    ),
    OwnerRule(
        "ingress",
        message_patterns=(
            r"connection refused",
            r"no route to host",
            r"network is unreachable",
            r"host is unreachable",
            r"\b502 bad gateway\b",
            r"\b504 gateway time-?out\b",
        ),
        name="connect-message",
    ),
    OwnerRule(
        "db",
        message_patterns=(
            r"lock timeout",
            r"deadlock detected",
            r"database is locked",
            r"could not obtain lock",
            r"could not serialize access",
            r"\bSQLSTATE\b",
        ),
        name="db-message",
    ),
    # Missing executables and prerequisites: subprocess raises FileNotFoundError for a missing
    # program (so does a shutil.which miss turned into an error), PermissionError for one
    # that is not executable; a shell reports 127 (not found) and 126 (not executable).
    OwnerRule(
        "deploy",
        type_names=("FileNotFoundError", "PermissionError", "ModuleNotFoundError"),
        name="missing-prerequisite-type",
    ),
    OwnerRule(
        "deploy",
        message_patterns=(
            r"command not found",
            r"no such file or directory",
            r"exit status 12[67]\b",
        ),
        name="missing-prerequisite-message",
    ),
)


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, outermost first, innermost last.

    Follows ``__cause__``, else ``__context__`` unless ``__suppress_context__`` is set, as
    Python's own traceback printing does. Stops at a cycle or after :data:`MAX_CHAIN`.

    Args:
        exc: the exception that was caught or logged.

    Returns:
        The chain; ``[exc]`` when it has no cause.
    """
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(chain) < MAX_CHAIN:
        chain.append(current)
        seen.add(id(current))
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__suppress_context__:
            current = None
        else:
            current = current.__context__
    return chain


def _explicit(exc: BaseException) -> str | None:
    try:
        layer = getattr(exc, "owner_layer", None)
    except Exception:  # noqa: BLE001 - a property of a third-party exception: never raise
        return None
    return layer if isinstance(layer, str) and layer in OWNER_LAYERS else None


def classify(exc: BaseException, rules: Sequence[OwnerRule] = DEFAULT_RULES) -> str:
    """The owner layer of a failure; never raises.

    Args:
        exc: the exception (usually the outermost wrapper).
        rules: the table to apply, in priority order.

    Returns:
        An owner layer from :data:`agent_logging._types.OWNER_LAYERS`; ``"unknown"`` when
        neither an explicit attribute nor a rule applies.
    """
    innermost_first = exception_chain(exc)[::-1]
    for link in innermost_first:
        explicit = _explicit(link)
        if explicit is not None:
            return explicit
    for link in innermost_first:
        for rule in rules:
            if rule.matches(link):
                return rule.owner_layer
    return "unknown"


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = getattr(cls, "__module__", None)
    if not isinstance(module, str) or module == "builtins":
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def error_info(
    exc: BaseException,
    *,
    owner_layer: str | None = None,
    rules: Sequence[OwnerRule] = DEFAULT_RULES,
) -> dict[str, object]:
    """The record's ``error`` field (DESIGN §4) for an exception; never raises.

    Args:
        exc: the exception being logged.
        owner_layer: the caller's own verdict (``log.error(..., owner_layer="db")``); it
            wins over classification. An invalid one gives ``"unknown"`` and is kept under
            ``owner_layer_invalid``.
        rules: the owner table for classification.

    Returns:
        ``{"type", "message", "owner_layer", "chain"}``: ``type`` module-qualified
        (``httpx.ConnectError``; builtins bare), ``message`` redacted (``redact_text``) and
        then cut to 2048 characters, and ``chain`` the ``{"type", "message"}`` of every
        exception, ``exc`` first and the innermost cause last.
    """
    # exc is the chain's first link: its message is redacted once, for both places.
    chain = [
        {"type": _type_name(link), "message": _shown_message(link)} for link in exception_chain(exc)
    ]
    info: dict[str, object] = {"type": chain[0]["type"], "message": chain[0]["message"]}
    if owner_layer is None:
        info["owner_layer"] = classify(exc, rules)
    elif isinstance(owner_layer, str) and owner_layer in OWNER_LAYERS:
        info["owner_layer"] = owner_layer
    else:
        info["owner_layer"] = "unknown"
        info["owner_layer_invalid"] = owner_layer
    info["chain"] = chain
    return info


def _shown_message(exc: BaseException) -> str:
    """The message as a record shows it: redacted, then cut. Cut first, a secret split by
    the cut (a URL's password without the "@" after it) would no longer be recognised."""
    return redact_text(_message(exc))[:MAX_MESSAGE_CHARS]
