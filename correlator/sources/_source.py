"""What a source is, as one declaration: :class:`Source`, its :class:`Option` and its
:class:`Reader`.

Each source module declares its own :class:`Source` beside its parser, and the registry
(``correlator.sources``) lists them; the ``ingest`` command's options and help, the API's
accepted kinds and query parameters, its OpenAPI description, the guesser's candidates and
the evaluation's kinds are all read from these declarations, so that a new source is one
module and one line of the registry. This module is the vocabulary only: it imports no
source, so that every source can import it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from correlator.errors import QueryError
from correlator.model import Event, Reject
from correlator.sources._time import parse_zone

if TYPE_CHECKING:
    import pyarrow as pa

    from correlator.store import Store

__all__ = [
    "SETTLE_LINES",
    "AfterCommit",
    "Columns",
    "Cuts",
    "Option",
    "Parser",
    "Reader",
    "Settle",
    "Source",
    "Table",
    "read_zone",
]

Parser = Callable[..., Iterator[Event | Reject]]
"""``parse(lines, origin, **options) -> Iterator[Event | Reject]``: the row path.

``lines`` are raw lines without their trailing ``\\n`` (a ``\\r`` may remain), numbered from 1
by the parser; ``options`` are the values of the source's :attr:`Source.options`, by name. A
parser never raises on bad input: it yields a :class:`~correlator.model.Reject` naming the
line and what is wrong, and goes on with the next line.
"""

Columns = Callable[..., tuple[dict[str, list[Any]], list[Reject]]]
"""``columns(lines, origin, *, start_line, **options) -> (columns, rejects)``: the columnar
path, one list per column of the ``events`` table, without an :class:`Event` per line. It is
handed to worker processes, so it must be picklable: a module-level function, or a
``functools.partial`` of one."""

Table = Callable[..., tuple["pa.Table", list[Reject]]]
"""``table(lines, origin, *, start_line, **options) -> (table, rejects)``: the columnar path
straight into the ``events`` table's Arrow table (``_schema.events_table``'s schema, rows in
any order). Its heavy part runs without the GIL, so ingest runs it in threads, not worker
processes: no lines or tables cross a process boundary (unless the source's ``threads`` says
otherwise for an input's options). It must be picklable, as a ``columns`` path."""

Threads = Callable[[Mapping[str, Any]], bool]
"""``threads(values) -> bool``: whether a source's ``table`` path runs without the GIL for an
input read with these options (settled): the text formats the compiled module maps do, the
others are read by the Python parser, which worker processes run in parallel."""

Cuts = Callable[[Mapping[str, Any]], Callable[[bytes], bool]]
"""``cuts(values) -> cut``: for a source whose records may span lines (a traceback, an
nginx error message holding a newline), given its options' values, ``cut(line)`` says whether
``line`` starts a record whatever came before it, so that a batch of lines may begin there: no
record spans the cut, and each batch parsed alone gives what the whole input parsed at once
gives. It runs on a few lines a batch, where batches are cut."""

Settle = Callable[[Sequence[bytes], Mapping[str, Any]], tuple[dict[str, Any], str | None]]
"""``settle(head, values) -> (values, note)``: what a source decides from an input's first
lines before reading it (the ``text`` source's ``--format auto``), and what it says of that
(None: nothing); ``head`` is at most :data:`SETTLE_LINES` lines. It raises ``QueryError`` when
the input cannot be read with the values given."""

#: How many of an input's first lines :data:`Settle` is given.
SETTLE_LINES = 50

AfterCommit = Callable[["Store", int, int], object]
"""``after_commit(store, from_ns, to_ns)``: called once an input's events are committed, with
the time they cover (each event from its time less its ``duration_s`` to its time)."""


def _text(_where: str, text: str) -> str:
    return text


def read_zone(where: str, text: str) -> tzinfo:
    """An :attr:`Option.read` for a time zone (nginx's error-log times, text logs' local
    times: ``--nginx-tz``, ``--text-tz``, ``?tz=``, their variables).

    Args:
        where: what the message names (the option, the variable or the parameter).
        text: as ``_time.parse_zone`` reads it: ``UTC``, ``+01:00``, ``Europe/Berlin``.

    Raises:
        QueryError: the text names no zone; the message names ``where`` and the text.
    """
    try:
        return parse_zone(text)
    except ValueError as exc:
        raise QueryError(f"{where}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Option:
    """A setting of a source: an ``ingest`` option, and (with :attr:`query`) a query
    parameter of ``POST /v1/evidence``.

    Attributes:
        name: the keyword the parser (or the reader) takes the value as.
        flag: the ``ingest`` option (``--nginx-tz``).
        help: its ``--help`` text.
        what: what it is, completing "``--flag`` ...: use it with --source KIND" when it is
            given with another source (``is the zone of nginx error logs``).
        metavar: the ``--help`` placeholder of its value.
        query: the query parameter of ``POST /v1/evidence`` that gives it (``tz``), if any.
        query_help: that parameter's description in the OpenAPI schema.
        environ: variables read, first set first, when neither the option nor the parameter
            gives it (an empty one counts as unset); the service reads them when it starts.
        read: ``read(where, text)``: the value of a text, ``where`` naming the option, the
            parameter or the variable for its error message (raise ``QueryError``).
        default: the value when nothing gives it.
    """

    name: str
    flag: str
    help: str
    what: str
    metavar: str | None = None
    query: str | None = None
    query_help: str = ""
    environ: tuple[str, ...] = ()
    read: Callable[[str, str], Any] = _text
    default: Any = None

    @property
    def dest(self) -> str:
        """The attribute ``argparse`` keeps the option's text in."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True, slots=True)
class Reader:
    """How a source is read when it is not read from files or a request body.

    Attributes:
        read: ``read(**values) -> events and rejects``, ``values`` those of :attr:`options`
            by name; each batch it yields is committed on its own (a Loki that goes away on
            page 50 keeps the 49 before).
        options: its settings (``ingest`` options only: the API reads request bodies).
        when: the name of the option whose value chooses this reader over files (workflow's
            ``dsn``); None: the source is never read from files.
    """

    read: Callable[..., Iterable[Event | Reject]]
    options: tuple[Option, ...] = ()
    when: str | None = None


@dataclass(frozen=True, slots=True)
class Source:
    """One source of evidence, as the registry lists it.

    Attributes:
        name: the kind (``--source nginx``, ``?source=nginx``), stamped on its events.
        looks_like: what its input looks like, for ``ingest --help`` and ``/docs``.
        parse: its parser of lines (files, standard input, request bodies); None for a
            source that has none (``loki``).
        columns: its columnar parser, when it has one: ingests take it (and, for large files,
            worker processes run it).
        cuts: where batches of its lines may be cut, when a record may span lines (see
            :data:`Cuts`); None: every line is read alone.
        table: its path straight into an Arrow table, when it has one: ingests prefer it to
            ``columns`` (and, for large files, threads run it, or processes where
            ``threads`` says it holds the GIL).
        threads: for a ``table`` path, whether threads run it for an input's options
            (:data:`Threads`); None: always.
        options: the settings its parser takes as keywords (nginx's zone).
        reader: how it is read when not from lines (loki: a query; workflow: an audit table).
        settle: what to decide from each input's first lines before reading it (the text
            source's ``--format auto``); what it says is in the ingest's notes.
        after_commit: what to do once an input is committed (nginx links error lines to the
            access line of their request, across files).
        join_advice: what to set so that its lines carry identifiers, for the warning on
            lines without any.
        guessed: whether the guesser names it for lines another kind could not read (not
            ``agent``: ``ndjson`` reads the same lines, and is the general name).
        guess_values: the options the guesser gives its parser (text: a layer, so that a
            line counts for being read, wherever it would be placed).
    """

    name: str
    looks_like: str
    parse: Parser | None = None
    columns: Columns | None = None
    cuts: Cuts | None = None
    table: Table | None = None
    threads: Threads | None = None
    options: tuple[Option, ...] = ()
    reader: Reader | None = None
    settle: Settle | None = None
    after_commit: AfterCommit | None = None
    join_advice: str | None = None
    guessed: bool = True
    guess_values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def batched(self) -> bool:
        """Whether its lines can be parsed in batches (a ``table`` or ``columns`` path)."""
        return self.table is not None or self.columns is not None

    @property
    def reader_options(self) -> tuple[Option, ...]:
        """The options of its reader (none without one)."""
        return self.reader.options if self.reader is not None else ()

    def reader_for(self, given: Mapping[str, object]) -> Reader | None:
        """The reader to use rather than files, given the reader's option values by name."""
        reader = self.reader
        if reader is None or (reader.when is not None and given.get(reader.when) is None):
            return None
        return reader
