"""The ``text`` source: plain-text logs in a built-in format or an operator's own, as
:data:`TEXT`, and its parser :func:`parse`.

Lines are grouped into records by the format (``_records``), each record is read by it
(``read(text, zone)``), and made an event (``_event``); a record the format cannot read is a
reject whose reason is the format's, naming the line and the format. ``--format auto`` (the
default) chooses the format of each input from its first lines (``_choose``), and the ingest
says what it chose.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, tzinfo
from functools import partial
from typing import Any, Final

from correlator import _environ
from correlator.errors import QueryError
from correlator.model import LAYERS, Event, Reject
from correlator.sources._lines import excerpt, hasher
from correlator.sources._row_columns import row_columns
from correlator.sources._source import Option, Source, read_zone
from correlator.sources.text._batch import mapped_natively, text_table
from correlator.sources.text._choose import HEAD_LINES, choose, described
from correlator.sources.text._event import SOURCE, Maker, origin_service
from correlator.sources.text._format import Parsed, TextFormat
from correlator.sources.text._formats import FORMATS
from correlator.sources.text._known import rules_for
from correlator.sources.text._records import Orphan, record_start, records
from correlator.sources.text._rules import IdRules
from correlator.sources.text._rules_file import TextRules, read_rules

__all__ = ["AUTO", "TEXT", "formats_of", "parse", "settle"]

#: The ``--format`` that chooses per input.
AUTO: Final = "auto"
_NO_RULES: Final = TextRules()


def formats_of(rules: TextRules | None) -> dict[str, TextFormat]:
    """Every format an ingest may name: the operator's first, then the built-in ones."""
    if rules is None or not rules.formats:
        return FORMATS
    return {**rules.formats, **FORMATS}


def _format(name: str, rules: TextRules | None) -> TextFormat:
    known = formats_of(rules)
    chosen = known.get(name)
    if chosen is None:
        raise QueryError(f"unknown --format {name!r}; use auto or one of {', '.join(known)}")
    return chosen


def parse(
    lines: Iterable[bytes],
    origin: str,
    *,
    text_format: str = AUTO,
    layer: str | None = None,
    service: str | None = None,
    zone: tzinfo = UTC,
    rules: TextRules | None = None,
    start_line: int = 1,
) -> Iterator[Event | Reject]:
    """Read plain-text log lines into events (the module and ``_event`` say how).

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file (its name gives the service of records that name none), or
            ``stdin``/``http``.
        text_format: a format's name, or ``auto`` to choose from the first lines.
        layer: the layer of records no operator's rule places (None: the built-in names
            place them, or they are rejected).
        service: the service of every record (None: the record's, else the file's name).
        zone: the zone of times written without one.
        rules: the operator's rules file, read.
        start_line: the number of the first line.

    Yields:
        An event per record, a reject per record or line that cannot be read.

    Raises:
        QueryError: ``text_format`` names no format (checked before any line is read).
    """
    rules = rules or _NO_RULES
    iterator = iter(lines)
    if text_format == AUTO:
        head = list(itertools.islice(iterator, HEAD_LINES))
        known = formats_of(rules)
        choice = choose(head, known.values(), zone)
        iterator = itertools.chain(head, iterator)
        if choice[0] is None:
            yield from _unread(iterator, origin, start_line, described(choice, known))
            return
        chosen = choice[0]
    else:
        chosen = _format(text_format, rules)
    identifiers = rules.identifiers + (rules_for(chosen.name) if rules.builtin else ())
    maker = Maker(
        chosen.name,
        IdRules([rule for rule in identifiers if not rule.formats or chosen.name in rule.formats]),
        rules.layers,
        layer,
        rules.builtin,
        service,
        origin_service(origin),
    )
    base = hasher(SOURCE)
    read = chosen.read
    name = chosen.name
    for item in records(iterator, chosen.starts, start_line):
        if isinstance(item, Orphan):
            yield Reject(
                SOURCE,
                origin,
                item.line_no,
                f"line {item.line_no} {item.reason}",
                excerpt(item.raw),
            )
            continue
        text = item.text
        parsed = read(text, zone)
        reason: str | Event
        if isinstance(parsed, Parsed):
            state = base.copy()
            state.update(text.encode())
            reason = maker.event(
                parsed,
                text,
                int.from_bytes(state.digest(), "big", signed=True),
                origin,
                item.replaced,
            )
            if isinstance(reason, Event):
                yield reason
                continue
        else:
            reason = parsed
        yield Reject(
            SOURCE,
            origin,
            item.line_no,
            f"line {item.line_no} ({name}): {reason}",
            text[:200],
        )


