"""Which field, dict and text keys name a secret, so that their whole value is redacted.

Separate from ``_redact`` (values and records) and ``_secrets`` (text) because both use it:
``_secrets`` reads ``key=value`` pairs out of text and asks :func:`is_sensitive_key` about each
key, so the rules cannot live in ``_redact``, which imports ``_secrets``.

A key is split into lower-case words at separators and camelCase boundaries. Two rules:

- the last word names a secret (``db_password``, ``clientSecret``, ``X-Api-Key``), once
  trailing words that only say which copy of the secret it is are dropped
  (``password_confirmation``, ``passwordRepeat``, ``api_key_new``, ``PASSWORD_2``), and
  trailing digits too (``password2``). A secret word followed by any other word describes
  something else (``token_count``, ``secret_name``, ``session_timeout``);
- a password word (``password``, ``passwd``, ``passphrase``) names a secret wherever it
  stands (``PASSWORD_DB``, ``password_for_admin``), unless a later word says the key is
  about the password rather than the password (``password_policy``, ``password_min_length``,
  ``password_expires_at``). Password words are singled out because, unlike ``token`` or
  ``key``, they are rarely used for anything but the secret; an unknown word after one fails
  closed.

Each sensitive key therefore holds, as plain text, one of the words :func:`has_key_word`
tests for: the prefilters of key=value text can rely on it.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["has_key_word", "is_sensitive_key"]

#: A key is sensitive when its last word ends with one of these (pgpassword, clientsecret) ...
_SUFFIXES: Final = (
    "password", "passwd", "passphrase", "passcode", "secret", "token", "apikey", "accesskey",
    "privatekey", "secretkey", "signingkey", "encryptionkey", "hmackey", "masterkey", "tlskey",
    "authkey", "privkey", "sessionid", "sessid", "authorization", "cookie", "cookies",
    "credential", "credentials", "creds", "signature",
    "storepass", "keypass",  # keytool's -storepass/-keypass, -srcstorepass, -destkeypass
)  # fmt: skip
#: ... or is one of these (too short to be safe as suffixes: bypass, oldpwd) ...
_LAST_WORDS: Final = frozenset({"auth", "pass", "pwd", "sig", "jwt"})
#: ... or it is one of these last words after a word ending as listed (api_key, XApiKey) ...
_COMPOUNDS: Final = {
    "key": (
        "api", "access", "private", "secret", "signing", "encryption", "hmac", "master", "tls",
        "account", "client", "ssh",  # Azure's AccountKey, a TLS client's key, ssh_key
        "auth", "priv", "service",  # auth_key, priv_key, PagerDuty's service_key
    ),
    "id": ("session",),
    "phrase": ("pass",),
    "data": ("key",),  # kubeconfig's client-key-data
    "bearer": ("oauth", "oauth2"),  # curl's --oauth2-bearer
}  # fmt: skip
#: ... or it is the single word ``session``.
_EXACT: Final = "session"

#: Trailing words dropped before the rules above: they say which copy of a secret the key
#: holds (a form's confirmation field, a rotation's new value, an encoding), not what it is.
_COPY_WORDS: Final = frozenset(
    {
        "confirm", "confirmation", "confirmed", "again", "repeat", "repeated", "retype",
        "retyped", "reenter", "reentered", "verify", "verification", "new", "old", "current",
        "previous", "prev", "orig", "original", "plain", "plaintext", "cleartext", "raw",
        "value", "val", "input", "hash", "hashed", "encrypted", "enc", "encoded", "b64",
        "base64", "pem", "der",
        "base",  # Rails' SECRET_KEY_BASE: the secret its keys are derived from
    }
)  # fmt: skip
#: A word ending with one of these names a password wherever it stands in the key ...
_PASSWORD_WORDS: Final = ("password", "passwords", "passwd", "passphrase", "passphrases")
#: ... unless a later word is one of these: the key describes the password, it is not one.
_ABOUT_WORDS: Final = frozenset(
    {
        "policy", "policies", "length", "len", "min", "max", "minimum", "maximum", "strength",
        "score", "complexity", "rule", "rules", "requirement", "requirements", "required",
        "expiry", "expires", "expired", "expiration", "age", "changed", "updated", "last",
        "reset", "enabled", "disabled", "protected", "authentication", "login", "grant",
        "label", "prompt", "file", "path", "dir", "command", "cmd", "manager", "valid",
        "invalid", "validation", "match", "matches", "mismatch", "attempt", "attempts",
        "failure", "failures", "failed", "retries", "set", "count", "error", "errors", "type",
        "mode", "method",
        "stdin",  # docker login --password-stdin: a flag saying where the password comes from
    }
)  # fmt: skip
_DIGITS: Final = "0123456789"

_CAMEL_BOUNDARY: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM: Final = re.compile(r"[^a-z0-9]+")
_KEY_CACHE: dict[str, bool] = {}
_KEY_CACHE_SIZE: Final = 4096


def _key_words(key: str) -> list[str]:
    return [word for word in _NON_ALNUM.split(_CAMEL_BOUNDARY.sub("_", key).lower()) if word]


def _names_a_secret(words: list[str]) -> bool:
    """The two rules of the module docstring, on a key's lower-case words."""
    end = len(words)
    while end > 1 and (words[end - 1] in _COPY_WORDS or words[end - 1].isdigit()):
        end -= 1
    if end == 0:
        return False
    last = words[end - 1].rstrip(_DIGITS)
    if (
        last.endswith(_SUFFIXES)
        or last in _LAST_WORDS
        or (end > 1 and words[end - 2].endswith(_COMPOUNDS.get(last, ())))
        or (end == 1 and last == _EXACT)
    ):
        return True
    for index, word in enumerate(words):
        if word.rstrip(_DIGITS).endswith(_PASSWORD_WORDS):
            return _ABOUT_WORDS.isdisjoint(words[index + 1 :])
    return False


def is_sensitive_key(key: str) -> bool:
    """Whether a field or dict key names a secret, so that its value is always redacted.

    Case, camelCase and ``-``/``_``/``.`` separators do not matter (``X-Api-Key``,
    ``apiKey``, ``API_KEY``). Sensitive: ``password``, ``db_password``, ``PGPASSWORD``,
    ``client_secret``, ``access_token``, ``api_key``, ``aws_secret_access_key``,
    ``private_key``, ``authorization``, ``set-cookie``, ``session``, ``sessionid``,
    ``credentials``, ``ansible_become_pass``, ``pwd``, ``auth`` (docker's config.json),
    ``client-key-data`` (kubeconfig), ``AccountKey`` (Azure), ``client_key``, ``ssh_key``,
    ``private_key_pem``, ``jwt``, ``password_confirmation``, ``passwordConfirm``,
    ``password2``, ``PASSWORD_DB``, ``api_key_new``, ``SECRET_KEY``, ``SECRET_KEY_BASE``,
    ``encryption_key``, ``auth_key``, ``storepass`` (keytool), ``passcode``. Not sensitive:
    ``task``, ``token_count``, ``max_tokens``, ``tokenizer``, ``key_id``, ``cache_key``,
    ``idempotency_key``, ``passed``, ``bypass``, ``oldpwd``, ``secretary``, ``secret_name``,
    ``password_policy``, ``password_min_length``, ``session_timeout``, ``password_stdin``.

    Args:
        key: the key as written.

    Returns:
        True when values under this key are secrets.
    """
    cached = _KEY_CACHE.get(key)
    if cached is not None:
        return cached
    sensitive = _names_a_secret(_key_words(key))
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
        or "jwt" in lowered
    )
