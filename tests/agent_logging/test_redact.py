"""Redaction of secrets: corpora of real-looking lines, key classification, values, records."""

from __future__ import annotations

import copy
import dataclasses
import enum
import types
import uuid
from collections import namedtuple
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import ParseResultBytes, SplitResult, urlparse, urlsplit

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from requests.structures import CaseInsensitiveDict

import agent_logging
from agent_logging import _context
from agent_logging._redact import (
    REDACTED,
    _scan,
    _scan_unfiltered,
    is_sensitive_key,
    redact,
    redact_text,
    redact_value,
)
from tests.conftest import Captured

CORPUS = Path(__file__).parent / "corpus"
Capture = Callable[..., Captured]


def _cases(name: str) -> list[tuple[str, str, str]]:
    """``(title, input, expected)`` from a corpus file (format described at its top)."""
    cases: list[tuple[str, list[str]]] = []
    for line in (CORPUS / name).read_text(encoding="utf-8").split("\n"):
        if line.startswith("=== "):
            cases.append((line[4:], []))
        elif cases:
            cases[-1][1].append(line)
    result = []
    for title, lines in cases:
        while lines and not lines[-1]:
            lines.pop()
        if ">>>" in lines:
            split = lines.index(">>>")
            result.append((title, "\n".join(lines[:split]), "\n".join(lines[split + 1 :])))
        else:
            text = "\n".join(lines)
            result.append((title, text, text))
    return result


SECRETS = _cases("secrets.txt")
HARMLESS = _cases("harmless.txt")


def test_corpora_are_large_enough() -> None:
    assert len(SECRETS) >= 30
    assert len(HARMLESS) >= 30
    assert all(text != expected for _, text, expected in SECRETS)


