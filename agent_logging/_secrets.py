"""Secrets in text: PEM private keys, credentials in URLs, ``key=value`` pairs whose key names
a secret, ``Bearer`` tokens and tokens recognisable by their shape, each replaced in place.

Separate from ``_redact`` because this is the part that reads text: the patterns, their
prefilters and the clean-string cache, with a contract of its own (:func:`redact_text`: text
in, the same object out when nothing was redacted). ``_redact`` applies it to values and
records; which keys name a secret is ``_sensitive_keys``'s to say.

Recognised wherever they appear: PEM private keys, credentials in URLs, JWTs, AWS access key
ids, Google API keys, GitHub, GitLab, Slack and Stripe tokens, ``Bearer <token>``, the value of
a ``key=value``/``key: value``/``"key": "value"`` pair whose key is sensitive (a bytes literal,
``b'...'``, whole), the value of a ``key=`` URL query parameter (Google's API keys), and the
value of a two-item tuple or list written out as text, ``('password', 'x')`` or
``[(b'authorization', b'Basic ...')]`` (ASGI's and httpx's raw headers). What is kept is
what makes the line useful: the key, the auth scheme of an ``Authorization`` value, the URL's
user and host. The value of any other sensitive key is redacted whole, with the credential
that follows an auth scheme in it: ``X-Auth-Token: Bearer abc`` becomes
``X-Auth-Token: [REDACTED]``.

Cost: a string is scanned only if it contains a trigger (``:``, ``=`` or one of a few token
prefixes), and clean strings up to 256 characters are remembered. A new 60-character string
without a trigger costs ~0.4 µs, one with ``:`` or ``=`` ~1.1 µs, one holding a secret ~10 µs
(``python -m timeit`` on the 2-core development VM, best of 9).

Known limits (a log line is text, not a parsed document): a value is cut at whitespace or
``& , ;`` unless quoted (an auth scheme that starts it is taken with the word after it), so an
unquoted password holding those characters is redacted only up to them; ``token: expired``
loses ``expired``; ``Bearer`` outside a header is redacted only when followed by at least 16
token characters, so ``Bearer of bad news`` is kept; ``--password hunter2`` (space, no ``=``),
XML elements and a pair whose items are escaped quotes (``[\\"token\\", \\"x\\"]``, JSON
inside a JSON string) are not recognised.
"""

from __future__ import annotations

import re
from typing import Final

from agent_logging._sensitive_keys import has_key_word, is_sensitive_key

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
# backwards from it. ':' before ':' or '//' is a path or a scheme, '==' a comparison.
_SEP_RE: Final = re.compile(r"(?:=>|=(?!=)|:(?!:|//))[ \t]*")
_KEY_CHARS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
_KEY_MAX_CHARS: Final = 128
#: Keys whose value in an HTTP header dump (``Name: value``) runs to the end of the line.
_HEADER_KEYS: Final = frozenset(
    {"authorization", "proxyauthorization", "cookie", "cookies", "setcookie"}
)
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
    r"|AIza(?<![A-Za-z0-9_-]AIza)[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])"  # Google API keys
)
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
    r"scram-sha-1|scram-sha-256|vapid|aws4-hmac-sha256|token|bot|apikey|sso-key)[ \t]+(?=\S)"
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
    two or more, and most clean text fails those.

    Args:
        text: any text, not looked up in :data:`clean_texts`.

    Returns:
        The same object when nothing was redacted.
    """
    dash = "-" in text
    colon = ":" in text
    if dash and "V" in text and "PRIVATE KEY" in text:
        text = _pem_pass(text)
    if colon and "@" in text and "://" in text:
        text = _url_pass(text)
    pairs = "," in text and ("'" in text or '"' in text)
    if (colon or pairs or "=" in text) and has_key_word(text.lower()):
        text = _apply(text, _kv_spans(text))
        if pairs:
            text = _apply(text, _pair_spans(text))
    if "earer" in text:
        text = _bearer_pass(text)
    if (
        ("J" in text and "eyJ" in text)
        or ("I" in text and ("IA" in text or "AIza" in text))
        or (
            "_" in text
            and ("gh" in text or "_pat_" in text or "k_live_" in text or "k_test_" in text)
        )
        or (dash and (("x" in text and "xox" in text) or "gl" in text))
    ):
        text = _sub(_SHAPES_RE, REDACTED, text)
    return text


def scan_unfiltered(text: str) -> str:
    """:func:`scan` without its substring tests, for tests that check those tests.

    Args:
        text: any text.

    Returns:
        The same object when nothing was redacted.
    """
    text = _url_pass(_pem_pass(text))
    text = _apply(text, _kv_spans(text, unfiltered=True))
    text = _apply(text, _pair_spans(text))
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
