"""Owner-layer classification from real exceptions and their causes."""

from __future__ import annotations

import errno
import itertools
import sqlite3
import ssl
import subprocess
from collections.abc import Callable

import fastapi
import httpx
import pytest
import requests
import starlette.exceptions

from agent_logging.errors import ConfigurationError
from agent_logging.owner import (
    DEFAULT_RULES,
    MAX_CHAIN,
    OwnerRule,
    classify,
    error_info,
    exception_chain,
)


def _fake(qualified: str, *bases: type[BaseException]) -> type[Exception]:
    """A class that looks like a driver's (``psycopg.errors.LockNotAvailable``) without it."""
    module, _, name = qualified.rpartition(".")
    return type(name, bases or (Exception,), {"__module__": module})


PsycopgLockNotAvailable = _fake("psycopg.errors.LockNotAvailable")
PsycopgOperationalError = _fake("psycopg.OperationalError")
Psycopg2OperationalError = _fake("psycopg2.OperationalError")
AsyncpgDeadlock = _fake("asyncpg.exceptions.DeadlockDetectedError")
SqlalchemyDBAPIError = _fake("sqlalchemy.exc.DBAPIError")
SqlalchemyOperationalError = _fake("sqlalchemy.exc.OperationalError", SqlalchemyDBAPIError)
SqlalchemyArgumentError = _fake("sqlalchemy.exc.ArgumentError")
DuckdbIOException = _fake("_duckdb.IOException")
NotPsycopg = _fake("psycopgx.Error")


def _httpx_status_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", "https://aap.internal/api/v2/job_templates/42/launch/")
    response = httpx.Response(status, request=request)
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        return exc
    raise AssertionError(f"{status} did not raise")


def _requests_http_error(status: int, reason: str) -> requests.HTTPError:
    response = requests.Response()
    response.status_code = status
    response.reason = reason
    response.url = "https://api.internal/v1/allocations"
    try:
        response.raise_for_status()
    except requests.HTTPError as exc:
        return exc
    raise AssertionError(f"{status} did not raise")


def _wrapped(outer: Callable[[], BaseException], inner: BaseException) -> BaseException:
    """``outer`` raised ``from inner``, as a service's wrapper does."""
    try:
        try:
            raise inner
        except BaseException as cause:
            raise outer() from cause
    except BaseException as exc:
        return exc
    raise AssertionError("unreachable")


def _implicit(outer: Callable[[], BaseException], inner: BaseException) -> BaseException:
    """``outer`` raised while handling ``inner``, without ``from`` (``__context__`` only)."""
    try:
        try:
            raise inner
        except BaseException:
            raise outer()  # noqa: B904 - the implicit context is what is under test
    except BaseException as exc:
        return exc
    raise AssertionError("unreachable")


def _cert_expired() -> ssl.SSLCertVerificationError:
    return ssl.SSLCertVerificationError(
        1,
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired "
        "(_ssl.c:1006)",
    )


def _provisioning_failed() -> RuntimeError:
    return RuntimeError("provisioning failed")