@pytest.mark.parametrize(("title", "text", "expected"), SECRETS, ids=[c[0] for c in SECRETS])
def test_secret_corpus_is_redacted_exactly(title: str, text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected


@pytest.mark.parametrize(("title", "text", "expected"), HARMLESS, ids=[c[0] for c in HARMLESS])
def test_harmless_corpus_comes_through_as_the_same_object(
    title: str, text: str, expected: str
) -> None:
    assert redact_text(text) is text
    assert _scan_unfiltered(text) is text  # not only because the prefilter let it pass


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def", "Authorization: Bearer [REDACTED]"),
        ("password=hunter2 user=bob", "password=[REDACTED] user=bob"),
        ('{"api_key": "x"}', '{"api_key": "[REDACTED]"}'),
        ("postgresql://app:s3cret@db:5432/x", "postgresql://app:[REDACTED]@db:5432/x"),
        ("Cookie: a=1; b=2", "Cookie: [REDACTED]"),
        ("/v1/x?token=abc123&x=1", "/v1/x?token=[REDACTED]&x=1"),
        ("host=db password=x dbname=y", "host=db password=[REDACTED] dbname=y"),
        ("key AKIAIOSFODNN7EXAMPLE", "key [REDACTED]"),
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", REDACTED),
        ("github_pat_11ABCDEFG0123456789abc_defghijklmnopqrstuvwxyz", REDACTED),
        ("glpat-xYz12AbC34dEf56GhI78", REDACTED),
        ("xoxb-2187624736-1384961263654-kRfwQ6sVAXPJpNDX", REDACTED),
        ("sk_live_51HqYx2CZ7cvKq3w9Tn8L4mPb", REDACTED),
        ("rk_test_51HqYx2CZ7cvKq3w9Tn8L4mPb", REDACTED),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", REDACTED),
        ("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----", "[REDACTED PRIVATE KEY]"),
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----",
            "[REDACTED PRIVATE KEY]",
        ),
        ("X-Api-Key: k1 next", "X-Api-Key: [REDACTED] next"),
        ("login --password=hunter2 --user bob", "login --password=[REDACTED] --user bob"),
        ('password: "unterminated', 'password: "[REDACTED]'),
        ("pwd=x", "pwd=[REDACTED]"),
        ("password=", "password="),
        ("password:\n  nested: 1", "password:\n  nested: 1"),
        ("auth => 'abc'", "auth => '[REDACTED]'"),
        # A bytes literal is a quoted value: its quotes hold the whole secret.
        (str({"password": b"hunter2"}), "{'password': b'[REDACTED]'}"),
        ('{"token": b"t0k3n\\"x"}', '{"token": b"[REDACTED]"}'),
        ("{'password': bytearray(b'hunter2')}", "{'password': bytearray(b'[REDACTED]')}"),
        ("password=b'hunter2' user=bob", "password=b'[REDACTED]' user=bob"),
        # Two-item tuples and lists: ASGI's and httpx's raw headers, dict.items().
        (
            str([(b"authorization", b"Basic dXNlcjpwYXNz")]),
            "[(b'authorization', b'Basic [REDACTED]')]",
        ),
        (
            str([(b"host", b"api"), (b"cookie", b"session=abc; csrftoken=zzz")]),
            "[(b'host', b'api'), (b'cookie', b'[REDACTED]')]",
        ),
        (str(("password", "hunter2")), "('password', '[REDACTED]')"),
        (
            '[["X-Api-Key", "k1"], ["Accept", "*/*"]]',
            '[["X-Api-Key", "[REDACTED]"], ["Accept", "*/*"]]',
        ),
        (
            "(b'PROXY-AUTHORIZATION' , b'Basic cHJveHk6cA==' )",
            "(b'PROXY-AUTHORIZATION' , b'Basic [REDACTED]' )",
        ),
        # Google API keys: as a URL's key= parameter, and by their shape anywhere (more of
        # both, and Azure's connection strings, in the corpus).
        ("/v1/x?key=k3y-value&x=1", "/v1/x?key=[REDACTED]&x=1"),
        ("got AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "got [REDACTED]"),
        ("AccountKey=bXlrZXk=;EndpointSuffix=x", "AccountKey=[REDACTED];EndpointSuffix=x"),
    ],
)
def test_text_patterns_keep_the_non_secret_part(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("X-Auth-Token: Bearer abcdefghijklmnop0123", "X-Auth-Token: [REDACTED]"),
        ("token: Bearer abcdefghijklmnop0123", "token: [REDACTED]"),
        ("access_token=Bearer abcdefghijklmnop0123", "access_token=[REDACTED]"),
        ("api_key: Basic dXNlcjpwYXNzd29yZA==", "api_key: [REDACTED]"),
        ("auth: Bearer abc123, user=bob", "auth: [REDACTED], user=bob"),
        ("secret=Token\tshort next", "secret=[REDACTED] next"),
        ("ValueError: bad token: Bearer abcdefghijklmnop0123", "ValueError: bad token: [REDACTED]"),
        (
            'http header: "X-Auth-Token: Bearer abcdefghijklmnop0123"',
            'http header: "X-Auth-Token: [REDACTED]"',
        ),
        ("token: Bearer ,x", "token: [REDACTED] ,x"),
        # An authorization key keeps its scheme, as before.
        ("Authorization: Bearer abc def", "Authorization: Bearer [REDACTED]"),
        ("authorization=Basic dXNlcjpwYXNz next", "authorization=Basic [REDACTED] next"),
    ],
)
def test_the_credential_after_an_auth_scheme_is_redacted_under_any_key(
    text: str, expected: str
) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected


