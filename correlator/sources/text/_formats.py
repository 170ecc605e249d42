"""The built-in formats, :data:`FORMATS`, in the order ``--format auto`` prefers them on a tie:
the most particular first, the most lenient (logfmt reads any ``key=value`` line) last."""

from __future__ import annotations

from typing import Final

from correlator.sources.text._format import TextFormat
from correlator.sources.text.journald import JOURNALD
from correlator.sources.text.json import JSON
from correlator.sources.text.klog import KLOG
from correlator.sources.text.logfmt import LOGFMT
from correlator.sources.text.oslo import OSLO
from correlator.sources.text.python import PYTHON
from correlator.sources.text.syslog import SYSLOG

__all__ = ["FORMATS"]

#: The built-in formats, by the name ``--format`` gives them.
FORMATS: Final[dict[str, TextFormat]] = {
    declared.name: declared for declared in (OSLO, KLOG, JOURNALD, JSON, SYSLOG, PYTHON, LOGFMT)
}