CASES: list[tuple[str, BaseException, str]] = [
    ("ssl certificate verification", _cert_expired(), "cert"),
    (
        "ssl unknown ca alert",
        ssl.SSLError(1, "[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:1006)"),
        "cert",
    ),
    (
        "ssl handshake failure",
        ssl.SSLError(1, "[SSL: SSLV3_ALERT_HANDSHAKE_FAILURE] sslv3 alert handshake failure"),
        "cert",
    ),
    (
        "ssl plaintext port",
        ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"),
        "unknown",
    ),
    (
        "httpx self-signed",
        httpx.ConnectError(
            "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed "
            "certificate in certificate chain (_ssl.c:1006)"
        ),
        "cert",
    ),
    (
        "requests missing issuer",
        requests.exceptions.SSLError("unable to get local issuer certificate"),
        "cert",
    ),
    ("httpx 401", _httpx_status_error(401), "api_auth"),
    ("httpx 403", _httpx_status_error(403), "api_auth"),
    ("requests 403", _requests_http_error(403, "Forbidden"), "api_auth"),
    ("starlette 401", starlette.exceptions.HTTPException(401), "api_auth"),
    ("fastapi 403", fastapi.HTTPException(403, detail="token revoked"), "api_auth"),
    ("401 in a message only", RuntimeError("AAP said: 401 Unauthorized"), "api_auth"),
    ("httpx 502", _httpx_status_error(502), "ingress"),
    ("httpx 504", _httpx_status_error(504), "ingress"),
    ("httpx 503 is ambiguous", _httpx_status_error(503), "unknown"),
    ("httpx 500", _httpx_status_error(500), "unknown"),
    ("httpx 404", _httpx_status_error(404), "unknown"),
    (
        "connection refused",
        ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        "ingress",
    ),
    ("no route to host", OSError(errno.EHOSTUNREACH, "No route to host"), "ingress"),
    ("network unreachable", OSError(errno.ENETUNREACH, "Network is unreachable"), "ingress"),
    ("httpx connection refused", httpx.ConnectError("[Errno 111] Connection refused"), "ingress"),
    (
        "requests connection refused",
        requests.ConnectionError(
            "HTTPSConnectionPool(host='api.internal', port=443): Max retries exceeded "
            "(Caused by NewConnectionError('Failed to establish a new connection: "
            "[Errno 111] Connection refused'))"
        ),
        "ingress",
    ),
    ("sqlite locked", sqlite3.OperationalError("database is locked"), "db"),
    (
        "psycopg lock timeout",
        PsycopgLockNotAvailable("canceling statement due to lock timeout"),
        "db",
    ),
    (
        "psycopg refused is the database's",
        PsycopgOperationalError(
            'connection failed: connection to server at "127.0.0.1", port 5432 failed: '
            "Connection refused"
        ),
        "db",
    ),
    ("psycopg2", Psycopg2OperationalError("server closed the connection unexpectedly"), "db"),
    ("asyncpg deadlock", AsyncpgDeadlock("deadlock detected"), "db"),
    ("sqlalchemy operational", SqlalchemyOperationalError("(psycopg.OperationalError)"), "db"),
    ("sqlalchemy misuse is not the db", SqlalchemyArgumentError("bad argument"), "unknown"),
    ("duckdb", DuckdbIOException("could not set lock on file"), "db"),
    ("module prefix is a package", NotPsycopg("not a driver"), "unknown"),
    ("deadlock message", RuntimeError("ERROR: deadlock detected"), "db"),
    (
        "sqlstate message",
        RuntimeError("could not serialize access due to concurrent update (SQLSTATE 40001)"),
        "db",
    ),
    (
        "missing executable",
        FileNotFoundError(2, "No such file or directory", "/usr/bin/ansible-playbook"),
        "deploy",
    ),
    (
        "not executable",
        PermissionError(errno.EACCES, "Permission denied", "/opt/provision/bin/agent"),
        "deploy",
    ),
    (
        "shell: command not found",
        subprocess.CalledProcessError(127, ["sh", "-c", "ansible-playbook site.yml"]),
        "deploy",
    ),
    ("shell: not executable", subprocess.CalledProcessError(126, ["./run.sh"]), "deploy"),
    ("shell: a real failure", subprocess.CalledProcessError(2, ["ansible-playbook"]), "unknown"),
    (
        "command not found in a message",
        RuntimeError("/bin/sh: 1: ansible-playbook: command not found"),
        "deploy",
    ),
    ("missing module", ModuleNotFoundError("No module named 'psycopg'"), "deploy"),
    ("timeout alone", TimeoutError("timed out"), "unknown"),
    # asyncio.TimeoutError and socket.timeout are the same class since Python 3.11.
    ("etimedout", TimeoutError(errno.ETIMEDOUT, "Connection timed out"), "unknown"),
    ("httpx read timeout", httpx.ReadTimeout("The read operation timed out"), "unknown"),
    ("nothing known", ValueError("allocation a-1234 is not in state provisioning"), "unknown"),
    (
        "wrapped missing executable",
        _wrapped(_provisioning_failed, FileNotFoundError(2, "No such file", "ansible")),
        "deploy",
    ),
    (
        "httpx wrapping an expired certificate",
        _wrapped(lambda: httpx.ConnectError("connect failed"), _cert_expired()),
        "cert",
    ),
    (
        "implicit context",
        _implicit(_provisioning_failed, sqlite3.OperationalError("database is locked")),
        "db",
    ),
    (
        "innermost match wins over an outer one",
        _wrapped(lambda: httpx.ConnectError("[Errno 111] Connection refused"), _cert_expired()),
        "cert",
    ),
]


