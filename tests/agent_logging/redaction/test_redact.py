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
from typing import Any
from urllib.parse import ParseResultBytes, SplitResult, urlparse, urlsplit

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from requests.structures import CaseInsensitiveDict

import agent_logging
from agent_logging.context import _context
from agent_logging.pipeline._processors import check_late_trace_ids
from agent_logging.redaction import _secrets
from agent_logging.redaction._redact import (
    REDACTED,
    _scan,
    _scan_unfiltered,
    is_sensitive_key,
    redact,
    redact_text,
    redact_value,
)
from tests.conftest import Captured
from tests.lokisim import LokiServer

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
    # Each case is a leak found once (or its sibling) or a look-alike that was kept: the
    # corpora only grow.
    assert len(SECRETS) >= 95
    assert len(HARMLESS) >= 62
    assert all(text != expected for _, text, expected in SECRETS)
    assert len({title for title, _, _ in SECRETS + HARMLESS}) == len(SECRETS) + len(HARMLESS)


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
        ('{"password": bytearray(b"hunter2")}', '{"password": bytearray(b"[REDACTED]")}'),
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


# The leaks of issue 21, each as the issue gave it; the corpus holds them in context.
ISSUE_21_LEAKS = [
    ("password%3Dhunter2", "password%3D[REDACTED]"),
    (
        "Authorization%3A%20Bearer%20eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "Authorization%3A%20Bearer%20[REDACTED]",
    ),
    (
        "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "[REDACTED] [REDACTED]",
    ),
    ("npm_4fG7hJ2kL9mN3pQ8rS1tV6wX0yZ5aB7cD9eF", REDACTED),
    ("ALTER ROLE app PASSWORD 'hunter2'", "ALTER ROLE app PASSWORD '[REDACTED]'"),
    ("mysql -phunter2", "mysql -p[REDACTED]"),
    ("curl -u admin:hunter2 https://x", "curl -u admin:[REDACTED] https://x"),
]
LEAKED = ["hunter2", "eyJzdWIiOiIxIn0", "wJalrXUtnFEMI", "npm_4fG7", "AKIAIOSFODNN7EXAMPLE"]


@pytest.mark.parametrize(("text", "expected"), ISSUE_21_LEAKS)
def test_the_leaks_of_issue_21_are_redacted(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Either case of hex digit, and a '+' for a space, after an encoded separator.
        ("x=password%3dhunter2&y=1", "x=password%3d[REDACTED]&y=1"),
        ("h=authorization%3a+Basic+dXNlcjpwYXNz", "h=authorization%3a+Basic+[REDACTED]"),
        # Encoded twice (a redirect inside a redirect) and three times; four is too many.
        ("next=%2Fa%3Ftoken%253Dt0k3n%2526x%253D1", "next=%2Fa%3Ftoken%253D[REDACTED]%2526x%253D1"),
        ("n=token%25253Dt0k3n", "n=token%25253D[REDACTED]"),
        ("n=token%2525253Dt0k3n", "n=token%2525253Dt0k3n"),
        # The encoded value ends where it ends unencoded: at '&', a blank or a JSON quote.
        (
            '{"q": "h=Cookie%3A%20sid%3Dabc%3B%20x%3D1&page=2 more"}',
            '{"q": "h=Cookie%3A%20[REDACTED]&page=2 more"}',
        ),
        (
            '{"q": "h=Authorization%3A%20Bearer%20abc", "n": 1}',
            '{"q": "h=Authorization%3A%20Bearer%20[REDACTED]", "n": 1}',
        ),
        # Secrets found by shape once decoded, and an encoded quote.
        ("t%3Dghp_16C7e42F292c6912E7710c838347Ae178B4a", "t%3D[REDACTED]"),
        ("v=Bearer%200b8a2f6e4c1d9e7a5b3c", "v=Bearer%20[REDACTED]"),
        (
            "q=%7B%22password%22%3A%20%22hunter%202%22%7D",
            "q=%7B%22password%22%3A%20%22[REDACTED]%22%7D",
        ),
        # A whole URL encoded as a parameter.
        (
            "u=postgres%3A%2F%2Fapp%3As3cret%40db%2Fx",
            "u=postgres%3A%2F%2Fapp%3A[REDACTED]%40db%2Fx",
        ),
        # A literal blank ends the encoded value, though the header runs on decoded.
        ("h=Authorization%3A%20Bearer%20abc next", "h=Authorization%3A%20Bearer%20[REDACTED] next"),
        # Two passes in turn: the text is decoded again after the first changed it.
        (
            "q=password%3Dx%26t%3Dghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "q=password%3D[REDACTED]%26t%3D[REDACTED]",
        ),
        # Redacted already: unchanged.
        ("password%3D[REDACTED]", "password%3D[REDACTED]"),
    ],
)
def test_percent_encoded_secrets_are_redacted_where_they_stand(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected


def test_percent_decoding_maps_each_character_back_to_what_it_was_decoded_from() -> None:
    decoded = _secrets._percent_decoded("a%3Db%25%33Dc")  # "%25%33D" -> "%3D" -> "="
    assert decoded is not None
    plain, origin = decoded
    assert plain == "a=b=c"
    assert [origin(index) for index in range(len(plain) + 1)] == [0, 1, 4, 5, 12, 13]
    assert _secrets._percent_decoded("100% done") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="%253DdAa0fF=x\u00e9", max_size=24))