def test_an_exception_message_loses_the_credential_after_its_scheme(captured: Capture) -> None:
    sink = captured()
    try:
        raise ValueError("bad token: Bearer abcdefghijklmnop0123")
    except ValueError:
        agent_logging.get_logger().exception("boom")
    error = sink.last()["error"]
    assert error["message"] == "bad token: [REDACTED]"
    assert [link["message"] for link in error["chain"]] == ["bad token: [REDACTED]"]
    assert error["stack"].endswith("ValueError: bad token: [REDACTED]\n")
    assert b"abcdefghijklmnop0123" not in sink.lines[-1]


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "passwd",
        "pwd",
        "PWD",
        "secret",
        "token",
        "api_key",
        "apikey",
        "apiKey",
        "API-KEY",
        "X-Api-Key",
        "XApiKey",
        "access_key",
        "private_key",
        "privateKey",
        "client_secret",
        "clientSecret",
        "authorization",
        "Proxy-Authorization",
        "cookie",
        "Set-Cookie",
        "cookies",
        "session",
        "sessionid",
        "session_id",
        "sessionId",
        "JSESSIONID",
        "PHPSESSID",
        "credentials",
        "credential",
        "creds",
        "db_password",
        "PGPASSWORD",
        "MYSQL_PWD",
        "access_token",
        "refresh_token",
        "X-Auth-Token",
        "X-Amz-Security-Token",
        "csrftoken",
        "webhook_secret",
        "AWS_SECRET_ACCESS_KEY",
        "aws_session_token",
        "ansible_become_pass",
        "ansible_ssh_pass",
        "passphrase",
        "pass_phrase",
        "tls.key",
        "signing_key",
        "X-Amz-Signature",
        "sig",
        "auth",
        "basic_auth",
        "client-key-data",
        "--password",
        "password_",
        # A password word anywhere, or a secret followed by words naming a copy of it.
        "password_confirmation",
        "PASSWORD_CONFIRMATION",
        "password-confirmation",
        "passwordConfirm",
        "passwordRepeat",
        "password2",
        "password_2",
        "new_password",
        "current_password",
        "password_new",
        "password_hash",
        "passwords",
        "PASSWORD_DB",
        "password_for_admin",
        "pwd2",
        "pwd_confirm",
        "pass2",
        "api_key_new",
        "secret_value",
        "token_b64",
        "session_2",
        # Common names of secrets that were missed once.
        "AccountKey",
        "account_key",
        "SharedAccessKey",
        "client_key",
        "clientKey",
        "ssh_key",
        "SSH_KEY",
        "private_key_pem",
        "tls_key_pem",
        "jwt",
        "JWT",
        "id_token",
        "x-api-key",
        "proxy-authorization",
        "set-cookie",
    ],
)
def test_sensitive_keys(key: str) -> None:
    assert is_sensitive_key(key)
    # The text forms redact them too: the key/value prefilter must know every one.
    assert redact_text(f"{key}=v4lue") == f"{key}=[REDACTED]"
    assert redact_text(f'{{"{key}": "v4lue"}}') == f'{{"{key}": "[REDACTED]"}}'


