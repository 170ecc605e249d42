"""The built-in plain-text formats, each a pure reader of its records (:class:`TextFormat`),
and :data:`FORMATS`, which lists them.

One module per format: ``oslo`` (OpenStack's oslo.log, tracebacks folded), ``klog``
(Kubernetes), ``logfmt`` (go-logfmt, logrus), ``syslog`` (RFC 3164, RFC 5424, rsyslog's
files), ``journald`` (``journalctl -o json``), ``python`` (``logging``). A format reads time,
level, message and named fields; which of those fields are identifiers is decided by rules
outside the formats (issue 24 item 3).
"""

from __future__ import annotations

from typing import Final

from correlator.sources.text._format import Parsed, TextFormat
from correlator.sources.text.journald import JOURNALD
from correlator.sources.text.klog import KLOG
from correlator.sources.text.logfmt import LOGFMT
from correlator.sources.text.oslo import OSLO
from correlator.sources.text.python import PYTHON
from correlator.sources.text.syslog import SYSLOG

__all__ = ["FORMATS", "Parsed", "TextFormat"]

#: The built-in formats, by the name ``--format`` gives them.
FORMATS: Final[dict[str, TextFormat]] = {
    declared.name: declared for declared in (OSLO, KLOG, LOGFMT, SYSLOG, JOURNALD, PYTHON)
}
