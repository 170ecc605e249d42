"""One incident's evidence pulled from Loki into the local store, hop by hop.

A fleet that has outgrown one machine keeps its evidence in Loki (DESIGN §2); pulling a whole
window of it into DuckDB before the first question takes minutes. Given one identifier, the
pull asks Loki for that identifier's entries only, stores them, runs the local expansion
(:mod:`correlator.graph`, as a timeline does) to learn which identifiers belong to the incident
now, and asks for those it has not asked for yet, until nothing new is found or a cap is
reached. The timeline is then the usual one, over the local store, with whatever evidence it
already held (nginx or PostgreSQL files, CR and job snapshots).

Each hop asks, inside the incident's window (the expansion's, clipped to the operator's):

- for the units of work found (``correlation_id``, ``allocation_id``, ``workflow_id``): every
  entry naming any of them, several values per query joined with ``or``::

      {service_name=~".+"} | allocation_id="a-9" or correlation_id="c-1"

- for places (``node_id``, ``node_instance_id``) and the expansion's other windowed parents:
  only their entries that name no other unit of work, since the entries naming the incident's
  own work are asked for above, and those naming another belong to a sibling (a busy node's
  other allocations, :meth:`correlator.graph.Parent.sibling_filters`)::

      {service_name=~".+"} | node_id="n-17" | correlation_id="" | allocation_id="" | workflow_id=""

  A structured-metadata key an entry does not carry compares equal to ``""`` in a LogQL label
  filter (checked against the real Loki in ``tests/test_real_loki_timeline.py``).

An entry names several of the incident's identifiers (an API record its request and its
allocation): a hop leaves out the entries of those an earlier hop pulled whole
(``| allocation_id!="a-9"``), so that each entry comes once. A hop's asks are one query when
they fit in one (its predicates joined with ``or``), since Loki reads every entry of the
selected streams in the window once per query (:func:`hop_queries`).

Loki's limits and manners: the client pages by time under ``max_entries_limit_per_query``
(``sources.loki.fetch``); a window longer than ``max_query_length`` (721 h by default) is
asked in pieces; a query's text is kept under :data:`MAX_QUERY_CHARS`, so that its URL passes
the 8 KiB request line of common proxies once percent-encoded; queries go one at a time; a 429
or a 500/502/503 is asked again after a growing, jittered pause; any other refusal is an error
that names the Loki setting its message points at (:data:`_SETTINGS`). Values are quoted by
:func:`correlator.logql.string_literal`, and a seed is checked as every identifier is
(``incident.check_seed``) before any query.

The store de-duplicates by content hash: asking twice stores nothing new.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from agent_logging.loki import LokiClient, LokiQueryError
from agent_logging.schema import rfc3339_ns
from correlator import incident, logql
from correlator.errors import QueryError, SourceError
from correlator.graph import PLACE_KEYS, WORK_KEYS, Expansion
from correlator.ingest import ingest_items
from correlator.model import IDENTIFIER_KEYS, Event, Reject
from correlator.queries import parse_duration_s, parse_time_ns
from correlator.store import Store

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_QUERY_LENGTH_S",
    "Ask",
    "Fetch",
    "Hop",
    "Pull",
    "PullLimits",
    "client_fetch",
    "hop_queries",
    "pull",
    "window",
]

Fetch = Callable[[str, int, int], Iterable[Event | Reject]]
"""``fetch(query, start_ns, end_ns)``: one LogQL log query over ``[start_ns, end_ns)`` as
events, paged by time (``sources.loki.fetch``); raises :class:`SourceError` when Loki fails."""

#: Characters of LogQL per query: 2,000 become at most ~6 KB once percent-encoded (a quote is
#: three), under the 8 KiB request line nginx and most proxies in front of a Loki accept.
MAX_QUERY_CHARS: Final = 2000
#: Loki's default ``max_query_length`` (``limits_config``, 721 h): a longer window is refused.
MAX_QUERY_LENGTH_S: Final = 721 * 3600.0
#: The window asked when the operator gives none, as ``ingest --source loki`` takes it.
DEFAULT_SINCE: Final = "1h"
_NS: Final = 1_000_000_000
#: Statuses asked again: Loki's query scheduler answers 429 when its queue is full, and a
#: 500/502/503 is a querier or gateway that went away. A 504 is Loki's query timeout: asked
#: again, the same query takes as long.
_RETRIED: Final = frozenset({429, 500, 502, 503})
_MAX_PAUSE_S: Final = 8.0
#: What Loki's refusals say, and the setting each comes from (``limits_config``). The first two
#: were read from the real Loki (v3.7); the others are worded as Loki's documentation of query
#: errors has them (``docs/sources/shared/troubleshoot-query.md``).
_SETTINGS: Final = (
    ("the query time range exceeds the limit", "max_query_length", "ask a shorter window"),
    (
        "max entries limit per query exceeded",
        "max_entries_limit_per_query",
        "the correlator pages with up to 5,000 entries a query, Loki's default",
    ),
    ("maximum number of series", "max_query_series", "narrow the stream selector"),
    ("request timed out", "query_timeout", "ask a shorter window or narrow the stream selector"),
    ("context deadline exceeded", "query_timeout", "ask a shorter window"),
)


class Ask(NamedTuple):
    """One identifier to ask Loki for.

    Attributes:
        key: its kind (one of ``IDENTIFIER_KEYS``).
        value: its value.
        unset: keys the entries asked for must not carry (``""`` in LogQL); empty: every entry
            naming it.
    """

    key: str
    value: str
    unset: tuple[str, ...] = ()


@dataclass(frozen=True)
class PullLimits:
    """What a pull allows itself, and what it takes Loki's limits to be.

    Attributes:
        max_hops: hops after the seed's own.
        max_queries: queries to Loki in all (a window asked in two pieces is two).
        max_query_chars: LogQL characters per query (several identifiers share one up to it).
        max_query_length_s: the longest window one query may ask (Loki's ``max_query_length``).
        retries: times a query answered 429 or 500/502/503 is asked again.
        backoff_s: the first pause before asking again; it doubles each time, up to 8 s, and
            is drawn between half and all of that.
    """

    max_hops: int = 6
    max_queries: int = 50
    max_query_chars: int = MAX_QUERY_CHARS
    max_query_length_s: float = MAX_QUERY_LENGTH_S
    retries: int = 5
    backoff_s: float = 0.5


@dataclass
class Hop:
    """One hop: what was asked and what came back.

    Attributes:
        number: 0 for the seed's own entries.
        queries: the LogQL asked (a query asked over a split window once here).
        requests: queries sent (each piece of a split window one; pages not counted).
        entries: entries Loki answered, retries included.
        new: entries the store did not hold yet.
        took_s: wall time.
    """

    number: int
    queries: list[str] = field(default_factory=list)
    requests: int = 0
    entries: int = 0
    new: int = 0
    took_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "hop": self.number,
            "queries": list(self.queries),
            "requests": self.requests,
            "entries": self.entries,
            "new": self.new,
            "took_s": round(self.took_s, 3),
        }


@dataclass
class Pull:
    """What one pull did.

    Attributes:
        seed: the seed identifier, resolved (a bare value to the kind the evidence names it as).
        start_ns: the operator's window, start.
        end_ns: its end (excluded).
        hops: every hop, the seed's first.
        stopped: why the pull stopped before nothing was left to ask (a cap), else None.
        not_asked: identifiers found but not asked for, when a cap stopped it.
    """

    seed: tuple[str, str]
    start_ns: int
    end_ns: int
    hops: list[Hop] = field(default_factory=list)
    stopped: str | None = None
    not_asked: list[Ask] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(hop.requests for hop in self.hops)

    @property
    def entries(self) -> int:
        return sum(hop.entries for hop in self.hops)

    @property
    def new(self) -> int:
        return sum(hop.new for hop in self.hops)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seed": {self.seed[0]: self.seed[1]},
            "window": {"from": rfc3339_ns(self.start_ns), "to": rfc3339_ns(self.end_ns)},
            "hops": [hop.as_dict() for hop in self.hops],
            "requests": self.requests,
            "entries": self.entries,
            "new": self.new,
            "stopped": self.stopped,
            "not_asked": [{ask.key: ask.value} for ask in self.not_asked],
        }


def window(since: str | None, start: str | None, end: str | None) -> tuple[int, int]:
    """The operator's window, read as ``ingest --source loki`` reads it.

    Args:
        since: how far back from ``end`` (default 1h), unless ``start``.
        start: the window's start (``queries.parse_time_ns``).
        end: its end, default now.

    Returns:
        ``(start_ns, end_ns)``.

    Raises:
        QueryError: a time or duration that cannot be read, ``since`` and ``start`` both, or
            an empty window.
    """
    if since and start:
        raise QueryError("give --since or --from, not both: each says where the window starts")
    end_ns = parse_time_ns(end) if end else time.time_ns()
    if start:
        start_ns = parse_time_ns(start)
    else:
        start_ns = end_ns - int(parse_duration_s(since or DEFAULT_SINCE) * _NS)
    if start_ns >= end_ns:
        raise QueryError(
            f"the window from {rfc3339_ns(start_ns)} to {rfc3339_ns(end_ns)} holds nothing: "
            "its start must be before its end"
        )
    return start_ns, end_ns


def client_fetch(client: LokiClient) -> Fetch:
    """:data:`Fetch` through one Loki client (``sources.loki.client`` makes it from the
    ``loki`` source's settings): every query of a pull shares its connections.

    Args:
        client: the client; the caller closes it once the pull is done.
    """
    from correlator.sources import loki

    def fetch(query: str, start_ns: int, end_ns: int) -> Iterable[Event | Reject]:
        return loki.fetch(client, query, start_ns=start_ns, end_ns=end_ns)

    return fetch


def hop_queries(
    asks: Sequence[Ask],
    *,
    pulled: Sequence[Ask] = (),
    base_selector: str = logql.DEFAULT_BASE_SELECTOR,
    max_query_chars: int = MAX_QUERY_CHARS,
) -> list[tuple[str, list[Ask]]]:
    """The LogQL queries that ask for ``asks``: those with the same ``unset`` keys share a
    predicate, their identifiers joined with ``or`` while the text stays within
    ``max_query_chars`` (one identifier per query at least); when all of a hop's predicates
    fit in one query, they are joined with ``or`` into it, each in parentheses
    (``| (allocation_id="a" and workflow_id!="w") or (node_id="n" and allocation_id="")``),
    since each query costs Loki a read of every entry of the window.

    An entry of the incident names several of its identifiers (an API record its request and
    its allocation): the entries of identifiers ``pulled`` whole before, over a window that
    holds this one, are left out (``| allocation_id!="a-9"``), so that each comes once, as
    long as that takes at most half of the query's text.

    Args:
        asks: what to ask for, in the order to ask it.
        pulled: identifiers whose every entry in the window was pulled already.
        base_selector: the stream selector (and any stages) every query starts with; the
            operator's text, trusted as ``logql.query_for`` trusts it.
        max_query_chars: the longest query text wanted.

    Returns:
        Each query with the asks it answers, in the order of their first ask.

    Raises:
        QueryError: an unknown identifier key, or a value no query can carry.
    """
    groups: dict[tuple[str, ...], list[Ask]] = {}
    for ask in asks:
        groups.setdefault(ask.unset, []).append(ask)
    chunks: list[tuple[list[str], list[str], list[Ask]]] = []
    for unset, members in groups.items():
        tail = [logql.metadata_filter(_known(key), "").removeprefix("| ") for key in unset]
        # Nothing to leave out of a key the entries asked for leave unset, or that they all
        # name a value of already (an entry carries one value of each key).
        bound = set(unset) | ({members[0].key} if len({m.key for m in members}) == 1 else set())
        known = [
            f"{_known(ask.key)}!={logql.string_literal(ask.value)}"
            for ask in pulled
            if not ask.unset and ask.key not in bound
        ]
        if len(base_selector) + len(_stages(tail)) + len(_stages(known)) <= max_query_chars // 2:
            tail += known
        terms: list[str] = []
        answered: list[Ask] = []
        for ask in members:
            term = f"{_known(ask.key)}={logql.string_literal(ask.value)}"
            if terms and len(_query(base_selector, [*terms, term], tail)) > max_query_chars:
                chunks.append((terms, tail, answered))
                terms, answered = [], []
            terms.append(term)
            answered.append(ask)
        chunks.append((terms, tail, answered))
    if len(chunks) > 1:
        # One query for the whole hop when it fits: Loki reads the window once, not once a
        # query (each reads every entry of the selected streams).
        merged = f"{base_selector} | " + " or ".join(
            _predicate(terms, tail) for terms, tail, _ in chunks
        )
        if len(merged) <= max_query_chars:
            return [(merged, [ask for _, _, answered in chunks for ask in answered])]
    return [(_query(base_selector, terms, tail), answered) for terms, tail, answered in chunks]


def _stages(filters: Sequence[str]) -> str:
    """Label filters as pipeline stages, each its own ``| ...``."""
    return "".join(f" | {item}" for item in filters)


def _predicate(terms: Sequence[str], filters: Sequence[str]) -> str:
    """One chunk as a parenthesised label-filter expression, for a query of several."""
    either = " or ".join(terms)
    if not filters:
        return f"({either})"
    head = f"({either})" if len(terms) > 1 else either
    return f"({' and '.join([head, *filters])})"


def _known(key: str) -> str:
    if key not in IDENTIFIER_KEYS:
        raise QueryError(f"unknown identifier key {key!r}; use one of {', '.join(IDENTIFIER_KEYS)}")
    return key


def _query(base_selector: str, terms: Sequence[str], filters: Sequence[str]) -> str:
    return f"{base_selector} | {' or '.join(terms)}{_stages(filters)}"


def pull(
    store: Store,
    fetch: Fetch,
    seed: str,
    *,
    start_ns: int,
    end_ns: int,
    base_selector: str = logql.DEFAULT_BASE_SELECTOR,
    window_s: float = incident.DEFAULT_WINDOW_S,
    limits: PullLimits | None = None,
    progress: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Pull:
    """Pull one incident's evidence from Loki into ``store``, hop by hop.

    Args:
        store: the local store (written to).
        fetch: how a query is asked (:func:`client_fetch`).
        seed: ``KEY=VALUE``, or a bare value, asked for as every identifier kind and then
            resolved as ``incident.resolve_seed`` does.
        start_ns: the operator's window, start.
        end_ns: its end (excluded).
        base_selector: what every query starts with (default: every stream with a service).
        window_s: how far around the seed's evidence the incident's window reaches, as the
            timeline's expansion takes it.
        limits: caps, and what Loki's limits are taken to be.
        progress: told a line for each hop and each retry (the CLI prints it on stderr).
        sleep: pauses before a retry.

    Returns:
        What was asked and pulled.

    Raises:
        QueryError: a malformed seed or window (before any query), or a setting the Loki
            client refuses.
        NotFoundError: a bare value that neither Loki nor the store mentions.
        SourceError: Loki cannot be reached or refuses a query (what came before is kept);
            the message names the Loki setting its refusal points at.
    """
    limits = limits or PullLimits()
    if start_ns >= end_ns:
        raise QueryError(
            "the window to ask Loki for holds nothing: its start is not before its end"
        )
    say = progress or _silent
    if "=" in seed:
        key, value = incident.parse_seed(seed)
        first = [Ask(key, value)]
    else:
        value = seed.strip()
        first = [Ask(*incident.check_seed(kind, value)) for kind in incident.SEARCH_ORDER]
    asking = _Asking(store, fetch, limits, base_selector, say, sleep)
    seed_hop = asking.hop(0, first, start_ns, end_ns)
    say(_said(seed_hop))
    key, value = incident.resolve_seed(store, seed)
    done = Pull((key, value), start_ns, end_ns, [seed_hop])
    asked = {Ask(key, value), *first}
    while True:
        found = store.seed(key, value)
        if found.bounds is None:
            break  # nothing mentions the seed: the timeline says so
        expansion, from_ns, to_ns = incident.expansion_of(store, found, window_s)
        lo, hi = max(from_ns, start_ns), min(to_ns, end_ns)
        wanted = [ask for ask in _wanted(expansion) if not _covered(ask, asked)]
        if not wanted or lo >= hi:
            break
        if len(done.hops) > limits.max_hops:
            done.stopped = f"the hop cap ({limits.max_hops} after the seed's)"
            done.not_asked = wanted
            break
        hop = asking.hop(len(done.hops), wanted, lo, hi)
        asked.update(asking.answered)
        if hop.requests:
            done.hops.append(hop)
            say(_said(hop))
        if len(asking.answered) < len(wanted):
            done.stopped = f"the query cap ({limits.max_queries})"
            done.not_asked = [ask for ask in wanted if ask not in asking.answered]
            break
    said = (
        f"Loki: {_many(len(done.hops), 'hop', 'hops')}, "
        f"{_many(done.requests, 'query', 'queries')}, {done.entries} entries pulled "
        f"({done.new} new)"
    )
    if done.stopped:
        said += f"; stopped at {done.stopped}: {len(done.not_asked)} identifiers not asked for"
    say(said)
    return done


def _said(hop: Hop) -> str:
    return (
        f"Loki hop {hop.number}: {_many(hop.requests, 'query', 'queries')}, {hop.entries} "
        f"entries pulled ({hop.new} new) in {hop.took_s:.2f} s"
    )


def _many(count: int, one: str, more: str) -> str:
    return f"{count} {one if count == 1 else more}"


def _silent(_line: str) -> None:
    pass


def _wanted(expansion: Expansion) -> list[Ask]:
    """What the expansion says belongs to the incident, as asks: its units of work whole, its
    places and parents without their entries that name another unit of work."""
    wanted: list[Ask] = []
    for key, values in expansion.ids.items():
        unset = _in_order(WORK_KEYS) if key in PLACE_KEYS else ()
        wanted.extend(Ask(key, value, unset) for value in values)
    for parent in expansion.parents:
        siblings = parent.sibling_filters(expansion.ids, expansion.parents)
        unset = _in_order([parent.child_key, *(key for key, _ in siblings)])
        wanted.append(Ask(parent.key, parent.value, unset))
    return wanted


def _in_order(keys: Iterable[str]) -> tuple[str, ...]:
    """Keys in ``IDENTIFIER_KEYS`` order: asks that leave the same keys unset share queries."""
    given = set(keys)
    return tuple(key for key in IDENTIFIER_KEYS if key in given)


def _covered(ask: Ask, asked: set[Ask]) -> bool:
    """Whether the entries ``ask`` stands for were asked for already: by it, or by an ask of
    every entry naming its identifier."""
    return ask in asked or Ask(ask.key, ask.value) in asked


class _Asking:
    """The queries of one pull: sent one at a time, each stored as it comes, counted."""

    def __init__(
        self,
        store: Store,
        fetch: Fetch,
        limits: PullLimits,
        base_selector: str,
        say: Callable[[str], None],
        sleep: Callable[[float], None],
    ) -> None:
        self.store, self.fetch, self.limits = store, fetch, limits
        self.base_selector, self.say, self.sleep = base_selector, say, sleep
        self.requests = 0
        #: The asks the last hop's queries answered (fewer than asked when the cap stopped it).
        self.answered: list[Ask] = []
        #: The identifiers whose every entry was pulled, by earlier hops.
        self.pulled: list[Ask] = []

    def hop(self, number: int, asks: Sequence[Ask], lo: int, hi: int) -> Hop:
        """Ask for ``asks`` over ``[lo, hi)`` until the query cap (the pull's first query is
        always sent)."""
        started = time.perf_counter()
        hop = Hop(number)
        self.answered = []
        pieces = list(_pieces(lo, hi, int(self.limits.max_query_length_s * _NS)))
        for query, answers in hop_queries(
            asks,
            pulled=self.pulled,
            base_selector=self.base_selector,
            max_query_chars=self.limits.max_query_chars,
        ):
            if self.requests and self.requests + len(pieces) > self.limits.max_queries:
                break
            hop.queries.append(query)
            for piece_lo, piece_hi in pieces:
                entries, new = self._ask(query, piece_lo, piece_hi)
                hop.requests += 1
                hop.entries += entries
                hop.new += new
            self.answered.extend(answers)
        # Later hops ask inside the window of this one (the operator's, then the incident's
        # inside it), so what was pulled whole here need not come again.
        self.pulled.extend(ask for ask in self.answered if not ask.unset)
        hop.took_s = time.perf_counter() - started
        return hop

    def _ask(self, query: str, lo: int, hi: int) -> tuple[int, int]:
        """Store what one query answers, asking again after a 429 or 500/502/503; returns
        the entries Loki answered (every attempt's) and those new to the store."""
        self.requests += 1
        entries = 0
        attempt = 0
        while True:
            counted = _Counted(self.fetch(query, lo, hi))
            try:
                result = ingest_items(self.store, counted)
            except SourceError as exc:
                entries += counted.n
                status = _status(exc)
                if status not in _RETRIED or attempt >= self.limits.retries:
                    raise _refusal(exc, attempt) from exc
                pause = min(_MAX_PAUSE_S, self.limits.backoff_s * 2**attempt)
                pause *= 0.5 + random.random() / 2  # noqa: S311 - jitter, not a secret
                attempt += 1
                self.say(
                    f"Loki answered HTTP {status}; asking again in {pause:.1f} s "
                    f"(retry {attempt} of {self.limits.retries})"
                )
                self.sleep(pause)
                continue
            return entries + counted.n, result.accepted


class _Counted:
    """An iterator of a query's events that counts them."""

    def __init__(self, items: Iterable[Event | Reject]) -> None:
        self._items = iter(items)
        self.n = 0

    def __iter__(self) -> Iterator[Event | Reject]:
        for item in self._items:
            self.n += 1
            yield item


def _pieces(lo: int, hi: int, longest_ns: int) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` in consecutive pieces of at most ``longest_ns``."""
    while lo < hi:
        end = min(hi, lo + longest_ns)
        yield lo, end
        lo = end


def _status(exc: SourceError) -> int | None:
    """Loki's HTTP status behind a source's failure, when it answered one."""
    cause = exc.__cause__
    return cause.status if isinstance(cause, LokiQueryError) else None


def _refusal(exc: SourceError, retries: int) -> SourceError:
    """The error to raise for a query Loki failed: its message, what it was asked again, and
    the Loki setting its message points at."""
    text = str(exc)
    if retries:
        text += f" (asked {retries + 1} times)"
    lowered = text.lower()
    for words, setting, advice in _SETTINGS:
        if words in lowered:
            return SourceError(f"{text}; that is Loki's limits_config.{setting}: {advice}")
    return SourceError(text)