@pytest.mark.parametrize(
    "key",
    [
        "task",
        "token_count",
        "max_tokens",
        "tokens",
        "tokenizer",
        "token_type",
        "key",
        "key_id",
        "cache_key",
        "idempotency_key",
        "private_key_id",
        "aws_access_key_id",
        "passed",
        "bypass",
        "compass",
        "oldpwd",
        "secretary",
        "secret_name",
        "secrets",
        "password_policy",
        "session_timeout",
        "user_session",
        "author",
        "oauth",
        "authorization_code",
        "signal",
        "design",
        "sec_ret",
        "passph_rase",
        "monkey",
        "credential_id",
        "tls.crt",
        "certificate-authority-data",
        "",
        # About a password or a secret, not one.
        "password_min_length",
        "passwordExpiresAt",
        "password_reset_required",
        "password_confirmation_required",
        "password_strength",
        "token_usage",
        "secret_version",
        "key_value",
        "passwordless",
        "oauth2",
        "sha256",
        "2",
        "public_key_pem",
        "cert_pem",
        "account_id",
        "client_id",
        "ssh_key_path",
        "jwt_expiry",
        "key_pem",
    ],
)
def test_keys_that_are_not_sensitive(key: str) -> None:
    assert not is_sensitive_key(key)
    if key:
        text = f"{key}=v4lue"
        assert redact_text(text) is text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            {"form": {"password_confirmation": "hunter2"}},
            {"form": {"password_confirmation": REDACTED}},
        ),
        ({"password2": "hunter2", "user": "bob"}, {"password2": REDACTED, "user": "bob"}),
        ({"passwordConfirm": "hunter2"}, {"passwordConfirm": REDACTED}),
        ({"password_policy": "min 12"}, {"password_policy": "min 12"}),
    ],
)
def test_redact_value_redacts_password_fields_by_any_name(value: object, expected: object) -> None:
    assert redact_value(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (  # ASGI scope["headers"]
            [(b"host", b"api"), (b"authorization", b"Basic dXNlcjpwYXNz"), (b"cookie", b"a=1")],
            [(b"host", b"api"), (b"authorization", REDACTED), (b"cookie", REDACTED)],
        ),
        (
            httpx.Headers({"Authorization": "Basic dXNlcjpwYXNz", "Accept": "*/*"}).raw,
            [(b"Authorization", REDACTED), (b"Accept", b"*/*")],
        ),
        (("password", "hunter2"), ("password", REDACTED)),
        (["X-API-KEY", "k1"], ["X-API-KEY", REDACTED]),
        ((bytearray(b"Set-Cookie"), b"sid=1"), (bytearray(b"Set-Cookie"), REDACTED)),
        (list({"token": "t0k3n", "user": "bob"}.items()), [("token", REDACTED), ("user", "bob")]),
        (("password", REDACTED), ("password", REDACTED)),
    ],
    ids=["ASGI headers", "httpx Headers.raw", "tuple", "list", "bytearray name", "items()", "done"],
)
def test_redact_value_redacts_the_value_of_a_pair_named_for_a_secret(
    value: object, expected: object
) -> None:
    redacted = redact_value(value)
    assert redacted == expected
    assert type(redacted) is type(expected)
    assert redact_value(redacted) == redacted


@pytest.mark.parametrize(
    "value",
    [
        ("host", "api"),
        [b"accept", b"*/*"],
        ("password", "x", "y"),  # not a pair
        ("token",),
        (1, "password"),
        ("token_count", 512),
    ],
)
def test_redact_value_keeps_pairs_and_sequences_not_named_for_a_secret(value: object) -> None:
    assert redact_value(value) is value


def test_redact_value_walks_nested_structures() -> None:
    value = {
        "user": "bob",
        "password": 1234,
        "nested": {"api_key": {"id": 1}, "note": "token=abc def"},
        "items": ["plain", ("Authorization: Bearer abcdef", 7)],
        "count": 3,
        "none": None,
    }
    assert redact_value(value) == {
        "user": "bob",
        "password": REDACTED,
        "nested": {"api_key": REDACTED, "note": "token=[REDACTED] def"},
        "items": ["plain", ("Authorization: Bearer [REDACTED]", 7)],
        "count": 3,
        "none": None,
    }


def test_redact_value_never_mutates_its_input() -> None:
    value = {"a": ["password=x", {"token": "t"}], "b": ("secret: y",)}
    before = copy.deepcopy(value)
    inner_list = value["a"]
    redact_value(value)
    assert value == before
    assert value["a"] is inner_list


def test_redact_value_returns_the_same_object_when_nothing_changes() -> None:
    value = {"a": ["plain text", {"b": 1.5, "c": (True, None)}], "password": REDACTED}
    assert redact_value(value) is value
    text = "nothing to see here"
    assert redact_value(text) is text
    marker = uuid.UUID(int=1)
    assert redact_value(marker) is marker


def test_redact_value_copies_only_what_changes() -> None:
    untouched = {"x": 1}
    value = {"keep": untouched, "secret": "s"}
    redacted = redact_value(value)
    assert redacted == {"keep": {"x": 1}, "secret": REDACTED}
    assert isinstance(redacted, dict)
    assert redacted["keep"] is untouched


