"""Secrets in text: PEM private keys, credentials in URLs, ``key=value`` pairs whose key names
a secret, passwords on command lines and in SQL, ``Bearer`` tokens and tokens recognisable by
their shape, each replaced in place, also when the text holding them is percent-encoded.

Separate from ``_redact`` because this is the part that reads text: the patterns, their
prefilters and the clean-string cache, with a contract of its own (:func:`redact_text`: text
in, the same object out when nothing was redacted). ``_redact`` applies it to values and
records; which keys name a secret is ``_sensitive_keys``'s to say.

Recognised wherever they appear:

- PEM private keys, credentials in URLs (``scheme://user:password@``), ``Bearer <token>``;
- the value of a ``key=value``/``key: value``/``"key": "value"`` pair whose key is sensitive
  (a bytes literal, ``b'...'``, whole), of a ``key=`` URL query parameter (Google's API keys),
  of a two-item tuple or list written out as text, ``('password', 'x')`` or
  ``[(b'authorization', b'Basic ...')]`` (ASGI's and httpx's raw headers), and of a command
  line option named like a sensitive key, ``--password x``, ``-storepass x`` (keytool);
- passwords in command lines whose programs take them as an option (their manuals):
  ``mysql -pX`` (and the other MySQL/MariaDB clients), ``sshpass -p X``, ``ipmitool -P X``,
  ``redis-cli -a X``, ``docker login -p X`` (podman, buildah, skopeo, nerdctl), the password
  of ``curl -u user:password`` (``--user``, ``-U``, ``--proxy-user``);
- passwords in SQL: ``PASSWORD '...'`` (``CREATE/ALTER ROLE/USER``, PostgreSQL), ``SET
  PASSWORD [FOR ...] = '...'`` and ``IDENTIFIED [WITH plugin] BY '...'`` after ``CREATE``,
  ``ALTER`` or ``GRANT`` on its line (MySQL, MariaDB, Oracle, which also takes the password
  unquoted); SQL's ``''``, ``E'...'`` with backslash escapes and ``$tag$...$tag$`` quoting
  are honoured;
- an AWS access key id (``AKIA``, ``ASIA`` temporary, ``ABIA``, ``ACCA``, ``A3T``) and, in
  the same text, any 40-character base64 word in mixed case: its secret access key, which has
  no shape of its own (the pairing detect-secrets' AWS plugin looks for);
- tokens by their documented prefix (the set gitleaks' and detect-secrets' rule sets
  publish, cut to what this project's services use, see ``_SHAPES_RE``): JWTs, GitHub,
  GitLab, Slack, Stripe, npm, PyPI, HashiCorp Vault, Grafana, SendGrid, Twilio, OpenAI and
  Anthropic, DigitalOcean, OpenShift, Google API keys and OAuth client secrets, age, a
  Docker config's base64 (a Kubernetes ``.dockerconfigjson``); Slack, Teams and Discord
  webhook URLs lose their path.

Percent-encoding (``password%3Dhunter2``, ``Authorization%3A%20Bearer%20eyJ...``, encoded
up to three times, ``%253D``, either case of hex digit) is decoded to find secrets, which are
then replaced in the text as it was, the rest of it still encoded; an encoded value ends at
the first ``&``, blank or ``"`` that stands unencoded in the text. A ``+`` is not read as a
space (it may be a literal ``+`` of a base64 value): an unquoted value runs on through it,
and ``Bearer+``, a scheme followed by ``+``, and ``=+`` are read as with a space.

What is kept is what makes the line useful: the key, the auth scheme of an ``Authorization``
value, the URL's user and host, the option, the program and the user of ``curl -u``. The
value of any other sensitive key is redacted whole, with the credential that follows an auth
scheme in it: ``X-Auth-Token: Bearer abc`` becomes ``X-Auth-Token: [REDACTED]``.

Cost: each pass runs only if the text contains what it cannot match without (``:``, ``=``,
`` -``, ``%``, a password word, a token's prefix: some thirty substring tests, most of one
character), and clean strings up to 256 characters are remembered, so a record whose strings
were seen before pays nothing here. A new 60-character string without a trigger costs
~0.6 µs, one with ``:`` or ``=`` ~0.9-1.3 µs, one with a ``%XX`` escape ~3.6 µs (it is
scanned again decoded), one holding a secret ~10 µs (``timeit``, best of 9, on the 2-core
development VM, where the same strings took 0.26, 0.65-0.8, 0.8 and 7.6 µs before the
command-line, SQL, AWS-pair, percent-encoding and vendor-prefix passes were added).

Known limits (a log line is text, not a parsed document): a value is cut at whitespace or
``& , ;`` unless quoted (an auth scheme that starts it is taken with the word after it), so an
unquoted password holding those characters is redacted only up to them; ``token: expired``
loses ``expired``, ``--token option`` loses ``option``; ``Bearer`` outside a header is
redacted only when followed by at least 16 token characters, so ``Bearer of bad news`` is
kept; an AWS secret access key is recognised only in the text that holds its key id (a
field of its own is redacted only under a sensitive key); a program's own password option
is recognised only on the program's line, the program standing after a blank, a shell
operator or quote, or ``bin/``; XML elements and attributes, ``.netrc``/``.pgpass`` lines,
``password hunter2`` in prose and a pair whose items are escaped quotes
(``[\\"token\\", \\"x\\"]``, JSON inside a JSON string) are not recognised; tokens
without a documented prefix are found only by their key.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from typing import Final

from agent_logging.redaction._sensitive_keys import has_key_word, is_sensitive_key

__all__ = [
    "CLEAN_MAX_CHARS",
    "REDACTED",
    "clean_texts",
    "redact_text",
    "remember_clean",
    "scan",
    "scan_unfiltered",
]

#: What a secret is replaced with.
REDACTED: Final = "[REDACTED]"

#: What a whole PEM private key block is replaced with.
_REDACTED_KEY: Final = "[REDACTED PRIVATE KEY]"

# One pass per family of secrets, each run only when a cheap substring test says it could
# match, and each pattern starting with a literal so that sre scans for it at C speed (a
# pattern starting with a look-behind is tried at every position: 50x slower, measured).

_PEM_BEGIN: Final = re.compile(r"-----BEGIN[ A-Z0-9]*?PRIVATE KEY(?: BLOCK)?-----")
_PEM_END: Final = re.compile(r"-----END[ A-Z0-9]*?PRIVATE KEY(?: BLOCK)?-----")
# A key cut short (a message truncated at 2 KB): the base64 lines and RFC 1421 headers that
# follow its BEGIN line, separated by newlines, literal "\n" (a repr) or blanks.
_PEM_BODY: Final = re.compile(
    r"(?:(?:\r?\n|(?:\\r)?\\n|[ \t])*+(?:[A-Za-z-]++:[^\r\n\\]*+|[A-Za-z0-9+/=]++))*+"
)
#: A 16384-bit RSA key is ~12.5 KB of PEM: its END line is looked for that far, no further.
_PEM_MAX_CHARS: Final = 16384
# scheme://user:password@host; the password may hold '@' and ':', the last '@' ends it.
_URL_RE: Final = re.compile(
    r"://(?<=[A-Za-z0-9+.-]://)[^\s:/?#@\"'<>\[\]\\]*+:(?P<pw>[^\s/?#\"'<>\\]+)@"
)
# The separator of key=value, key: value, "key": "value", key => value; the key is read
# backwards from it. ':' before ':' or '//' is a path or a scheme, '==' a comparison. A '+'
# after it is a space of form encoding (Authorization%3A+Bearer+...).
_SEP_RE: Final = re.compile(r"(?:=>|=(?!=)|:(?!:|//))[ \t+]*")
_KEY_CHARS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_KEY_MAX_CHARS: Final = 128
#: Keys whose value in an HTTP header dump (``Name: value``) runs to the end of the line.
_HEADER_KEYS: Final = frozenset(
    {"authorization", "proxyauthorization", "cookie", "cookies", "setcookie"}
)
_BEARER_RE: Final = re.compile(
    r"[Bb](?<![A-Za-z0-9_-][Bb])earer[ \t+]+(?P<token>[A-Za-z0-9._~+/-]{16,}+=*+)"
)
# Tokens by their documented prefix and shape: the prefixes of gitleaks' rules
# (config/gitleaks.toml) and detect-secrets' plugins that this project's services and tools
# meet, each written here from the vendor's format. The prefix comes first and its left
# boundary is checked right after it (a look-behind first would be tried at every position).
_SHAPES_RE: Final = re.compile(
    # JWT: JWS, or JWE's five parts
    r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{10,}+\.[A-Za-z0-9_-]{2,}+\.[A-Za-z0-9_-]*+"
    r"(?:\.[A-Za-z0-9_-]*+\.[A-Za-z0-9_-]*+)?"
    # Grafana's legacy API keys: base64 of {"k":"...
    r"|eyJrIjoi(?<![A-Za-z0-9+/]eyJrIjoi)[A-Za-z0-9]{30,}+={0,3}"
    # A Docker config's base64 ({"auths": compact or indented), as in a .dockerconfigjson
    r"|eyJhdXRocyI6(?<![A-Za-z0-9+/]eyJhdXRocyI6)[A-Za-z0-9+/]*+={0,2}"
    r"|ew(?<![A-Za-z0-9+/]ew)(?:oJImF1dGhz|ogICJhdXRo)[A-Za-z0-9+/]*+={0,2}"
    r"|gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{36,}+"  # GitHub
    r"|github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}+"
    # GitLab: personal, pipeline trigger, deploy, runner, CI job, SCIM, feed, incoming mail,
    # agent, OAuth application and feature flag tokens; runner registration tokens
    r"|gl(?<![A-Za-z0-9_-]gl)(?:pat|ptt|dt|rt|cbt|soat|ft|imt|agent|oas|ffct)-[A-Za-z0-9_-]{20,}+"
    r"|GR1348941(?<![A-Za-z0-9_-]GR1348941)[A-Za-z0-9_-]{20,}+"
    # Grafana: service account and Cloud access policy tokens
    r"|gl(?<![A-Za-z0-9_-]gl)(?:sa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|c_[A-Za-z0-9+/]{32,}+={0,3})"
    r"|xox(?<![A-Za-z0-9_-]xox)[abposre]-[A-Za-z0-9-]{10,}+"  # Slack
    r"|xapp-(?<![A-Za-z0-9_-]xapp-)[0-9]-[A-Za-z0-9-]{10,}+"  # Slack app-level tokens
    r"|sk_(?<![A-Za-z0-9_]sk_)(?:live|test|prod)_[A-Za-z0-9]{16,}+"  # Stripe secret keys
    r"|rk_(?<![A-Za-z0-9_]rk_)(?:live|test|prod)_[A-Za-z0-9]{16,}+"  # and restricted keys
    # OpenAI project, service account and admin keys, and the legacy ones; Anthropic's
    r"|sk-(?<![A-Za-z0-9_-]sk-)(?:(?:proj|svcacct|admin|ant-[a-z]{3,5}[0-9]{2})-[A-Za-z0-9_-]{20,}+"
    r"|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})"
    r"|AIza(?<![A-Za-z0-9_-]AIza)[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"  # Google API keys
    r"|GOCSPX-(?<![A-Za-z0-9_-]GOCSPX-)[A-Za-z0-9_-]{20,}+"  # Google OAuth client secrets
    r"|npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36,}+"  # npm access tokens
    r"|pypi-(?<![A-Za-z0-9_-]pypi-)AgE[A-Za-z0-9_-]{50,}+"  # PyPI API tokens (macaroons)
    r"|hv(?<![A-Za-z0-9_.-]hv)[sbr]\.[A-Za-z0-9_-]{24,}+"  # Vault service/batch/recovery
    r"|SG\.(?<![A-Za-z0-9_.-]SG\.)[A-Za-z0-9_-]{16,}+\.[A-Za-z0-9_-]{16,}+"  # SendGrid
    r"|SK(?<![A-Za-z0-9_-]SK)[0-9a-fA-F]{32}(?![A-Za-z0-9_-])"  # Twilio API keys
    r"|do(?<![A-Za-z0-9_]do)[opr]_v1_[a-f0-9]{64,}+"  # DigitalOcean
    r"|sha256~(?<![A-Za-z0-9_-]sha256~)[A-Za-z0-9_-]{43,}+"  # OpenShift OAuth access tokens
    r"|AGE-SECRET-KEY-1[0-9A-Z]{58,}+"  # age (SOPS) identities
)
#: Webhook URLs whose path is the credential (Slack, Microsoft Teams, Discord): the host and
#: the kind of hook are kept.
_WEBHOOK_RE: Final = re.compile(
    r"(?:hooks\.slack\.com/(?:services|workflows|triggers)|\.webhook\.office\.com/webhookb2"
    r"|discord(?:app)?\.com/api/webhooks)/(?P<secret>[^\s\"'<>\\]+)"
)
# AWS access key ids: AKIA long-term, ASIA temporary (STS), ABIA (STS bearer), ACCA (context),
# A3T (the oldest); the secret access key that goes with one is 40 base64 characters, with no
# prefix, so it is recognised only beside an id, and only in mixed case (a hex digest, a SHA-1
# of a commit, is not).
_AWS_ID_RE: Final = re.compile(
    r"A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"
)
_BASE64_WORD_RE: Final = re.compile(r"[A-Za-z0-9/+]{40,}+")
_AWS_SECRET_CHARS: Final = 40


def _cased(*words: str) -> str:
    """An alternation of each word in lower, upper and capitalised case (SQL keywords)."""
    return "(?:" + "|".join(f"{w}|{w.upper()}|{w.capitalize()}" for w in words) + ")"


# SQL: PASSWORD 'x' (PostgreSQL's CREATE/ALTER ROLE/USER ... [ENCRYPTED] PASSWORD), MySQL's
# SET PASSWORD [FOR 'u'@'h'] = 'x', and IDENTIFIED [WITH plugin] BY 'x' once CREATE, ALTER or
# GRANT came before it on the line (MySQL, MariaDB; Oracle's unquoted IDENTIFIED BY x, which
# in prose, "the user identified by n-17", would take a word). The keywords in lower, upper
# or capitalised case (not (?i): a prefilter can then test for them with `in`).
_SQL_PASSWORD_RE: Final = re.compile(
    r"[pP](?<![A-Za-z0-9_][pP])(?:assword|ASSWORD)"
    rf"(?:[ \t]+{_cased('for')}[ \t]+[^=\r\n]{{1,200}}?[ \t]*=[ \t]*|[ \t]+)"
    r"(?=[eE]?'|\"|\$)"  # a quoted value: a bare word after PASSWORD is prose
)
_SQL_IDENTIFIED_RE: Final = re.compile(
    rf"\b{_cased('create', 'alter', 'grant')}\b[^\r\n]{{0,200}}?\b{_cased('identified')}"
    rf"(?:[ \t]+{_cased('with')}[ \t]+[A-Za-z0-9_]+)?[ \t]+{_cased('by')}[ \t]+"
)
_SQL_DOLLAR: Final = re.compile(r"\$[A-Za-z_]*\$")
_SQL_BARE: Final = re.compile(r"[^\s;,)]+")

# Programs that take a password as an option's value, and the option. mysql(1) and the other
# MySQL/MariaDB clients take it glued only (-pX; "-p X" prompts and X is the database), the
# others glued or as the next word; curl's -u/--user/-U/--proxy-user take user:password (a
# user alone prompts), and so may a cluster of short options ending in u (-sSu).
_COMMAND_RE: Final = re.compile(
    r"(?P<glued>(?:mysql|mariadb-?)(?:dump|admin|import|check|show|slap|pump|binlog)?)"
    r"|(?P<p>sshpass)"
    r"|(?P<P>ipmitool)"
    r"|(?P<a>redis-cli)"
    r"|(?P<login>(?:docker|podman|buildah|skopeo|nerdctl)[ \t]+login)"
    r"|(?P<curl>curl)"
)
_COMMAND_OPTIONS: Final = {
    "glued": re.compile(r"[ \t]-p(?=\S)"),
    "p": re.compile(r"[ \t]-p[ \t]*"),
    "P": re.compile(r"[ \t]-P[ \t]*"),
    "a": re.compile(r"[ \t]-a[ \t]*"),
    "login": re.compile(r"[ \t]-p[ \t]*"),
    "curl": re.compile(r"[ \t](?:-[A-Za-z]*[uU]|--(?:proxy-)?user(?==|[ \t]))=?[ \t]*"),
}
#: What may stand right before a program's name: a blank, a shell operator or quote, or the
#: start of the text; or a bin/ directory (/usr/bin/mysql), but no other path or word
#: (-I/usr/include/mysql -pthread, libmysqlclient, mysql.connector).
_COMMAND_AFTER: Final = " \t\n'\"`;|&($"
_WORD: Final = re.compile(r"[^\s]+")
# An option of any command named like a sensitive key, with its value as the next word:
# --password x, --token=... being a key=value pair. Its dashes follow a blank or a newline or
# start the text (what scan's prefilter tests for); the option must be followed by a word that
# is not an option itself (unlike a program's own option above, which takes the next word
# whatever it is, as getopt does).
_OPTION_RE: Final = re.compile(
    r"-(?<![^ \t\n]-)-?(?P<key>[A-Za-z][A-Za-z0-9_.-]{0,127}+)[ \t]+(?=[^\s-])"
)
#: How options that are flags about a secret, not followed by one, begin (Ansible's
#: --ask-become-pass, psql's --no-password).
_FLAG_PREFIXES: Final = ("ask-", "no-")

# Percent-encoding: what is decoded (to find secrets in it), at most this many times over.
_PERCENT_RE: Final = re.compile(r"%[0-9A-Fa-f]{2}")
_MAX_DECODINGS: Final = 3
_HEX_BYTES: Final = {
    f"{high}{low}": chr(int(f"{high}{low}", 16))
    for high in "0123456789abcdefABCDEF"
    for low in "0123456789abcdefABCDEF"
}
# What ends an encoded value where it stands unencoded in the text: a query's '&', a blank,
# a JSON string's quote. A value found in the decoded text is cut there (an Authorization
# header's value runs to the end of its line, decoded, but its encoded form ends at the
# space before "HTTP/1.1").
_ENCODED_VALUE_END: Final = re.compile(r"[\s&\"]")

# A two-item tuple or list as Python's repr or JSON writes it, up to its value's opening quote:
# ('password', 'x'), (b'authorization', b'Basic x'), ["Cookie", "a=1"]. The value's end, and
# the bracket that must close the pair right after it, are found by _pair_spans.
_PAIR_RE: Final = re.compile(
    r"(?P<open>[(\[])[ \t]*b?(?P<q>['\"])(?P<key>[A-Za-z0-9_.-]{1,128})(?P=q)[ \t]*,[ \t]*"
    r"b?(?P<vq>['\"])"
)
_CLOSERS: Final = {"(": ")", "[": "]"}
# A Python bytes literal as a value ({'password': b'x'}, bytearray(b'x')): its quotes hold it.
_BYTES_LITERALS: Final = ("b'", 'b"', "bytearray(b'", 'bytearray(b"')
# The key of a URL query parameter that holds a credential though the name alone is too
# common to be a sensitive key anywhere (Google's ?key=AIza...).
_QUERY_KEYS: Final = frozenset({"key"})
_BARE_VALUE: Final = re.compile(r"[^\s\"'&,;]+")
_QUOTED: Final = {q: re.compile(rf"{q}(?:[^{q}\\]|\\.)*{q}", re.DOTALL) for q in "\"'"}
_LINE_REST: Final = re.compile(r"(?:[^\r\n\\]|\\(?![rn]))*")
_BLOCK_SCALAR: Final = re.compile(r"[|>][-+0-9]*[ \t]*(?=\r?\n)")
# IANA HTTP authentication scheme registry, plus the non-registered ones in common use.
_AUTH_SCHEME: Final = re.compile(
    r"(?i:basic|bearer|digest|dpop|gnap|hoba|mutual|negotiate|ntlm|oauth|privatetoken|"
    r"scram-sha-1|scram-sha-256|vapid|aws4-hmac-sha256|token|bot|apikey|sso-key)[ \t+]+(?=\S)"
)
_ALREADY: Final = (_REDACTED_KEY, REDACTED)

#: Strings up to :data:`CLEAN_MAX_CHARS` known to hold no secret; ``_redact``'s processor
#: tests it inline, on its hot path.
clean_texts: dict[str, None] = {}
CLEAN_MAX_CHARS: Final = 256
_CLEAN_SIZE: Final = 4096

Span = tuple[int, int, str]


def redact_text(text: str) -> str:
    """``text`` with every secret it holds replaced, keeping the non-secret part of the line.

    ``Authorization: Bearer abc.def`` becomes ``Authorization: Bearer [REDACTED]``,
    ``postgresql://app:s3cret@db/x`` becomes ``postgresql://app:[REDACTED]@db/x`` and a PEM
    private key block becomes ``[REDACTED PRIVATE KEY]``. Never raises; idempotent.

    Args:
        text: any text: a message, a field value, a formatted traceback.

    Returns:
        The same object when nothing was redacted, so callers can test with ``is``.
    """
    if len(text) < 5:  # the shortest redactable text is "pwd=x"
        return text
    short = len(text) <= CLEAN_MAX_CHARS
    if short and text in clean_texts:
        return text
    redacted = scan(text)
    if short and redacted is text:
        remember_clean(text)
    return redacted


def remember_clean(text: str) -> None:
    """Add ``text``, which :func:`scan` left unchanged, to :data:`clean_texts`."""
    if len(clean_texts) >= _CLEAN_SIZE:
        clean_texts.clear()  # dynamic messages would grow it forever: bound it, keep it simple
    clean_texts[text] = None


def scan(text: str) -> str:
    """The passes, each behind the substring tests its pattern cannot match without.

    Each longer needle sits behind a single character it holds (``V`` of PRIVATE KEY, ``J``
    of eyJ): ``in`` finds one character with memchr, several times faster than a needle of
    two or more, and most clean text fails those. The passes run in the order of
    :data:`_PASSES`, as :func:`scan_unfiltered` runs them.

    Args:
        text: any text, not looked up in :data:`clean_texts`.

    Returns:
        The same object when nothing was redacted.
    """
    dash = "-" in text
    colon = ":" in text
    if dash and "V" in text and "PRIVATE KEY" in text:
        text = _apply(text, _pem_spans(text))
    if colon and "@" in text and "://" in text:
        text = _apply(text, _url_spans(text))
    pairs = "," in text and ("'" in text or '"' in text)
    if (colon or pairs or "=" in text) and has_key_word(text.lower()):
        text = _apply(text, _kv_spans(text))
        if pairs:
            text = _apply(text, _pair_spans(text))
    if dash and (
        " -" in text
        or text[0] == "-"
        or ("\t" in text and "\t-" in text)
        or ("\n" in text and "\n-" in text)
    ):
        text = _apply(text, _command_spans(text))
    if (
        "assword" in text
        or "dentified" in text
        or ("D" in text and ("ASSWORD" in text or "DENTIFIED" in text))
    ):
        text = _apply(text, _sql_spans(text))
    if "earer" in text:
        text = _apply(text, _bearer_spans(text))
    if "A" in text and ("IA" in text or "ACCA" in text or "A3T" in text):
        text = _apply(text, _aws_spans(text))
    if "." in text and "hook" in text:
        text = _apply(text, _webhook_spans(text))
    if (
        ("J" in text and ("eyJ" in text or "ewo" in text))
        or ("I" in text and "AIza" in text)
        or ("S" in text and ("SK" in text or "SG." in text))
        or ("G" in text and ("GR1348941" in text or "GOCSPX" in text or "AGE-" in text))
        or (
            "_" in text
            and (
                "gh" in text
                or "gl" in text
                or ("k_" in text and ("k_live_" in text or "k_test_" in text or "k_prod_" in text))
                or "_pat_" in text
                or "npm_" in text
                or "_v1_" in text
            )
        )
        or (
            dash
            and (
                "gl" in text
                or ("x" in text and ("xox" in text or "xapp" in text))
                or "sk-" in text
                or "pypi-" in text
            )
        )
        or ("." in text and "hv" in text)
        or ("~" in text and "sha256~" in text)
    ):
        text = _sub(_SHAPES_RE, REDACTED, text)
    if "%" in text:
        text = _encoded_pass(text, scan)
    return text


def scan_unfiltered(text: str) -> str:
    """:func:`scan` without its substring tests, for tests that check those tests.

    Args:
        text: any text.

    Returns:
        The same object when nothing was redacted.
    """
    for spans in _PASSES:
        text = _apply(text, spans(text))
    return _encoded_pass(text, scan_unfiltered)


def _encoded_pass(text: str, check: Callable[[str], str]) -> str:
    """``text`` with the secrets its percent-decoded form holds replaced where they stand
    encoded: ``password%3Dhunter2`` becomes ``password%3D[REDACTED]``.

    The passes run on the decoded text one by one, as :func:`scan` runs them, and the spans
    each finds replace what they were decoded from; the text is decoded again after each
    pass that changed it. The rest of the text keeps its encoding.

    Args:
        text: text already scanned as it is.
        check: :func:`scan` or :func:`scan_unfiltered`, which tells whether the decoded text
            holds anything to redact at all (the common case: it does not).

    Returns:
        The same object when nothing was redacted.
    """
    if "%" not in text:
        return text
    plain = _unescaped(text)
    if plain is text or check(plain) is plain:
        return text
    decoded = _percent_decoded(text)  # again, now with where each character came from
    if decoded is None:
        return text
    plain, origin = decoded
    for spans_of in _PASSES:
        spans = spans_of(plain)
        if not spans:
            continue
        redacted = _apply(text, _encoded_spans(text, spans, origin))
        if redacted is not text:
            text = redacted
            decoded = _percent_decoded(text)
            if decoded is None:  # all that was encoded was a secret: the rest is plain text
                return check(text)
            plain, origin = decoded
    return text


def _encoded_spans(text: str, spans: list[Span], origin: Callable[[int], int]) -> list[Span]:
    """``spans`` of the decoded text as spans of ``text``, each cut where an encoded value
    must end (:data:`_ENCODED_VALUE_END`); one that has nothing left is dropped."""
    mapped: list[Span] = []
    for start, end, replacement in spans:
        start, end = origin(start), origin(end)
        if _REDACTED_KEY not in text[start:end]:  # a blank inside a mark ends no value
            cut = _ENCODED_VALUE_END.search(text, start, end)
            if cut is not None:
                end = cut.start()
        if end > start:
            mapped.append((start, end, replacement))
    return mapped


def _unescaped(text: str) -> str:
    """``text`` percent-decoded as :func:`_percent_decoded` decodes it, without the mapping
    (the common case: nothing in it is a secret); ``text`` itself if it holds no ``%XX``."""
    for _ in range(_MAX_DECODINGS):
        pieces = text.split("%")
        decoded = [pieces[0]]
        for piece in pieces[1:]:
            char = _HEX_BYTES.get(piece[:2])
            decoded.append("%" + piece if char is None else char + piece[2:])
        unescaped = "".join(decoded)
        if unescaped == text:
            break
        text = unescaped
    return text


def _percent_decoded(text: str) -> tuple[str, Callable[[int], int]] | None:
    """``text`` percent-decoded (up to :data:`_MAX_DECODINGS` times, for ``%253D``), and a
    function from an index in it to the index in ``text`` of what that character was decoded
    from; None if ``text`` holds no ``%XX``.

    Each ``%XX`` becomes the character of its byte value (a UTF-8 sequence becomes several
    Latin-1 characters: secrets are ASCII, and every decoded character stays one position).
    """
    levels: list[tuple[list[int], list[int]]] = []
    while len(levels) < _MAX_DECODINGS:
        decoded: list[str] = []
        at_decoded: list[int] = []  # where each escape's character is in the decoded text
        at_text: list[int] = []  # and where its '%' is in the text decoded
        done = 0
        size = 0
        for escape in _PERCENT_RE.finditer(text):
            start = escape.start()
            decoded.append(text[done:start])
            size += start - done
            at_decoded.append(size)
            at_text.append(start)
            decoded.append(chr(int(text[start + 1 : start + 3], 16)))
            size += 1
            done = start + 3
        if not at_decoded:
            break
        decoded.append(text[done:])
        text = "".join(decoded)
        levels.append((at_decoded, at_text))
    if not levels:
        return None

    def origin(index: int) -> int:
        for at_decoded, at_text in reversed(levels):
            escape = bisect_right(at_decoded, index) - 1
            if escape >= 0:
                # At the escape itself: its '%'; past it: as far past the escape's 3 chars.
                past = index - at_decoded[escape]
                index = at_text[escape] + (past + 2 if past else 0)
        return index

    return text, origin


def _url_spans(text: str) -> list[Span]:
    return [(m.start("pw"), m.end("pw"), REDACTED) for m in _URL_RE.finditer(text)]


def _bearer_spans(text: str) -> list[Span]:
    return [(m.start("token"), m.end(), REDACTED) for m in _BEARER_RE.finditer(text)]


def _shape_spans(text: str) -> list[Span]:
    return [(m.start(), m.end(), REDACTED) for m in _SHAPES_RE.finditer(text)]


def _webhook_spans(text: str) -> list[Span]:
    return [(m.start("secret"), m.end(), REDACTED) for m in _WEBHOOK_RE.finditer(text)]


def _kv_spans_unfiltered(text: str) -> list[Span]:
    return _kv_spans(text, unfiltered=True)


def _aws_spans(text: str) -> list[Span]:
    """Each AWS access key id, and, if there is one, each 40-character base64 word in mixed
    case (its secret access key: ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY``)."""
    spans = [(m.start(), m.end(), REDACTED) for m in _AWS_ID_RE.finditer(text)]
    if not spans:
        return spans
    for word in _BASE64_WORD_RE.finditer(text):
        secret = word.group()
        if (
            len(secret) == _AWS_SECRET_CHARS
            and not text.startswith("=", word.end())  # base64 padding: some other value
            and not secret.isupper()
            and not secret.islower()
            and not secret.isdigit()
        ):
            spans.append((word.start(), word.end(), REDACTED))
    return _merged(spans)


def _sql_spans(text: str) -> list[Span]:
    """The password of each SQL statement that sets one (see :data:`_SQL_PASSWORD_RE`)."""
    spans: list[Span] = []
    for match in _SQL_PASSWORD_RE.finditer(text):
        span = _sql_value(text, match.end(), bare=False)
        if span is not None:
            spans.append(span)
    if "dentified" in text or "DENTIFIED" in text:  # the pattern holds one or the other
        for match in _SQL_IDENTIFIED_RE.finditer(text):
            span = _sql_value(text, match.end(), bare=True)  # Oracle: IDENTIFIED BY hunter2
            if span is not None:
                spans.append(span)
    return _merged(spans)


def _sql_value(text: str, start: int, *, bare: bool) -> Span | None:
    """The inside of the SQL string literal (or, if ``bare``, the word) at ``start``."""
    if start >= len(text):
        return None
    first = text[start]
    if first in "eE" and text.startswith("'", start + 1):
        inner = _sql_quoted(text, start + 1, backslash=True)
    elif first in "'\"":
        inner = _sql_quoted(text, start, backslash=False)
    elif first == "$" and (tag := _SQL_DOLLAR.match(text, start)) is not None:
        close = text.find(tag.group(), tag.end())
        inner = (tag.end(), close if close != -1 else _line_end(text, tag.end()))
    elif bare and (word := _SQL_BARE.match(text, start)) is not None:
        inner = word.span()
    else:
        return None
    return (*inner, REDACTED) if inner[1] > inner[0] else None


def _sql_quoted(text: str, quote_at: int, *, backslash: bool) -> tuple[int, int]:
    """Inside of the SQL string literal whose quote is at ``quote_at``: a doubled quote is
    one quote; in an ``E'...'`` string so is a backslash-escaped one. Unclosed: to the line's
    end."""
    quote = text[quote_at]
    index = quote_at + 1
    while (close := text.find(quote, index)) != -1:
        if backslash and _escaped(text, close, quote_at):
            index = close + 1
        elif text.startswith(quote, close + 1):
            index = close + 2
        else:
            return quote_at + 1, close
    return quote_at + 1, _line_end(text, quote_at + 1)


def _escaped(text: str, at: int, since: int) -> bool:
    """Whether the character at ``at`` follows an odd number of backslashes."""
    count = 0
    while at - count - 1 > since and text[at - count - 1] == "\\":
        count += 1
    return count % 2 == 1


def _command_spans(text: str) -> list[Span]:
    """Passwords on command lines: each program's own option (:data:`_COMMAND_RE`), and the
    value of any option named like a sensitive key (``--password x``, ``-storepass x``)."""
    spans: list[Span] = []
    commands = [
        command
        for command in _COMMAND_RE.finditer(text)
        if (
            command.start() == 0
            or text[command.start() - 1] in _COMMAND_AFTER
            or text.endswith("bin/", 0, command.start())
        )
        and text.startswith((" ", "\t"), command.end())
    ]
    for index, command in enumerate(commands):
        # A program's options are those up to the end of its line or the next program: each
        # character is looked at for one program only (10,000 "curl -u" stay linear).
        end = command.end()
        limit = commands[index + 1].start() if index + 1 < len(commands) else len(text)
        rest = _LINE_REST.match(text, end, limit)
        stop = limit if rest is None else rest.end()
        kind = command.lastgroup or ""
        for option in _COMMAND_OPTIONS[kind].finditer(text, end, stop):
            value = _option_value(text, option.end())
            if value is None:
                continue
            if kind == "curl":  # user:password; a user alone is prompted for the password
                colon = text.find(":", *value)
                if colon == -1:
                    continue
                value = (colon + 1, value[1])
            if value[1] > value[0]:
                spans.append((*value, REDACTED))
    for option in _OPTION_RE.finditer(text):
        key = option.group("key")
        if not has_key_word(key.lower()) or not is_sensitive_key(key):
            continue
        if key.lower().startswith(_FLAG_PREFIXES):
            continue
        span = _kv_value(text, key, option.start("key"), "=", option.end(), "")
        if span is not None:
            spans.append(span)
    return _merged(spans)


def _option_value(text: str, start: int) -> tuple[int, int] | None:
    """The command-line word starting at ``start``, inside its quotes if quoted."""
    if start >= len(text) or text[start] in " \t\r\n":
        return None
    first = text[start]
    if first in "\"'":
        quoted = _QUOTED[first].match(text, start)
        end = quoted.end() - 1 if quoted is not None else _line_end(text, start + 1)
        return start + 1, end
    word = _WORD.match(text, start)
    return None if word is None else (start, word.end())


def _merged(spans: list[Span]) -> list[Span]:
    """``spans`` in order, overlapping ones joined into one :data:`REDACTED`."""
    if len(spans) < 2:
        return spans
    merged: list[Span] = []
    for start, end, replacement in sorted(spans):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(end, last[1]), REDACTED)
        else:
            merged.append((start, end, replacement))
    return merged


def _pem_spans(text: str) -> list[Span]:
    """Each private key block, from BEGIN to its END line, or to the end of its base64 body.

    Procedural rather than one pattern: ``str.find`` bounds the search for END by the next
    BEGIN, so text with many unterminated headers stays linear.
    """
    spans: list[Span] = []
    for begin in _PEM_BEGIN.finditer(text):
        if spans and begin.start() < spans[-1][1]:
            continue
        limit = min(len(text), begin.end() + _PEM_MAX_CHARS)
        following = text.find("-----BEGIN", begin.end(), limit)
        if following != -1:
            limit = following
        end = -1
        at = text.find("-----END", begin.end(), limit)
        while at != -1 and end == -1:
            closing = _PEM_END.match(text, at, limit)
            if closing is not None:
                end = closing.end()
            at = text.find("-----END", at + 1, limit)
        if end == -1:
            body = _PEM_BODY.match(text, begin.end())
            end = begin.end() if body is None else body.end()
        spans.append((begin.start(), end, _REDACTED_KEY))
    return spans


def _sub(pattern: re.Pattern[str], replacement: str, text: str) -> str:
    redacted, count = pattern.subn(replacement, text)
    return text if count == 0 else redacted


def _apply(text: str, spans: list[Span]) -> str:
    """``text`` with each ``(start, end, replacement)`` applied; itself if none changes it."""
    pieces: list[str] = []
    done = 0
    for start, end, replacement in spans:
        if text[start:end] != replacement:
            pieces += (text[done:start], replacement)
            done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _kv_spans(text: str, *, unfiltered: bool = False) -> list[Span]:
    spans: list[Span] = []
    pos = 0
    for sep in _SEP_RE.finditer(text):
        at = sep.start()
        if at < pos:  # inside the value just redacted
            continue
        window_start = max(0, at - _KEY_MAX_CHARS)
        head = text[window_start:at].rstrip(" \t")
        quoted_key = head.endswith(('"', "'"))
        if quoted_key:
            head = head[:-2] if head.endswith(('\\"', "\\'")) else head[:-1]
        key = head[len(head.rstrip(_KEY_CHARS)) :]
        # Every sensitive key holds a key word (see _sensitive_keys): a cheap first test.
        if not (unfiltered or has_key_word(key.lower())):
            continue
        key_start = window_start + len(head) - len(key)
        if not is_sensitive_key(key) and not _query_key(text, key, key_start, text[at]):
            continue
        # "Authorization: Bearer x" quoted whole (nginx's debug log): the quote ends the value.
        wrapper = text[key_start - 1] if key_start and not quoted_key else ""
        span = _kv_value(text, key, key_start, text[at], sep.end(), wrapper)
        if span is not None:
            spans.append(span)
            pos = span[1]
    return spans


def _query_key(text: str, key: str, key_start: int, sep: str) -> bool:
    """Whether ``key`` is a URL query parameter (``?key=``, ``&key=``) that holds a secret."""
    return (
        sep == "=" and key_start > 0 and text[key_start - 1] in "?&" and key.lower() in _QUERY_KEYS
    )


def _pair_spans(text: str) -> list[Span]:
    """The value of each two-item tuple or list in ``text`` whose first item is a sensitive
    key: ``('password', 'x')`` becomes ``('password', '[REDACTED]')``; an authorization value
    keeps its scheme, as in ``Authorization: Basic [REDACTED]``."""
    spans: list[Span] = []
    for pair in _PAIR_RE.finditer(text):
        if spans and pair.start() < spans[-1][1]:
            continue
        key = pair.group("key")
        if not is_sensitive_key(key):
            continue
        value = _QUOTED[pair.group("vq")].match(text, pair.start("vq"))
        if value is None:
            continue
        close = value.end()
        while close < len(text) and text[close] in " \t":
            close += 1
        if not text.startswith(_CLOSERS[pair.group("open")], close):
            continue  # a longer sequence: ('token', 'x', 'y') is not a pair
        normalised = key.lower().replace("-", "").replace("_", "").replace(".", "")
        inner = _after_scheme(text, value.start() + 1, value.end() - 1, normalised)
        if value.end() - 1 > inner:
            spans.append((inner, value.end() - 1, REDACTED))
    return spans


def _kv_value(
    text: str, key: str, key_start: int, sep: str, start: int, wrapper: str
) -> Span | None:
    """Where the value of a sensitive key that starts at ``start`` is; None if it has none."""
    if start >= len(text) or text[start] in "\r\n":
        return None
    for already in _ALREADY:
        if text.startswith(already, start):
            return start, start + len(already), already
    # Only compared with _HEADER_KEYS and "authorization": case and separators matter not.
    normalised = key.lower().replace("-", "").replace("_", "").replace(".", "")
    first = text[start]
    if first == "b" and text.startswith(_BYTES_LITERALS, start):
        # {'password': b'x'}: the quotes after the prefix hold the value, as a str's do; taken
        # as a bare value, it would end at the quote after "b" and keep the secret.
        start += 1 if text[start + 1] in "'\"" else len("bytearray(b")
        first = text[start]
    if text.startswith(('\\"', "\\'"), start):  # JSON inside a JSON string: \"key\": \"v\"
        inner = start + 2
        close = text.find(text[start:inner], inner)
        end = close if close != -1 else _line_end(text, inner)
    elif first in "\"'":
        inner = start + 1
        quoted = _QUOTED[first].match(text, start)
        end = quoted.end() - 1 if quoted is not None else _line_end(text, inner)
    elif first in "{[":
        return start, _balanced_end(text, start), REDACTED
    elif first in "|>" and _BLOCK_SCALAR.match(text, start):
        return start, _block_end(text, key_start, start), REDACTED
    else:
        inner = _after_scheme(text, start, len(text), normalised)
        if normalised in _HEADER_KEYS and sep == ":":
            end = _line_end(text, inner)  # an HTTP header: the value is the rest of the line
            if wrapper in ('"', "'") and (close := text.find(wrapper, inner, end)) != -1:
                end = close
        else:
            # "X-Auth-Token: Bearer abc": an unquoted value ends at whitespace, so the scheme
            # alone would be taken for the value and the credential after it kept. Only an
            # authorization key keeps its scheme (above); any other loses scheme and credential.
            scheme = _AUTH_SCHEME.match(text, inner)
            bare = None if scheme is None else _BARE_VALUE.match(text, scheme.end())
            if bare is None:
                bare = _BARE_VALUE.match(text, inner)
            end = inner if bare is None else bare.end()
        return (inner, end, REDACTED) if end > inner else None
    inner = _after_scheme(text, inner, end, normalised)
    return (inner, end, REDACTED) if end > inner else None


def _after_scheme(text: str, start: int, end: int, normalised_key: str) -> int:
    """Past the auth scheme (``Bearer ``) of an authorization value: the scheme is kept."""
    if normalised_key.endswith("authorization"):
        scheme = _AUTH_SCHEME.match(text, start, end)
        if scheme is not None:
            return scheme.end()
    return start


def _line_end(text: str, start: int) -> int:
    """End of the line from ``start``; a literal ``\\n`` (text from a repr) ends it too."""
    rest = _LINE_REST.match(text, start)
    return start if rest is None else rest.end()


def _balanced_end(text: str, start: int) -> int:
    """End of the JSON/YAML-flow structure opening at ``start``; the line's end if unclosed."""
    depth = 0
    quote = ""
    index = start
    length = len(text)
    while index < length:
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return _line_end(text, start)


def _block_end(text: str, key_start: int, value_start: int) -> int:
    """End of a YAML block scalar: the lines that follow, indented deeper than the key."""
    column = key_start - (text.rfind("\n", 0, key_start) + 1)
    end = text.find("\n", value_start)
    while end != -1:
        next_end = text.find("\n", end + 1)
        line = text[end + 1 : len(text) if next_end == -1 else next_end]
        content = line.lstrip(" ")
        if content.strip() and len(line) - len(content) <= column:
            return end
        end = next_end
    return len(text)


#: Every pass, in the order :func:`scan` runs them behind its substring tests.
_PASSES: Final[tuple[Callable[[str], list[Span]], ...]] = (
    _pem_spans,
    _url_spans,
    _kv_spans_unfiltered,
    _pair_spans,
    _command_spans,
    _sql_spans,
    _bearer_spans,
    _aws_spans,
    _webhook_spans,
    _shape_spans,
)
