"""A plain record's line, rendered from pieces kept between calls.

Nearly every log call carries the same envelope as the call before it: the service's fields,
the identifiers bound in this context and the active span's ids. The full path spreads them
into a fresh dict of some fifteen keys, hands that dict to redaction (which skips them) and
renders all of it. :class:`DirectLines` renders those fields once per change of what they
come from (the bound identifiers' mapping, OpenTelemetry's context, the level) and, per call,
only the time, the message and the call's own fields, then joins the pieces. Under a
long-lived binding (a node agent's task, a worker's job, a process's own identifiers) a
record costs about a fifth less. Rendering an envelope costs about 3 µs, so where each binding
logs few records it costs more: a binding with one record pays about 3 µs more, with three
records about 0.8 µs more per record, with ten about the same (``python -m
benchmarks.bindings``; figures in ``benchmarks/RESULTS.md``, seventh session).

It takes only *plain* records: the call's fields name nothing of the envelope, no identifier,
no exception and no owner layer (those go through their processors on the full path), no
user processor is configured, and every sink takes the line alone. What it renders is byte
for byte the full path's line (a property test pins it); whatever it cannot render that way
(an object orjson refuses, a line over the size limit) it hands back to the full path
untouched but for redaction, which is idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import orjson

from agent_logging._types import EventDict
from agent_logging.context import _context
from agent_logging.loki._record_encoder import STREAM_KEY_FIELDS, stream_key
from agent_logging.pipeline._processors import add_span_ids, current_context
from agent_logging.pipeline._render import MAX_LINE_BYTES, OPTIONS, fallback
from agent_logging.redaction._redact import redact
from agent_logging.schema import CONTEXT_KEYS, rfc3339_ns

__all__ = ["NOT_PLAIN", "DirectLines", "Envelope"]

#: How many recent envelopes are kept (see DirectLines._pieces).
_RECENT: Final = 4
#: Most level heads kept (one per level name; the table is emptied when full).
_MAX_HEADS: Final = 64

_dumps: Final = orjson.dumps

#: Call-site fields that make a record not plain: the envelope (``ts``, ``level``, the
#: service's), identifiers and span ids, what the error processor reads, what a stream key
#: depends on, and what rendering adds itself.
NOT_PLAIN: Final = frozenset(
    {
        "ts",
        "level",
        "service",
        "layer",
        "env",
        *CONTEXT_KEYS,
        *STREAM_KEY_FIELDS,
        "exc_info",
        "owner_layer",
        "rejected_ids",
        "truncated",
    }
)


class Envelope:
    """The rendered envelope for one (bound identifiers, OpenTelemetry context, level)."""

    __slots__ = ("_key", "bound", "context", "envelope", "head", "level", "middle", "tail")

    def __init__(
        self,
        bound: Mapping[str, str],
        context: object,
        level: str,
        fixed: Mapping[str, str],
        *,
        spans: bool,
    ) -> None:
        self.bound = bound
        self.context = context
        self.level = level
        # As the full path builds the record: the fixed fields, then the bound ones (a key of
        # both keeps its place and takes the bound value), then the span ids, in place when
        # the context bound them and after the call's fields otherwise.
        placed = {**fixed, **bound}
        after: EventDict = {}
        if spans:
            for key, value in add_span_ids(None, level, {}).items():
                if key in placed:
                    placed[key] = value
                else:
                    after[key] = value
        #: ``","level":"info","event":``, between the time and the message.
        self.head = _heads.get(level) or _head(level)
        #: ``,"service":...`` up to the call's fields.
        self.middle = b"," + _dumps(placed, default=fallback, option=OPTIONS)[1:-1]
        #: The span ids when they come after the call's fields, then the closing brace.
        self.tail = (
            b"," + _dumps(after, default=fallback, option=OPTIONS)[1:-1] + b"}" if after else b"}"
        )
        #: What the stream key depends on (worked out when a sink first asks for it).
        self.envelope = (placed, after)
        self._key = -1

    def key(self) -> int:
        """The stream key of every record with this envelope (``stream_key``)."""
        key = self._key
        if key < 0:
            placed, after = self.envelope
            key = self._key = stream_key({"level": self.level, **placed, **after})
        return key


# ``","level":"info","event":`` by level name.
_heads: dict[str, bytes] = {}


def _head(level: str) -> bytes:
    head = b'","level":' + _dumps(level) + b',"event":'
    if len(_heads) < _MAX_HEADS:
        _heads[level] = head
    return head


class DirectLines:
    """Renders plain records' lines from cached envelope pieces; see the module's docstring.

    Args:
        fixed: the fields every record carries before the bound identifiers (the pipeline's
            static fields and process-wide identifiers), all of them envelope fields.
        spans: whether OpenTelemetry is installed (span ids are added when a span is active).
    """

    def __init__(self, fixed: Mapping[str, str], *, spans: bool) -> None:
        if not NOT_PLAIN.issuperset(fixed):
            raise ValueError(f"not envelope fields: {sorted(set(fixed) - NOT_PLAIN)}")
        self._fixed: Final = dict(fixed)
        self._spans: Final = spans
        # The last record's pieces: one identity check on the common path. A stand-in no call
        # matches at first (its bound mapping is nobody's).
        self._last = Envelope(MappingProxyType({}), None, "", {}, spans=False)
        # The last few envelopes, for the records of concurrent requests (threads, tasks)
        # that take turns. A short list looked through is cheaper than a table: a table of
        # every envelope seen cost more to keep than it saved where each request logs a few
        # records (timed in benchmarks/RESULTS.md, seventh session).
        self._recent: list[Envelope] = []

    def line(self, level: str, ts_ns: int, fields: EventDict) -> tuple[bytes, Envelope] | None:
        """The line of a plain record and its envelope, or None for the full path.

        Args:
            level: the record's level name, as the full path renders it.
            ts_ns: its time.
            fields: the call's fields, ``event`` among them, none of :data:`NOT_PLAIN`
                (the caller checks). Redacted in place; consumed when a line is returned.

        Returns:
            ``(line, pieces)``, the stream key being ``pieces.key()``; None when only the
            full path renders this record, with ``fields`` as given apart from redaction.
        """
        bound = _context.current()
        context = current_context()
        pieces = self._last
        if bound is not pieces.bound or context is not pieces.context or level is not pieces.level:
            found = self._pieces(bound, context, level)
            if found is None:
                return None
            pieces = self._last = found
        redact(None, level, fields)
        event = fields.pop("event", None)
        try:
            message = _dumps(event, default=fallback, option=OPTIONS)
            own = _dumps(fields, default=fallback, option=OPTIONS) if fields else b""
        except (TypeError, orjson.JSONEncodeError):
            fields["event"] = event  # the full path renders what orjson refuses
            return None
        line = b"".join(
            (
                b'{"ts":"',
                rfc3339_ns(ts_ns).encode(),
                pieces.head,
                message,
                pieces.middle,
                b"," + own[1:-1] if own else b"",
                pieces.tail,
            )
        )
        if len(line) > MAX_LINE_BYTES:
            fields["event"] = event  # the full path shrinks it
            return None
        return line, pieces

    def _pieces(self, bound: Mapping[str, str], context: object, level: str) -> Envelope | None:
        recent = self._recent
        for pieces in recent:
            if pieces.bound is bound and pieces.context is context and pieces.level is level:
                return pieces
        try:
            pieces = Envelope(bound, context, level, self._fixed, spans=self._spans)
        except (TypeError, orjson.JSONEncodeError):
            return None
        # The newest first; one list replaced whole, so threads read it safely.
        self._recent = [pieces, *recent[: _RECENT - 1]]
        return pieces