def test_redact_value_keeps_namedtuples_and_bytes() -> None:
    pair = namedtuple("pair", "name value")
    redacted = redact_value(pair("dsn", "postgresql://app:pw@db/x"))
    assert redacted == pair("dsn", "postgresql://app:[REDACTED]@db/x")
    assert type(redacted) is pair
    assert redact_value(b"password=x \xff") == b"password=[REDACTED] \xff"
    raw = b"\xff\xfe plain"
    assert redact_value(raw) is raw


@dataclasses.dataclass
class _Database:
    host: str
    password: str


class _Mode(enum.Enum):
    DSN = "dsn=postgresql://app:hunter2@db/x"


class _Dsn:
    def __str__(self) -> str:
        return "dsn postgresql://app:hunter2@db/x"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")


_Credentials = namedtuple("_Credentials", "user password")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            CaseInsensitiveDict({"Authorization": "Basic Ym9iOmh1bnRlcjI=", "Accept": "*/*"}),
            {"Authorization": REDACTED, "Accept": "*/*"},
        ),
        (types.MappingProxyType({"password": "hunter2", "n": 1}), {"password": REDACTED, "n": 1}),
        (types.MappingProxyType({"user": "bob"}), {"user": "bob"}),  # always a plain dict
        (
            RuntimeError("failed for postgresql://app:hunter2@db/x password=hunter2"),
            "RuntimeError: failed for postgresql://app:[REDACTED]@db/x password=[REDACTED]",
        ),
        (KeyError("password"), "KeyError: 'password'"),
        ({"password=hunter2", "plain"}, ["password=[REDACTED]", "plain"]),
        (frozenset({"token: t0k3n"}), ["token: [REDACTED]"]),
        (
            urlsplit("postgresql://app:hunter2@db:5432/x?token=abc"),
            SplitResult("postgresql", "app:[REDACTED]@db:5432", "/x", "token=[REDACTED]", ""),
        ),
        (urlsplit("//app:hunter2@db"), SplitResult("", "app:[REDACTED]@db", "", "", "")),
        (
            urlparse(b"https://u:p%40ss@h/"),
            ParseResultBytes(b"https", b"u:[REDACTED]@h", b"/", b"", b"", b""),
        ),
        (_Database("db", "hunter2"), {"host": "db", "password": REDACTED}),
        (_Credentials("bob", "hunter2"), _Credentials("bob", REDACTED)),
        (_Mode.DSN, "dsn=postgresql://app:[REDACTED]@db/x"),
        (_Dsn(), "dsn postgresql://app:[REDACTED]@db/x"),
        (_Unprintable(), "<unprintable _Unprintable object>"),
        (bytearray(b"token=abc"), b"token=[REDACTED]"),
        (memoryview(b"token=abc"), b"token=[REDACTED]"),
        ({"postgresql://app:hunter2@db/x": "up"}, {"postgresql://app:[REDACTED]@db/x": "up"}),
        ({("password",): "hunter2", 1: "ok"}, {"('password',)": REDACTED, 1: "ok"}),
        (
            [{"headers": types.MappingProxyType({"Cookie": "a=1"})}],
            [{"headers": {"Cookie": REDACTED}}],
        ),
    ],
    ids=[
        "CaseInsensitiveDict",
        "MappingProxyType",
        "clean MappingProxyType",
        "exception",
        "KeyError",
        "set",
        "frozenset",
        "urlsplit",
        "urlsplit without scheme",
        "urlparse of bytes",
        "dataclass",
        "namedtuple",
        "enum",
        "object with __str__",
        "broken __str__",
        "bytearray",
        "memoryview",
        "URL as a key",
        "tuple as a key",
        "mapping in a list",
    ],
)
def test_redact_value_redacts_objects_of_any_type(value: object, expected: object) -> None:
    redacted = redact_value(value)
    assert redacted == expected
    assert type(redacted) is type(expected)