@pytest.mark.parametrize(("exc", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(exc: BaseException, expected: str) -> None:
    assert classify(exc) == expected


def _from_none() -> RuntimeError:
    try:
        try:
            raise FileNotFoundError(2, "No such file or directory", "/usr/bin/ansible")
        except FileNotFoundError:
            raise RuntimeError("provisioning failed") from None
    except RuntimeError as exc:
        return exc
    raise AssertionError("unreachable")


def test_raise_from_none_hides_the_context() -> None:
    exc = _from_none()
    assert isinstance(exc.__context__, FileNotFoundError)
    assert exception_chain(exc) == [exc]
    assert classify(exc) == "unknown"


class _Explicit(Exception):
    def __init__(self, message: str, owner_layer: object) -> None:
        super().__init__(message)
        self.owner_layer = owner_layer


def test_explicit_attribute_wins_over_rules() -> None:
    inner = FileNotFoundError(2, "No such file or directory", "/usr/bin/ansible-playbook")
    exc = _wrapped(lambda: _Explicit("job 8812 canceled", "provider"), inner)
    assert classify(exc) == "provider"


def test_innermost_explicit_attribute_wins() -> None:
    inner = _Explicit("release stuck", "workflow_state")
    exc = _wrapped(lambda: _Explicit("provisioning failed", "provider"), inner)
    assert classify(exc) == "workflow_state"


def test_invalid_explicit_attribute_is_ignored() -> None:
    inner = sqlite3.OperationalError("database is locked")
    assert classify(_wrapped(lambda: _Explicit("x", "database"), inner)) == "db"
    assert classify(_Explicit("x", 42)) == "unknown"


def test_cycles_and_long_chains_end() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert exception_chain(first) == [first, second]
    assert classify(first) == "unknown"

    links = [ValueError(str(index)) for index in range(MAX_CHAIN + 8)]
    for outer, inner in itertools.pairwise(links):
        outer.__cause__ = inner
    links[-1].__cause__ = FileNotFoundError(2, "No such file or directory", "x")
    chain = exception_chain(links[0])
    assert chain == links[:MAX_CHAIN]
    assert classify(links[0]) == "unknown"  # the cause past the limit is not seen


def test_custom_rules() -> None:
    job_canceled = _fake("awx.api.JobCanceled")
    rules = [
        OwnerRule("provider", type_names=("awx.api.JobCanceled",), name="aap-canceled"),
        OwnerRule("node", errnos=frozenset({errno.EBUSY}), name="device-busy"),
        *DEFAULT_RULES,
    ]
    assert classify(job_canceled("canceled"), rules) == "provider"
    assert classify(OSError(errno.EBUSY, "Device or resource busy"), rules) == "node"
    assert classify(OSError(errno.EBUSY, "Device or resource busy")) == "unknown"
    # The built-in table knows a full disk (it did not before the owner table was shared).
    assert classify(OSError(errno.ENOSPC, "No space left on device")) == "node"
    assert classify(_cert_expired(), rules) == "cert"
    assert classify(_cert_expired(), []) == "unknown"


def test_rule_criteria_must_all_match() -> None:
    rule = OwnerRule(
        "cert", type_names=("ssl.SSLError",), message_patterns=("certificate",), name="both"
    )
    assert rule.matches(ssl.SSLError(1, "certificate verify failed"))
    assert not rule.matches(ssl.SSLError(1, "wrong version number"))
    assert not rule.matches(ValueError("certificate verify failed"))
    builtin = OwnerRule("deploy", type_names=("builtins.FileNotFoundError",))
    assert builtin.matches(FileNotFoundError("x"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"owner_layer": "database", "errnos": frozenset({1})}, "is not one of"),
        ({"owner_layer": "db"}, "no criterion"),
        ({"owner_layer": "db", "message_patterns": ("(",)}, "bad pattern"),
    ],
)
def test_invalid_rules_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OwnerRule(**kwargs)  # type: ignore[arg-type]


