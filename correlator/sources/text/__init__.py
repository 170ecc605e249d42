"""The ``text`` source (:data:`TEXT`): plain-text logs in the formats fleets already write,
and an operator's own.

One module per built-in format, each a pure reader of its records (:class:`TextFormat`):
``oslo`` (OpenStack's oslo.log, tracebacks folded), ``klog`` (Kubernetes), ``logfmt``
(go-logfmt, logrus), ``syslog`` (RFC 3164, RFC 5424, rsyslog's files), ``journald``
(``journalctl -o json``), ``python`` (``logging``), ``json`` (JSON lines: zap, zerolog,
logrus, ECS, pino, bunyan, python-json-logger); :data:`FORMATS` lists them. What a
record's fields say of identifiers and layers is decided by rules outside the formats
(``_rules``, the built-in ones in ``_known``, an operator's in a TOML file read by
``_rules_file``), so that a format stays a reading of its lines.
"""

from __future__ import annotations

from correlator.sources.text._format import Parsed, TextFormat
from correlator.sources.text._formats import FORMATS
from correlator.sources.text._source import TEXT

__all__ = ["FORMATS", "TEXT", "Parsed", "TextFormat"]