@pytest.mark.parametrize(
    "value",
    [
        uuid.UUID(int=7),
        datetime(2026, 11, 22, 13, 11, 19, tzinfo=UTC),
        enum.IntEnum("Level", "LOW HIGH").HIGH,
        3 + 4j,
        frozenset({1, 2}),
        urlsplit("https://bob@host/x"),
        bytearray(b"plain"),
    ],
)
def test_redact_value_keeps_objects_that_hold_no_secret(value: object) -> None:
    assert redact_value(value) is value


def test_objects_in_fields_are_redacted_before_any_sink_renders_them(captured: Capture) -> None:
    sink = captured()
    headers = CaseInsensitiveDict({"Authorization": "Basic Ym9iOmh1bnRlcjI="})
    agent_logging.get_logger().warning(
        "x",
        request_headers=headers,
        err=RuntimeError("postgresql://app:hunter2@db/x password=hunter2"),
        db=_Database("db", "hunter2"),
        tags={"token=hunter2"},
    )
    record = sink.last()
    assert record["request_headers"] == {"Authorization": REDACTED}
    assert record["err"] == "RuntimeError: postgresql://app:[REDACTED]@db/x password=[REDACTED]"
    assert record["db"] == {"host": "db", "password": REDACTED}
    assert record["tags"] == ["token=[REDACTED]"]
    assert b"hunter2" not in sink.lines[-1]
    assert b"Ym9iOmh1bnRlcjI" not in sink.lines[-1]


def test_the_console_sink_shows_objects_redacted(tmp_path: Path) -> None:
    # The console sink renders the record's objects itself, not the JSON line.
    path = tmp_path / "console.log"
    with path.open("w", encoding="utf-8") as stream:
        agent_logging.configure(
            service="s", layer="api", env="test", output=stream, format="console"
        )
        agent_logging.get_logger().info(
            "x", headers=types.MappingProxyType({"password": "hunter2"})
        )
        agent_logging.shutdown()
    shown = path.read_text(encoding="utf-8")
    assert "headers={'password': '[REDACTED]'}" in shown
    assert "hunter2" not in shown


def test_redact_value_replaces_containers_too_deep_and_ends_cycles() -> None:
    deep: list[object] = ["password=x"]
    for _ in range(40):
        deep = [deep]
    redacted = redact_value(deep)
    for _ in range(32):
        assert isinstance(redacted, list)
        redacted = redacted[0]
    assert redacted == REDACTED
    cycle: list[object] = []
    cycle.append(cycle)
    assert isinstance(redact_value(cycle), list)


def test_processor_redacts_a_full_record_in_place() -> None:
    error = {
        "type": "psycopg.OperationalError",
        "message": "connection failed: postgresql://app:s3cret@db:5432/x",
        "owner_layer": "db",
        "chain": [
            {"type": "RuntimeError", "message": "provisioning failed"},
            {"type": "psycopg.OperationalError", "message": "dsn: password=s3cret host=db"},
        ],
        "stack": 'File "w.py", line 3\n    connect("password=s3cret")\n',
    }
    record = {
        "ts": "2026-11-22T13:11:19.123456789Z",
        "level": "error",
        "event": "login with Authorization: Bearer abc.def failed",
        "service": "api",
        "layer": "api",
        "env": "prod",
        "correlation_id": "c0ffee12",
        "allocation_id": "a-1234",
        "api_key": {"id": 1},
        "headers": {"Cookie": "a=1", "Accept": "*/*"},
        "exception": "Traceback ...\nValueError: token=t0k3n\n",
        "status": 401,
        "error": error,
    }
    original_error = copy.deepcopy(error)
    result = redact(None, "error", record)
    assert result is record
    assert record == {
        "ts": "2026-11-22T13:11:19.123456789Z",
        "level": "error",
        "event": "login with Authorization: Bearer [REDACTED]",
        "service": "api",
        "layer": "api",
        "env": "prod",
        "correlation_id": "c0ffee12",
        "allocation_id": "a-1234",
        "api_key": REDACTED,
        "headers": {"Cookie": REDACTED, "Accept": "*/*"},
        "exception": "Traceback ...\nValueError: token=[REDACTED]\n",
        "status": 401,
        "error": {
            "type": "psycopg.OperationalError",
            "message": "connection failed: postgresql://app:[REDACTED]@db:5432/x",
            "owner_layer": "db",
            "chain": [
                {"type": "RuntimeError", "message": "provisioning failed"},
                {"type": "psycopg.OperationalError", "message": "dsn: password=[REDACTED] host=db"},
            ],
            "stack": 'File "w.py", line 3\n    connect("password=[REDACTED]")\n',
        },
    }
    assert error == original_error  # a caller's dict is copied, not edited