def _unread(lines: Iterable[bytes], origin: str, start_line: int, reason: str) -> Iterator[Reject]:
    """Every non-blank line rejected for one reason (no format reads the input)."""
    for line_no, raw in enumerate(lines, start_line):
        if raw.strip():
            yield Reject(SOURCE, origin, line_no, f"line {line_no}: {reason}", excerpt(raw))


def settle(head: Sequence[bytes], values: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Settle ``--format auto`` for one input from its first lines, and say what was chosen.

    Raises:
        QueryError: a format named does not exist, or none reads any of the first lines.
    """
    settled = dict(values)
    rules = settled.get("rules")
    name = settled.get("text_format", AUTO)
    if name != AUTO:
        _format(name, rules)
        return settled, None
    known = formats_of(rules)
    choice = choose(head, known.values(), settled.get("zone") or UTC)
    if choice[0] is None:
        raise QueryError(described(choice, known))
    settled["text_format"] = choice[0].name
    return settled, described(choice, known)


def _cuts(values: Mapping[str, Any]) -> Callable[[bytes], bool]:
    """Where batches of an input's lines may be cut: before a line that starts a record of
    its format, settled (:func:`settle`) before.

    Raises:
        ValueError: the format is ``auto``: batches of one input are read in one format.
    """
    name = values.get("text_format", AUTO)
    if name == AUTO:
        raise ValueError("settle --format auto before cutting an input into batches")
    return record_start(_format(name, values.get("rules")).starts)


def _read_layer(where: str, text: str) -> str:
    if text not in LAYERS:
        raise QueryError(f"{where}: {text!r:.80} is not a layer; use one of {', '.join(LAYERS)}")
    return text


def _read_rules(where: str, text: str) -> TextRules:
    try:
        return read_rules(text, frozenset(FORMATS))
    except QueryError as exc:
        raise QueryError(f"{where}: {exc}") from None


def _read_service(where: str, text: str) -> str:
    if len(text) > 200 or not text.isprintable():
        raise QueryError(f"{where}: a service is up to 200 printable characters")
    return text


TEXT: Final = Source(
    SOURCE,
    "plain-text logs: oslo.log (OpenStack), klog (Kubernetes), logfmt, syslog (RFC 3164/5424), "
    "journald (journalctl -o json), Python logging, JSON of other logging libraries, or "
    "your own (--text-rules); --format auto (the default) chooses per file and says what",
    parse=parse,
    columns=partial(row_columns, parse),
    table=partial(text_table, parse),
    threads=mapped_natively,
    cuts=_cuts,
    options=(
        Option(
            "text_format",
            "--format",
            "with --source text: the format of the lines, auto (the default: chosen from "
            "each input's first lines) or one of " + ", ".join(FORMATS) + " or a format of "
            "--text-rules",
            what="is the format of text logs",
            metavar="FORMAT",
            query="format",
            query_help="With `source=text`: the format of the lines (`auto`, the default, "
            "chooses from the first lines; or " + ", ".join(f"`{n}`" for n in FORMATS) + ").",
            default=AUTO,
        ),
        Option(
            "layer",
            "--layer",
            "with --source text: the layer of records no layer rule places (default: placed "
            "by their service's name, e.g. nova-api in api, kubelet in node; others rejected)",
            what="is the layer of text logs",
            metavar="LAYER",
            query="layer",
            query_help="With `source=text`: the layer of records no layer rule places.",
            read=_read_layer,
        ),
        Option(
            "service",
            "--service",
            "with --source text: the service of every record (default: the record's own, "
            "else the file's name up to its first dot)",
            what="is the service of text logs",
            metavar="NAME",
            query="service",
            query_help="With `source=text`: the service of every record.",
            read=_read_service,
        ),
        Option(
            "zone",
            "--text-tz",
            "with --source text: time zone of times written without one: UTC, +01:00 or an "
            f"IANA name (default ${_environ.TEXT_TZ} or UTC)",
            what="is the zone of text logs",
            metavar="ZONE",
            query="tz",
            query_help="With `source=text` (as with nginx): the zone of times written without "
            f"one; default the service's {_environ.TEXT_TZ}, else UTC.",
            environ=(_environ.TEXT_TZ,),
            read=read_zone,
            default=UTC,
        ),
        Option(
            "rules",
            "--text-rules",
            "with --source text: a TOML file of your own formats, identifier rules and layer "
            f"rules (default ${_environ.TEXT_RULES}; docs/text-logs.md)",
            what="is the rules file of text logs",
            metavar="FILE",
            environ=(_environ.TEXT_RULES,),
            read=_read_rules,
        ),
    ),
    settle=settle,
    guess_values={"layer": "node"},
    join_advice="map a field or a pattern of the lines to an identifier: an [[identifiers]] "
    "rule in a --text-rules file (docs/text-logs.md), e.g. field = 'request_id', "
    "to = 'correlation_id'",
)