def test_error_info() -> None:
    inner = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    exc = _wrapped(lambda: httpx.ConnectError("[Errno 111] Connection refused"), inner)
    assert error_info(exc) == {
        "type": "httpx.ConnectError",
        "message": "[Errno 111] Connection refused",
        "owner_layer": "ingress",
        "chain": [
            {"type": "httpx.ConnectError", "message": "[Errno 111] Connection refused"},
            {"type": "ConnectionRefusedError", "message": "[Errno 111] Connection refused"},
        ],
    }


def test_error_info_explicit_argument_wins() -> None:
    exc = _wrapped(_provisioning_failed, _Explicit("stuck", "workflow_state"))
    assert error_info(exc, owner_layer="db")["owner_layer"] == "db"
    assert error_info(exc)["owner_layer"] == "workflow_state"


def test_error_info_invalid_argument_is_kept_aside() -> None:
    info = error_info(ValueError("x"), owner_layer="database")
    assert info["owner_layer"] == "unknown"
    assert info["owner_layer_invalid"] == "database"


def test_error_info_cuts_long_messages() -> None:
    info = error_info(ValueError("x" * 5000))
    assert info["message"] == "x" * 2048
    assert info["chain"] == [{"type": "ValueError", "message": "x" * 2048}]


_URL = "postgres://app:hunter2"  # 22 characters; "@db.internal:5432/app failed" follows
_GITHUB = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (  # cut between the password and its "@": cut first, no URL credentials were seen
            "x" * 2026 + _URL + "@db.internal:5432/app failed",
            "x" * 2026 + "postgres://app:[REDACT",
        ),
        (
            "x" * 2000 + _URL + "@db.internal:5432/app failed",
            "x" * 2000 + "postgres://app:[REDACTED]@db.internal:5432/app f",
        ),
        ("x" * 2030 + "token " + _GITHUB, "x" * 2030 + "token [REDACTED]"),
        (  # a token cut short no longer has the shape it is recognised by
            "x" * 2025 + "auth Bearer abcdefghijklmnop0123 failed",
            "x" * 2025 + "auth Bearer [REDACTED] ",
        ),
        ("password=hunter2 " + "x" * 3000, "password=[REDACTED] " + "x" * 2028),
    ],
    ids=["URL cut at the @", "URL kept whole", "GitHub token", "Bearer token", "key=value"],
)
def test_error_info_redacts_messages_before_cutting_them(message: str, expected: str) -> None:
    exc = _wrapped(lambda: ConnectionError(message), ValueError(message))
    info = error_info(exc)
    assert info["message"] == expected
    assert info["chain"] == [
        {"type": "ConnectionError", "message": expected},
        {"type": "ValueError", "message": expected},
    ]


class _Hostile(Exception):
    """An exception whose every accessor fails: classification must survive it."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    @property
    def status_code(self) -> int:
        raise RuntimeError("no status")

    @property
    def owner_layer(self) -> str:
        raise RuntimeError("no owner")


def test_never_raises_on_hostile_exceptions() -> None:
    exc = _Hostile()
    assert classify(exc) == "unknown"
    info = error_info(exc)
    assert info["message"] == "<unprintable _Hostile object>"
    assert info["type"] == f"{__name__}._Hostile"


def test_default_rules_are_named() -> None:
    names = [rule.name for rule in DEFAULT_RULES]
    assert all(names)
    assert len(set(names)) == len(names)


def test_a_connection_refused_without_errno_is_the_ingress_as_documented() -> None:
    # Raised by hand (asyncio, libraries that wrap a refusal) it carries no errno; the
    # table's docstring says a ConnectionRefusedError is the ingress's, with or without one.
    assert ConnectionRefusedError("the API refused the claim").errno is None
    assert classify(ConnectionRefusedError("the API refused the claim")) == "ingress"
    assert classify(RuntimeError("claim failed").with_traceback(None)) == "unknown"
