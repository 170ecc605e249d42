"""Redaction: secrets removed from messages, field values and exception text before a record
leaves the process.

``_redact`` walks a record and decides what is redacted; ``_sensitive_keys`` says which field,
dict and text keys name a secret (their whole value goes); ``_secrets`` finds secrets in text
(PEM keys, credentials in URLs, tokens of known shapes, ``key=value`` pairs).
"""