def test_the_fast_decoding_decodes_as_the_mapped_one(text: str) -> None:
    # The common case (nothing encoded is a secret) decodes without the mapping; what it
    # decodes must be what the mapped decoding gives, or a secret could hide between them.
    decoded = _secrets._percent_decoded(text)
    assert _secrets._unescaped(text) == (text if decoded is None else decoded[0])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Each program's own option; a password may be quoted; the next word is taken
        # whatever it is, as getopt takes it.
        ("mariadb-dump -uroot -pS3cret db", "mariadb-dump -uroot -p[REDACTED] db"),
        ("mysqlimport -pS3cret db t.csv", "mysqlimport -p[REDACTED] db t.csv"),
        ("mysqlcheck -pS3cret db", "mysqlcheck -p[REDACTED] db"),
        ("mysqlshow -pS3cret", "mysqlshow -p[REDACTED]"),
        ("mysqlslap -pS3cret", "mysqlslap -p[REDACTED]"),
        ("mysqlpump -pS3cret", "mysqlpump -p[REDACTED]"),
        ("mysqlbinlog -pS3cret binlog.000001", "mysqlbinlog -p[REDACTED] binlog.000001"),
        ('mysqladmin -p"S3 cret" status', 'mysqladmin -p"[REDACTED]" status'),
        ("/usr/bin/mysql -pS3cret", "/usr/bin/mysql -p[REDACTED]"),
        ("sshpass -pS3cret ssh n-17", "sshpass -p[REDACTED] ssh n-17"),
        ("sshpass -p -e ssh n-17", "sshpass -p [REDACTED] ssh n-17"),
        (
            "ipmitool -H bmc -U admin -PS3cret power on",
            "ipmitool -H bmc -U admin -P[REDACTED] power on",
        ),
        ("redis-cli -a 'S3 cret' info", "redis-cli -a '[REDACTED]' info"),
        ("podman login -p S3cret r.internal", "podman login -p [REDACTED] r.internal"),
        ("buildah login -p S3cret r.internal", "buildah login -p [REDACTED] r.internal"),
        ("skopeo login -p S3cret r.internal", "skopeo login -p [REDACTED] r.internal"),
        ("nerdctl login -p S3cret r.internal", "nerdctl login -p [REDACTED] r.internal"),
        ("curl -U proxy:S3cret http://x", "curl -U proxy:[REDACTED] http://x"),
        ("curl -uci:S3cret http://x", "curl -uci:[REDACTED] http://x"),
        # Each program's options run to the next program; a path is no program.
        ("sshpass -p S3 mysql -pS4 db", "sshpass -p [REDACTED] mysql -p[REDACTED] db"),
        ("curl -d @/tmp/mysql -u ci:S3 http://x", "curl -d @/tmp/mysql -u ci:[REDACTED] http://x"),
        ("curl http://x; mysql -p -e 1", "curl http://x; mysql -p -e 1"),
        ("curl http://x; mysql -u app:ro -e 1", "curl http://x; mysql -u app:ro -e 1"),
        # Long options named like a sensitive key, on any command, quoted or not.
        (
            "deploy --api-key 'k 1' --db-password=x2",
            "deploy --api-key '[REDACTED]' --db-password=[REDACTED]",
        ),
        ("tool -storepass changeit", "tool -storepass [REDACTED]"),
        # Only where the option belongs to the program: these keep every word.
        (
            "gcc -I/usr/include/mysql -lmysqlclient -pthread",
            "gcc -I/usr/include/mysql -lmysqlclient -pthread",
        ),
        ("mysql_config -pthread", "mysql_config -pthread"),
        ("docker run -p 8080:80 nginx", "docker run -p 8080:80 nginx"),
        (
            "ansible-playbook --ask-become-pass site.yml",
            "ansible-playbook --ask-become-pass site.yml",
        ),
        ("psql --no-password provision", "psql --no-password provision"),
        ("tool --password -v", "tool --password -v"),
    ],
)
def test_passwords_on_command_lines(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Alter Role app Password 'S3cret'", "Alter Role app Password '[REDACTED]'"),
        ('ALTER USER app PASSWORD "S3cret"', 'ALTER USER app PASSWORD "[REDACTED]"'),
        ("alter role app password $$S3cret$$", "alter role app password $$[REDACTED]$$"),
        ("alter role app password E'S3\\'cret'", "alter role app password E'[REDACTED]'"),
        ("alter role app password 'S3''cret'", "alter role app password '[REDACTED]'"),
        ("alter role app password 'unclosed", "alter role app password '[REDACTED]"),
        ("Create User app Identified By S3cret", "Create User app Identified By [REDACTED]"),
        ("GRANT r TO u IDENTIFIED BY 'S3cret'", "GRANT r TO u IDENTIFIED BY '[REDACTED]'"),
        # Not a password: prose, a NULL password, another quoted value.
        ("password 'policy' is strict", "password '[REDACTED]' is strict"),
        ("ALTER ROLE app PASSWORD NULL", "ALTER ROLE app PASSWORD NULL"),
        ("the node identified by n-17", "the node identified by n-17"),
    ],
)
def test_passwords_in_sql(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected


@pytest.mark.parametrize(
    "token",
    [
        "glptt-0123456789abcdef0123456789abcdef01234567",
        "glcbt-64_xYz12AbC34dEf56GhI78",
        "glsoat-xYz12AbC34dEf56GhI78",
        "glimt-xYz12AbC34dEf56GhI78jK9lM",
        "glagent-xYz12AbC34dEf56GhI78jK9lMxYz12AbC34dEf56GhI78jK9l",
        "gloas-xYz12AbC34dEf56GhI78jK9lMxYz12AbC34dEf56GhI78jK9lMxYz12AbC34dEf",
        "glffct-xYz12AbC34dEf56GhI78",
        "sk-svcacct-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "sk-admin-aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "sk-aBcDeFgHiJkLmNoPqRsTT3BlbkFJaBcDeFgHiJkLmNoPqRsT",
        "sk_test_51HqYx2CZ7cvKq3w9Tn8L4mPb",
        "xoxa-2-aBcDeFgHiJkL",
        "xoxp-2187624736-1384961263654-kRfwQ6sVAXPJpNDX",
        "xoxo-2187624736-kRfwQ6sVAXPJpNDX",
        "xoxs-2187624736-kRfwQ6sVAXPJpNDX",
        "xoxr-2187624736-kRfwQ6sVAXPJpNDX",
        "xoxe-1-aBcDeFgHiJkLmNoPqRsTuVwXyZ",
        "hvr.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123",
        "ewoJImF1dGhzIjogewoJCSJyZWdpc3RyeS5pbnRlcm5hbCI6IHsiYXV0aCI6ICJZMms2WkdWd2JHOTUifQoJfQp9",
    ],
)
def test_tokens_are_recognised_by_their_prefix(token: str) -> None:
    assert redact_text(f"got {token} here") == "got [REDACTED] here"


# Each text below opens only one of scan's prefilters: with that test gone, it would pass.
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x\t--password hunter2", "x\t--password [REDACTED]"),
        ("x\n--token t0k3n", "x\n--token [REDACTED]"),
        ("--password hunter2", "--password [REDACTED]"),
        ("alter role x password $$p$$", "alter role x password $$[REDACTED]$$"),
        ("CREATE USER X IDENTIFIED BY Y2", "CREATE USER X IDENTIFIED BY [REDACTED]"),
        ("ALTER ROLE X PASSWORD 'Y2'", "ALTER ROLE X PASSWORD '[REDACTED]'"),
        ("AGE-SECRET-KEY-1" + "QQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2, REDACTED),
        ("id ACCAIOSFODNN7EXAMPLE", "id [REDACTED]"),
        ("id A3TXIOSFODNN7EXAMPLE", "id [REDACTED]"),
        ("glsa_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345_0a1b2c3d", REDACTED),
        ("github_pat_11ABCDEFG0123456789abc_defXYijklmnopqrstuvwxyz", REDACTED),
        ("dop_v1_" + "9f8e7d6c5b4a3928" * 4, REDACTED),
        ("GOCSPX-aBcDeFgHiJkLmNoPqRsTuVwXyZ01", REDACTED),
        ("SG.aBcDeFgHiJkLmNoPqRsTuV.aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFg", REDACTED),
        ("SK0123456789abcdef0123456789abcdef", REDACTED),
        (
            "ewoJImF1dGhzIjogewoJCSJyZWdpc3RyeS5pbnRlcm5hbCI6IHsiYXV0aCI6ICJZMms2WkdWd2JHOTUifQoJfQp9",
            REDACTED,
        ),
        ("sha256~aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789_-abcde", REDACTED),
        ("GR1348941xYz12AbC34dEf56GhI78", REDACTED),
        ("Bearer+0b8a2f6e4c1d9e7a5b3c", "Bearer+[REDACTED]"),
    ],
)
def test_each_prefilter_lets_its_secret_through(text: str, expected: str) -> None:
    assert _scan(text) == expected


