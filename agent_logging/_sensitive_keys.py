"""Which field, dict and text keys name a secret, so that their whole value is redacted.

Separate from ``_redact`` (values and records) and ``_secrets`` (text) because both use it:
``_secrets`` reads ``key=value`` pairs out of text and asks :func:`is_sensitive_key` about each
key, so the rules cannot live in ``_redact``, which imports ``_secrets``.

A key is split into lower-case words at separators and camelCase boundaries. Every rule looks
at the last word or the last two, so each sensitive key holds, as plain text, one of the words
:func:`has_key_word` tests for: the prefilter of key=value text can rely on it.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["KEY_ENDINGS", "has_key_word", "is_sensitive_key"]

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

#: How every key :func:`is_sensitive_key` accepts ends, lower-cased: a cheap first test.
KEY_ENDINGS: Final = (*_SUFFIXES, *_LAST_WORDS, *_COMPOUNDS, _EXACT)

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


def has_key_word(lowered: str) -> bool:
    """Whether lower-cased text holds a word every sensitive key contains (see the key rules).

    Args:
        lowered: text, lower-cased by the caller.

    Returns:
        False when no key in the text can be sensitive.
    """
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