def test_processor_leaves_library_fields_and_identifiers_alone() -> None:
    # Their values were set by the library or validated when bound; scanning them would cost
    # every call. A value that would be redacted anywhere else shows that they are skipped.
    record = {"ts": "token=x", "level": "token=x", "service": "token=x", "node_id": "token=x"}
    expected = dict(record)
    assert redact(None, "info", record) == expected


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
_TRACE_REASON = "must be 32 lower-case hex digits, not all zero (W3C trace-context)"
_SPAN_REASON = "must be 16 lower-case hex digits, not all zero (W3C trace-context)"


@pytest.mark.parametrize(
    ("key", "value", "shown", "reason"),
    [
        ("trace_id", "password=hunter2", "'password=[REDACTED]'", _TRACE_REASON),
        ("trace_id", "ab" * 40_000, "'" + "ab" * 149 + "a", _TRACE_REASON),
        ("trace_id", TRACE_ID.upper(), f"'{TRACE_ID.upper()}'", _TRACE_REASON),
        ("trace_id", "0" * 32, f"'{'0' * 32}'", _TRACE_REASON),
        ("trace_id", TRACE_ID[:-1], f"'{TRACE_ID[:-1]}'", _TRACE_REASON),
        ("trace_id", {"password": "p"}, "{'password': '[REDACTED]'}", "must be a string, got dict"),
        ("span_id", "token=t0k3n", "'token=[REDACTED]'", _SPAN_REASON),
        ("span_id", SPAN_ID.upper(), f"'{SPAN_ID.upper()}'", _SPAN_REASON),
        ("span_id", "0" * 16, f"'{'0' * 16}'", _SPAN_REASON),
        ("span_id", TRACE_ID, f"'{TRACE_ID}'", _SPAN_REASON),
        ("span_id", 7, "7", "must be a string, got int"),
    ],
    ids=[
        "hostile",
        "too long",
        "upper-case",
        "all zeros",
        "too short",
        "not text",
        "hostile span",
        "upper-case span",
        "all-zero span",
        "a trace id as span",
        "int span",
    ],
)
def test_processor_moves_a_trace_id_that_is_not_w3c_to_rejected_ids(
    key: str, value: object, shown: str, reason: str
) -> None:
    record = {"ts": "t", "event": "hello", key: value, "user": "password=x"}
    redact(None, "info", record)
    assert record == {
        "ts": "t",
        "event": "hello",
        "user": "password=[REDACTED]",
        "rejected_ids": {key: {"value": shown, "reason": reason}},
    }


def test_processor_keeps_w3c_trace_ids() -> None:
    record = {"event": "hello", "trace_id": TRACE_ID, "span_id": SPAN_ID}
    assert redact(None, "info", record) == {
        "event": "hello",
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
    }


def test_processor_remembers_which_key_a_trace_id_was_valid_for() -> None:
    # Values seen valid are remembered: a trace id is no span id, nor the other way round.
    assert redact(None, "info", {"trace_id": TRACE_ID, "span_id": SPAN_ID})["span_id"] == SPAN_ID
    record = redact(None, "info", {"trace_id": SPAN_ID, "span_id": TRACE_ID})
    assert record == {
        "rejected_ids": {
            "trace_id": {"value": f"'{SPAN_ID}'", "reason": _TRACE_REASON},
            "span_id": {"value": f"'{TRACE_ID}'", "reason": _SPAN_REASON},
        }
    }