@pytest.mark.parametrize(
    "scheme",
    [
        "Basic", "Bearer", "Digest", "DPoP", "GNAP", "HOBA", "Mutual", "Negotiate", "NTLM",
        "OAuth", "PrivateToken", "SCRAM-SHA-1", "SCRAM-SHA-256", "vapid", "AWS4-HMAC-SHA256",
        "token", "Bot", "ApiKey", "sso-key",
    ],
)  # fmt: skip
def test_authorization_keeps_every_known_scheme(scheme: str) -> None:
    assert redact_text(f"Authorization: {scheme} c2VjcmV0") == f"Authorization: {scheme} [REDACTED]"
    assert redact_text(f"x_token={scheme} c2VjcmV0 next") == "x_token=[REDACTED] next"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Headers whose value runs to the end of the line.
        (
            'Proxy-Authorization: Digest username="a", response="b"',
            "Proxy-Authorization: Digest [REDACTED]",
        ),
        ("Cookies: a=1; b=2", "Cookies: [REDACTED]"),
        # An upper-case word beside an AWS key id is a digest, not its secret key.
        (
            "AKIAIOSFODNN7EXAMPLE 7C4A8D09CA3762AF61E59520943DC26494F8941B",
            "[REDACTED] 7C4A8D09CA3762AF61E59520943DC26494F8941B",
        ),
    ],
)
def test_header_values_and_aws_digests(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The secret key beside its id, in any order, quoted or not; a second pair too.
        (
            "k=AKIAIOSFODNN7EXAMPLE s=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "k=[REDACTED] s=[REDACTED]",
        ),
        (
            '["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "ASIAY34FZKBOKMUTVV7A"]',
            '["[REDACTED]", "[REDACTED]"]',
        ),
        # Not a secret key: a hex digest, a longer word, padded base64 (some other value).
        (
            "AKIAIOSFODNN7EXAMPLE 7c4a8d09ca3762af61e59520943dc26494f8941b",
            "[REDACTED] 7c4a8d09ca3762af61e59520943dc26494f8941b",
        ),
        (
            "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYx",
            "[REDACTED] wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYx",
        ),
        (
            "AKIAIOSFODNN7EXAMPLE Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2Fy=",
            "[REDACTED] Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2Fy=",
        ),
        (
            "AKIAIOSFODNN7EXAMPLE 1234567890123456789012345678901234567890",
            "[REDACTED] 1234567890123456789012345678901234567890",
        ),
        # An id must stand alone; a secret key alone has no shape.
        ("XAKIAIOSFODNN7EXAMPLE", "XAKIAIOSFODNN7EXAMPLE"),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ],
)
def test_an_aws_secret_access_key_is_redacted_beside_its_key_id(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_an_aws_key_pair_in_an_exception_is_redacted_everywhere(captured: Capture) -> None:
    sink = captured()
    try:
        raise RuntimeError(
            "upload failed for ('AKIAIOSFODNN7EXAMPLE', 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY')"
        )
    except RuntimeError as exc:
        agent_logging.get_logger().exception("s3", cause=exc)
    record = sink.last()
    expected = "upload failed for ('[REDACTED]', '[REDACTED]')"
    assert record["error"]["message"] == expected
    assert record["error"]["stack"].endswith(f"RuntimeError: {expected}\n")
    assert record["cause"] == f"RuntimeError: {expected}"
    assert b"wJalrXUtnFEMI" not in sink.lines[-1]
    assert b"AKIAIOSFODNN7EXAMPLE" not in sink.lines[-1]


@pytest.mark.parametrize("path", ["direct", "full"])
def test_a_field_name_that_holds_a_secret_is_redacted_in_place(
    captured: Capture, path: str
) -> None:
    # The direct path renders plain records from cached pieces; a user processor sends every
    # record through the full one. Both redact the names.
    sink = captured(processors=[] if path == "direct" else [lambda _l, _m, event: event])
    agent_logging.get_logger().info(
        "k",
        before=1,
        **{
            "password=hunter2": 2,
            "Bearer 0b8a2f6e4c1d9e7a5b3c": "x",
            "password=[REDACTED]": 3,  # the name the first one would take
            "tags": {"token=t0k3n": 1},
        },
        after=4,
    )
    record = sink.last()
    fields = list(record)[list(record).index("before") :]
    assert fields == [
        "before",
        "password=[REDACTED]_2",
        "Bearer [REDACTED]",
        "password=[REDACTED]",
        "tags",
        "after",
    ]
    assert record["password=[REDACTED]_2"] == REDACTED  # a password's key: its value too
    assert record["Bearer [REDACTED]"] == "x"
    assert record["password=[REDACTED]"] == REDACTED
    assert record["tags"] == {"token=[REDACTED]": 1}
    for secret in (b"hunter2", b"0b8a2f6e4c1d9e7a5b3c", b"t0k3n"):
        assert secret not in sink.lines[-1]


def test_a_field_name_is_redacted_on_every_call_of_its_shape(captured: Capture) -> None:
    # Which names to rename is worked out once per record shape, then reused.
    sink = captured()
    log = agent_logging.get_logger()
    for value in (1, 2):
        log.info("k", **{"token=t0k3n": value, "n": value})
    assert [list(record)[-2:] for record in sink.records] == [["token=[REDACTED]", "n"]] * 2
    assert b"t0k3n" not in b"".join(sink.lines)


@pytest.mark.integration
def test_what_loki_stores_is_the_redacted_line(
    loki: LokiServer, tmp_path: Path, captured: Capture
) -> None:
    # The line a sink writes is the line that is spooled and pushed: redaction happens once,
    # before rendering, so Loki cannot hold what the local line does not.
    sink = captured(loki_url=loki.url, spool_dir=tmp_path / "spool", health_interval_s=0)
    log = agent_logging.get_logger("tests")
    for text, _ in ISSUE_21_LEAKS:
        log.warning(text)
    log.info("k", **{"password=hunter2": 2})
    try:
        raise ValueError("bad key AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    except ValueError:
        log.exception("aws")
    assert agent_logging.flush(timeout_s=10.0)
    agent_logging.shutdown(timeout_s=5.0)

    stored = [entry.line.encode() for entry in loki.entries()]
    assert stored == sink.lines
    assert [orjson.loads(line)["event"] for line in stored[: len(ISSUE_21_LEAKS)]] == [
        expected for _, expected in ISSUE_21_LEAKS
    ]
    assert "password=[REDACTED]" in orjson.loads(stored[-2])
    for entry in loki.entries():
        for secret in LEAKED:
            assert secret not in entry.line
            assert all(secret not in value for value in entry.metadata.values())


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
        # Keys of framework and library secrets, and glued forms (issue 21: deleting any of
        # these rules passed the whole suite).
        "SECRET_KEY",
        "secret_key",
        "SECRET_KEY_BASE",
        "encryption_key",
        "hmac_key",
        "master_key",
        "tls_key",
        "awssecretkey",
        "tlskey",
        "accesskey",
        "privatekey",
        "secretkey",
        "signingkey",
        "encryptionkey",
        "hmackey",
        "masterkey",
        "authkey",
        "auth_key",
        "authKey",
        "privkey",
        "priv_key",
        "service_key",
        "PAGERDUTY_SERVICE_KEY",
        "passcode",
        "storepass",
        "keypass",
        "srcstorepass",
        "destkeypass",
        "oauth2-bearer",
        "passwd_db",
        "passphrase_for_deploy",
        "passphrases",
        # A secret followed by words naming a copy of it.
        "token_confirmation",
        "token_confirmed",
        "token_again",
        "token_repeat",
        "token_repeated",
        "token_retype",
        "token_retyped",
        "token_reenter",
        "token_reentered",
        "token_verify",
        "token_verification",
        "token_old",
        "token_current",
        "token_previous",
        "token_prev",
        "token_orig",
        "token_original",
        "token_plain",
        "token_plaintext",
        "token_cleartext",
        "token_raw",
        "token_val",
        "token_input",
        "token_hash",
        "token_hashed",
        "token_encrypted",
        "token_enc",
        "token_encoded",
        "token_base64",
        "token_der",
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
        "password_stdin",
        "key_base",
        "bearer",
        # Each word that says a key is about a password, not one.
        "password_policies",
        "password_length",
        "password_len",
        "password_min",
        "password_max",
        "password_minimum",
        "password_maximum",
        "password_score",
        "password_complexity",
        "password_rule",
        "password_rules",
        "password_requirement",
        "password_requirements",
        "password_expired",
        "password_expiration",
        "password_age",
        "password_changed",
        "password_updated",
        "password_last_rotated",
        "password_reset",
        "password_enabled",
        "password_disabled",
        "password_protected",
        "password_authentication",
        "password_login",
        "password_grant",
        "password_label",
        "password_prompt",
        "password_path",
        "password_dir",
        "password_command",
        "password_cmd",
        "password_manager",
        "password_valid",
        "password_invalid",
        "password_validation",
        "password_match",
        "password_matches",
        "password_mismatch",
        "password_attempt",
        "password_attempts",
        "password_failure",
        "password_failures",
        "password_failed",
        "password_retries",
        "password_set",
        "password_count",
        "password_error",
        "password_errors",
        "password_type",
        "password_mode",
        "password_method",
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


def checked_then_redacted(logger: object, method_name: str, record: Any) -> Any:
    """What the pipeline runs last on a record a processor of the service's touched: the
    late trace-id check (a bad one to ``rejected_ids``, quoted redacted), then redaction."""
    return redact(logger, method_name, check_late_trace_ids(logger, method_name, record))


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
    checked_then_redacted(None, "info", record)
    assert record == {
        "ts": "t",
        "event": "hello",
        "user": "password=[REDACTED]",
        "rejected_ids": {key: {"value": shown, "reason": reason}},
    }


def test_processor_keeps_w3c_trace_ids() -> None:
    record = {"event": "hello", "trace_id": TRACE_ID, "span_id": SPAN_ID}
    assert checked_then_redacted(None, "info", record) == {
        "event": "hello",
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
    }


def test_processor_remembers_which_key_a_trace_id_was_valid_for() -> None:
    # Values seen valid are remembered: a trace id is no span id, nor the other way round.
    assert (
        checked_then_redacted(None, "info", {"trace_id": TRACE_ID, "span_id": SPAN_ID})["span_id"]
        == SPAN_ID
    )
    record = checked_then_redacted(None, "info", {"trace_id": SPAN_ID, "span_id": TRACE_ID})
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
        checked_then_redacted(None, "info", record)
    finally:
        _context.reset(token)
    assert record == {
        "event": "hello",
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "rejected_ids": {"trace_id": {"value": "'password=[REDACTED]'", "reason": _TRACE_REASON}},
        "rejected_ids_field": "password=[REDACTED]",
    }


@pytest.mark.parametrize("source", ["call site", "processor"])
def test_a_bad_trace_id_from_a_call_site_or_a_processor_never_reaches_the_line(
    captured: Capture, source: str
) -> None:
    # Redaction leaves trace ids as they are: the pipeline checks a call site's (with or
    # without an identifier beside it) and, after the service's processors, theirs.
    def put_trace_id(_logger: object, _method: str, event: Any) -> Any:
        event["trace_id"] = "password=hunter2"
        return event

    sink = captured(processors=[put_trace_id] if source == "processor" else [])
    log = agent_logging.get_logger()
    if source == "processor":
        log.info("hello")
    else:
        log.info("hello", trace_id="password=hunter2")
    record = sink.last()
    assert "trace_id" not in record
    assert record["rejected_ids"] == {
        "trace_id": {"value": "'password=[REDACTED]'", "reason": _TRACE_REASON}
    }
    assert b"hunter2" not in sink.lines[-1]


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
        # Percent-encoding, command lines, SQL, AWS key pairs and the prefixed tokens.
        "%3D", "%3d", "%3A", "%20", "%253D", "%2F", "%40", "%22", "%26", "+", "\r", "\x0b",
        " -p", "-p", " -u ", " -a ", " -P ", "mysql", "curl", "sshpass", "ipmitool", "redis-cli",
        "docker login", "--password ", "--token ", "-storepass ", "--ask-pass ", "PASSWORD ",
        "password '", "IDENTIFIED BY ", "identified by ", "CREATE USER ", "GRANT ",
        "SET PASSWORD FOR ", "E'", "$$", "$pw$", "''", "npm_",
        "npm_4fG7hJ2kL9mN3pQ8rS1tV6wX0yZ5aB7cD9eF", "pypi-AgE", "hvs.", "glsa_", "glc_",
        "xapp-1-", "SG.", "SK0123456789abcdef0123456789abcdef", "sk-proj-", "dop_v1_", "sha256~",
        "AGE-SECRET-KEY-1", "GOCSPX-", "GR1348941", "eyJrIjoi", "eyJhdXRocyI6", "ewogICJhdXRo",
        "hooks.slack.com/services/", "ABIA", "ACCA", "A3T",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ]
)  # fmt: skip
SECRETISH = st.lists(FRAGMENTS | st.text(max_size=4), max_size=24).map("".join)
# Everything redaction looks for needs one of these (see _scan), or a leading '-' (an
# option); anything else passes.
TRIGGERS = (
    ":",
    "=",
    ",",
    "%",
    " -",
    "\t-",
    "\n-",
    "assword",
    "ASSWORD",
    "dentified",
    "DENTIFIED",
    "PRIVATE KEY",
    "earer",
    "eyJ",
    "IA",
    "ACCA",
    "A3T",
    "hook",
    "gh",
    "_pat_",
    "gl",
    "xox",
    "xapp",
    "k_live_",
    "k_test_",
    "k_prod_",
    "sk-",
    "AIza",
    "GOCSPX",
    "npm_",
    "pypi-",
    "hv",
    "SG.",
    "SK",
    "_v1_",
    "ewo",
    "sha256~",
    "AGE-",
    "GR1348941",
)
# Everything that can replace fewer than len("[REDACTED]") characters needs one of these.
SHORT_SECRET_TRIGGERS = (
    ":",
    "=",
    ",",
    "-",
    "%",
    "assword",
    "ASSWORD",
    "dentified",
    "DENTIFIED",
    "hook",
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
    if not text.startswith("-") and not any(trigger in text for trigger in TRIGGERS):
        assert redact_text(text) is text
    if not any(trigger in text for trigger in SHORT_SECRET_TRIGGERS):
        # Only key/value pairs, two-item sequences, URL passwords, command lines, SQL,
        # webhook paths and what they are when percent-encoded can be shorter than
        # "[REDACTED]".
        assert len(redact_text(text)) <= len(text)
