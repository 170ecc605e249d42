"""Redaction of secrets in messages, field values and exception text, before rendering.

DESIGN §4: authorization headers, passwords, tokens, private keys and cookies never leave the
process. Two mechanisms, both conservative about what they keep:

- by key: a field, dict key or ``key=value``/``key: value``/``"key": "value"`` pair in text
  whose key names a secret (:func:`is_sensitive_key`) loses its whole value;
- by shape: PEM private keys, credentials in URLs, JWTs, AWS access key ids, GitHub, GitLab,
  Slack and Stripe tokens, and ``Bearer <token>`` are recognised wherever they appear.

What is kept is what makes the line useful: the key, the auth scheme, the URL's user and host.

It runs on every log call (the whole call has ~5 µs), so it is built around a prefilter: a
string is scanned only if it contains a trigger (``:``, ``=`` or one of a few token prefixes),
clean strings up to 256 characters are remembered, which fields to look at is worked out once
per record shape, and the identifier fields, validated when they were bound, are skipped.
Measured with ``python -m timeit`` on the 2-core development VM (noisy; best of 9), for a
record of a 60-character event, five identifiers and four small extra fields: 1.1 µs when its
strings were seen before, 2.7 µs when the event and a path are new on every call, against
0.56-1.3 µs for ``orjson.dumps`` of the same record in the same runs. A new 60-character
string without a trigger costs ~0.4 µs, one with ``:`` or ``=`` ~1.1 µs, one holding a
secret ~10 µs.

Known limits (a log line is text, not a parsed document): a value is cut at whitespace or
``& , ;`` unless quoted, so an unquoted password holding those characters is redacted only up
to them; ``token: expired`` loses ``expired``; ``Bearer`` outside a header is redacted only when
followed by at least 16 token characters, so ``Bearer of bad news`` is kept; ``--password
hunter2`` (space, no ``=``) and XML elements are not recognised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from agent_logging._types import CONTEXT_KEYS, EventDict

__all__ = ["REDACTED", "is_sensitive_key", "redact", "redact_text", "redact_value"]

#: What a secret is replaced with.
REDACTED: Final = "[REDACTED]"

#: What a whole PEM private key block is replaced with.
_REDACTED_KEY: Final = "[REDACTED PRIVATE KEY]"

#: Keys whose values are never looked at: set by the library, or identifiers validated when
#: bound (DESIGN §3). ``event`` is deliberately absent: it is the caller's free text.
_SKIP_KEYS: Final = frozenset({"ts", "level", "service", "layer", "env", *CONTEXT_KEYS})

#: Value types that cannot hold text.
_SCALARS: Final = frozenset({int, float, bool})

#: Deeper containers are replaced whole: fail closed, and cycles end.
_MAX_DEPTH: Final = 32

# --- keys -----------------------------------------------------------------------------------

# A key is split into lower-case words at separators and camelCase boundaries. Every rule
# looks at the last word or the last two, so each sensitive key holds, as plain text, one of
# the words _has_key_word() tests for: the prefilter of key=value text can rely on it.

#: A key is sensitive when its last word ends with one of these (pgpassword, clientsecret) ...
_SUFFIXES: Final = (
    "password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey",
    "privatekey", "secretkey", "signingkey", "encryptionkey", "hmackey", "masterkey", "tlskey",
    "sessionid", "sessid", "authorization", "cookie", "cookies", "credential", "credentials",
    "creds", "signature",
)  # fmt: skip
#: ... or is one of these (too short to be safe as suffixes: bypass, oldpwd) ...
_LAST_WORDS: Final = frozenset({"auth", "pass", "pwd", "sig"})
#: ... or it is one of these last words after a word ending as listed (api_key, XApiKey) ...
_COMPOUNDS: Final = {
    "key": (
        "api", "access", "private", "secret", "signing", "encryption", "hmac", "master", "tls",
    ),
    "id": ("session",),
    "phrase": ("pass",),
    "data": ("key",),  # kubeconfig's client-key-data
}  # fmt: skip
#: ... or it is the single word ``session``.
_EXACT: Final = "session"
#: Keys whose value in an HTTP header dump (``Name: value``) runs to the end of the line.
_HEADER_KEYS: Final = frozenset(
    {"authorization", "proxyauthorization", "cookie", "cookies", "setcookie"}
)

_CAMEL_BOUNDARY: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM: Final = re.compile(r"[^a-z0-9]+")
_KEY_CACHE: dict[str, bool] = {}
_KEY_CACHE_SIZE: Final = 4096


def _key_words(key: str) -> list[str]:
    return [word for word in _NON_ALNUM.split(_CAMEL_BOUNDARY.sub("_", key).lower()) if word]


def is_sensitive_key(key: str) -> bool:
    """Whether a field or dict key names a secret, so that its value is always redacted.

    Case, camelCase and ``-``/``_``/``.`` separators do not matter (``X-Api-Key``,
    ``apiKey``, ``API_KEY``). Sensitive: ``password``, ``db_password``, ``PGPASSWORD``,
    ``client_secret``, ``access_token``, ``api_key``, ``aws_secret_access_key``,
    ``private_key``, ``authorization``, ``set-cookie``, ``session``, ``sessionid``,
    ``credentials``, ``ansible_become_pass``, ``pwd``, ``auth`` (docker's config.json),
    ``client-key-data`` (kubeconfig). Not sensitive: ``task``,
    ``token_count``, ``max_tokens``, ``tokenizer``, ``key_id``, ``cache_key``,
    ``idempotency_key``, ``passed``, ``bypass``, ``secretary``, ``secret_name``,
    ``password_policy``, ``session_timeout``.

    Args:
        key: the key as written.

    Returns:
        True when values under this key are secrets.
    """
    cached = _KEY_CACHE.get(key)
    if cached is not None:
        return cached
    words = _key_words(key)
    sensitive = bool(words) and (
        words[-1].endswith(_SUFFIXES)
        or words[-1] in _LAST_WORDS
        or (len(words) > 1 and words[-2].endswith(_COMPOUNDS.get(words[-1], ())))
        or words == [_EXACT]
    )
    if len(_KEY_CACHE) >= _KEY_CACHE_SIZE:
        _KEY_CACHE.clear()  # keys can be caller data: bound the memory, not the hit rate
    _KEY_CACHE[key] = sensitive
    return sensitive


# --- text -----------------------------------------------------------------------------------
#
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
# backwards from it. ':' before ':' or '//' is a path or a scheme, '==' a comparison.
_SEP_RE: Final = re.compile(r"(?:=>|=(?!=)|:(?!:|//))[ \t]*")
_KEY_CHARS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_KEY_MAX_CHARS: Final = 128
# How every key is_sensitive_key() accepts ends, lower-cased: a cheap first test.
_KEY_ENDINGS: Final = (*_SUFFIXES, *_LAST_WORDS, *_COMPOUNDS, _EXACT)
_BEARER_RE: Final = re.compile(
    r"[Bb](?<![A-Za-z0-9_-][Bb])earer[ \t]+(?P<token>[A-Za-z0-9._~+/-]{16,}+=*+)"
)
_SHAPES_RE: Final = re.compile(
    # JWT: JWS, or JWE's five parts
    r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{10,}+\.[A-Za-z0-9_-]{2,}+\.[A-Za-z0-9_-]*+"
    r"(?:\.[A-Za-z0-9_-]*+\.[A-Za-z0-9_-]*+)?"
    r"|AKIA(?<![A-Za-z0-9]AKIA)[A-Z0-9]{16}(?![A-Za-z0-9])"  # AWS access key ids
    r"|ASIA(?<![A-Za-z0-9]ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{36,}+"  # GitHub
    r"|github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}+"
    r"|gl(?<![A-Za-z0-9_-]gl)(?:pat|ptt|dt|rt|cbt|soat)-[A-Za-z0-9_-]{20,}+"  # GitLab
    r"|xox(?<![A-Za-z0-9_-]xox)[abposre]-[A-Za-z0-9-]{10,}+"  # Slack
    r"|sk_(?<![A-Za-z0-9_]sk_)(?:live|test)_[A-Za-z0-9]{16,}+"  # Stripe secret keys
    r"|rk_(?<![A-Za-z0-9_]rk_)(?:live|test)_[A-Za-z0-9]{16,}+"  # and restricted keys
)
_BARE_VALUE: Final = re.compile(r"[^\s\"'&,;]+")
_QUOTED: Final = {q: re.compile(rf"{q}(?:[^{q}\\]|\\.)*{q}", re.DOTALL) for q in "\"'"}
_LINE_REST: Final = re.compile(r"(?:[^\r\n\\]|\\(?![rn]))*")
_BLOCK_SCALAR: Final = re.compile(r"[|>][-+0-9]*[ \t]*(?=\r?\n)")
# IANA HTTP authentication scheme registry, plus the non-registered ones in common use.
_AUTH_SCHEME: Final = re.compile(
    r"(?i:basic|bearer|digest|dpop|gnap|hoba|mutual|negotiate|ntlm|oauth|privatetoken|"
    r"scram-sha-1|scram-sha-256|vapid|aws4-hmac-sha256|token|bot|apikey|sso-key)[ \t]+(?=\S)"
)
_ALREADY: Final = (_REDACTED_KEY, REDACTED)

_CLEAN: dict[str, None] = {}
_CLEAN_MAX_CHARS: Final = 256
_CLEAN_SIZE: Final = 4096
_PLANS: dict[tuple[Any, ...], tuple[tuple[Any, bool], ...]] = {}
_PLANS_SIZE: Final = 1024

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
    short = len(text) <= _CLEAN_MAX_CHARS
    if short and text in _CLEAN:
        return text
    redacted = _scan(text)
    if short and redacted is text:
        _remember_clean(text)
    return redacted


def _remember_clean(text: str) -> None:
    if len(_CLEAN) >= _CLEAN_SIZE:
        _CLEAN.clear()  # dynamic messages would grow it forever: bound it, keep it simple
    _CLEAN[text] = None


def _scan(text: str) -> str:
    """The passes, each behind the substring tests its pattern cannot match without.

    Each longer needle sits behind a single character it holds (``V`` of PRIVATE KEY, ``J``
    of eyJ): ``in`` finds one character with memchr, several times faster than a needle of
    two or more, and most clean text fails those.
    """
    dash = "-" in text
    colon = ":" in text
    if dash and "V" in text and "PRIVATE KEY" in text:
        text = _pem_pass(text)
    if colon and "@" in text and "://" in text:
        text = _url_pass(text)
    if (colon or "=" in text) and _has_key_word(text.lower()):
        text = _apply(text, _kv_spans(text))
    if "earer" in text:
        text = _bearer_pass(text)
    if (
        ("J" in text and "eyJ" in text)
        or ("I" in text and "IA" in text)
        or (
            "_" in text
            and ("gh" in text or "_pat_" in text or "k_live_" in text or "k_test_" in text)
        )
        or (dash and (("x" in text and "xox" in text) or "gl" in text))
    ):
        text = _sub(_SHAPES_RE, REDACTED, text)
    return text


def _scan_unfiltered(text: str) -> str:
    """:func:`_scan` without its substring tests, for tests that check those tests."""
    text = _url_pass(_pem_pass(text))
    text = _apply(text, _kv_spans(text, unfiltered=True))
    return _sub(_SHAPES_RE, REDACTED, _bearer_pass(text))


def _pem_pass(text: str) -> str:
    return _apply(text, _pem_spans(text))


def _url_pass(text: str) -> str:
    return _apply(text, [(m.start("pw"), m.end("pw"), REDACTED) for m in _URL_RE.finditer(text)])


def _bearer_pass(text: str) -> str:
    spans = [(m.start("token"), m.end(), REDACTED) for m in _BEARER_RE.finditer(text)]
    return _apply(text, spans)


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


def _has_key_word(lowered: str) -> bool:
    """Whether lower-cased text holds a word every sensitive key contains (see the key rules)."""
    return (
        "pass" in lowered
        or "pwd" in lowered
        or "secret" in lowered
        or "token" in lowered
        or "key" in lowered
        or "auth" in lowered
        or "cookie" in lowered
        or "cred" in lowered
        or "sess" in lowered
        or "sig" in lowered
    )


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
        if not (unfiltered or key.lower().rstrip("_.-").endswith(_KEY_ENDINGS)):
            continue
        if not is_sensitive_key(key):
            continue
        key_start = window_start + len(head) - len(key)
        # "Authorization: Bearer x" quoted whole (nginx's debug log): the quote ends the value.
        wrapper = text[key_start - 1] if key_start and not quoted_key else ""
        span = _kv_value(text, key, key_start, text[at], sep.end(), wrapper)
        if span is not None:
            spans.append(span)
            pos = span[1]
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


# --- values and records ---------------------------------------------------------------------


def redact_value(value: object) -> object:
    """``value`` with secrets redacted, recursively through dicts, lists and tuples.

    Under a sensitive key (:func:`is_sensitive_key`) the whole value becomes
    :data:`REDACTED`, whatever it is; strings (and UTF-8 bytes) go through
    :func:`redact_text`; other objects are returned as they are. Containers nested deeper
    than 32 levels are replaced whole (this also ends cycles).

    Args:
        value: any object; it is never mutated.

    Returns:
        ``value`` itself when nothing changed, else a copy (a plain dict, list or tuple;
        namedtuples keep their type).
    """
    return _redact_value(value, 0)


def _redacted(value: object) -> object:
    """:data:`REDACTED`, or ``value`` itself when it already is that text (idempotence)."""
    return value if type(value) is str and value == REDACTED else REDACTED


def _redact_value(value: object, depth: int) -> object:
    if type(value) is str:
        return redact_text(value)
    if value is None or type(value) in _SCALARS:
        return value
    if depth >= _MAX_DEPTH and isinstance(value, dict | list | tuple):
        return REDACTED
    if isinstance(value, dict):
        return _redact_dict(value, depth)
    if isinstance(value, list | tuple):
        return _redact_sequence(value, depth)
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, bytes):
        text = value.decode("utf-8", "surrogateescape")
        redacted = redact_text(text)
        return value if redacted is text else redacted.encode("utf-8", "surrogateescape")
    return value


def _redact_dict(value: dict[Any, Any], depth: int) -> object:
    copy: dict[Any, Any] | None = None
    for key, item in value.items():
        if isinstance(key, str) and is_sensitive_key(key):
            new = _redacted(item)
        else:
            new = _redact_value(item, depth + 1)
        if new is not item:
            if copy is None:
                copy = dict(value)
            copy[key] = new
    return value if copy is None else copy


def _redact_sequence(value: list[Any] | tuple[Any, ...], depth: int) -> object:
    items: list[Any] | None = None
    for index, item in enumerate(value):
        new = _redact_value(item, depth + 1)
        if new is not item:
            if items is None:
                items = list(value)
            items[index] = new
    if items is None:
        return value
    if isinstance(value, list):
        return items
    make: Callable[[list[Any]], object] | None = getattr(type(value), "_make", None)
    return make(items) if make is not None else tuple(items)


def _plan(keys: tuple[Any, ...]) -> tuple[tuple[Any, bool], ...]:
    """The fields of a record shape to look at, and whether each is a secret's."""
    plan = tuple(
        (key, isinstance(key, str) and is_sensitive_key(key))
        for key in keys
        if key not in _SKIP_KEYS
    )
    if len(_PLANS) >= _PLANS_SIZE:
        _PLANS.clear()
    _PLANS[keys] = plan
    return plan


def redact(logger: object, method_name: str, event_dict: EventDict) -> EventDict:
    """structlog processor: redact the record in place; it must run last before rendering.

    Looks at every field except ``ts``, ``level``, ``service``, ``layer``, ``env`` and the
    identifiers, including ``event``, the nested ``error`` dict (message, chain, stack) and a
    pre-formatted ``exception``/``stack`` string.

    Args:
        logger: unused (structlog's processor signature).
        method_name: unused.
        event_dict: the record; it belongs to the pipeline, so it is edited in place.

    Returns:
        ``event_dict``.
    """
    # A call site logs the same keys every time: which fields to look at, and which are
    # secrets, is worked out once per record shape rather than once per field per call.
    keys = tuple(event_dict)
    plan = _PLANS.get(keys)
    if plan is None:
        plan = _plan(keys)
    for key, sensitive in plan:
        value = event_dict[key]
        if sensitive:
            if not (type(value) is str and value == REDACTED):
                event_dict[key] = REDACTED
        elif type(value) is str:
            # redact_text(), inlined: this is the common case on the hot path.
            size = len(value)
            if size < 5 or (size <= _CLEAN_MAX_CHARS and value in _CLEAN):
                continue
            text = _scan(value)
            if text is not value:
                event_dict[key] = text
            elif size <= _CLEAN_MAX_CHARS:
                _remember_clean(value)
        elif value is not None and type(value) not in _SCALARS:
            new = _redact_value(value, 0)
            if new is not value:
                event_dict[key] = new
    return event_dict