def test_processor_puts_the_bound_trace_id_in_place_of_a_rejected_one() -> None:
    token = _context.set_ids({"trace_id": TRACE_ID, "span_id": SPAN_ID})
    try:
        record = {
            "event": "hello",
            "trace_id": "password=hunter2",
            "span_id": SPAN_ID,
            "rejected_ids": "password=hunter2",  # a caller's field of that name, redacted
        }
        redact(None, "info", record)
    finally:
        _context.reset(token)
    assert record == {
        "event": "hello",
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "rejected_ids": {"trace_id": {"value": "'password=[REDACTED]'", "reason": _TRACE_REASON}},
        "rejected_ids_field": "password=[REDACTED]",
    }


def test_processor_tolerates_odd_records() -> None:
    record: dict[object, object] = {1: "password=x", "event": None, "blob": b"token=abc"}
    redact(None, "info", record)  # type: ignore[arg-type]
    assert record == {1: "password=[REDACTED]", "event": None, "blob": b"token=[REDACTED]"}


# --- properties -----------------------------------------------------------------------------

# What secrets are made of, so that generated text often comes close to one.
FRAGMENTS = st.sampled_from(
    [
        "password", "Password", "pwd", "pass", "token", "secret", "api_key", "X-Api-Key",
        "Authorization", "Cookie", "session", "sessionId", "auth", "key", "client-key-data",
        "=", ":", ": ", " = ", "=>", "::", "==", "&", ",", ";", "\"", "'", "\\\"", "{", "}", "[",
        "]", "|", "|-", "\n", "\r\n", "\\n", " ", "  ", "\t", "-", "_", ".", "/", "?", "#",
        "@", "://", "https", "postgresql+psycopg", "user", "Bearer ", "bearer ", "Basic ",
        "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "PRIVATE KEY",
        "-----BEGIN CERTIFICATE-----", "Proc-Type: 4,ENCRYPTED", "MIIEowIBAAKCAQEAu1SU1LfV",
        "eyJhbGciOiJIUzI1NiJ9", "eyJ", "AKIA", "ASIA", "IOSFODNN7EXAMPLE", "ghp_", "github_pat_",
        "glpat-", "xoxb-", "sk_live_", "rk_test_", "0123456789abcdefghijKLMNOPQRST",
        "[REDACTED]", "[REDACTED PRIVATE KEY]", "\u212a", "\u0130", "(", ")", ", ", "b'",
        "bytearray(b'", "('password', '", "(b'authorization', b'", "', '", "?key=", "&key=",
        "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "AccountKey=", "jwt",
    ]
)  # fmt: skip
SECRETISH = st.lists(FRAGMENTS | st.text(max_size=4), max_size=24).map("".join)
# Everything redaction looks for needs one of these (see _scan); anything else passes.
TRIGGERS = (
    ":",
    "=",
    ",",
    "PRIVATE KEY",
    "earer",
    "eyJ",
    "IA",
    "gh",
    "_pat_",
    "gl",
    "xox",
    "k_live_",
    "k_test_",
    "AIza",
)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_redact_text_never_raises_and_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@settings(max_examples=300, deadline=None)
@given(SECRETISH)
def test_redact_text_is_idempotent_near_secrets(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@settings(max_examples=300, deadline=None)
@given(SECRETISH)
def test_prefilter_never_hides_a_secret(text: str) -> None:
    assert _scan(text) == _scan_unfiltered(text)


@settings(max_examples=300, deadline=None)
@given(st.text() | SECRETISH)
def test_text_without_a_trigger_is_returned_as_is(text: str) -> None:
    if not any(trigger in text for trigger in TRIGGERS):
        assert redact_text(text) is text
    if ":" not in text and "=" not in text and "," not in text:
        # Only key/value pairs, two-item sequences and URL passwords can be shorter than
        # "[REDACTED]".
        assert len(redact_text(text)) <= len(text)
