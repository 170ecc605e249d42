"""Answers to the operator's questions, assembled from the store and the pure core.

This is the thin layer between the edges (CLI, HTTP) and the pure modules: it validates the
seed identifier, asks the store for the evidence the graph expansion needs, and renders the
JSON shapes of DESIGN §6.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from agent_logging.owner import DEFAULT_RULES, OwnerRule
from agent_logging.schema import id_problem, rfc3339_ns
from correlator import graph, timeline, verdict
from correlator._collector import collector_paused
from correlator._parents import ParentQuery
from correlator._seed import Seed
from correlator.errors import NotFoundError, QueryError
from correlator.model import IDENTIFIER_KEYS, Event, hash_text
from correlator.store import Store

__all__ = [
    "SEARCH_ORDER",
    "event_json",
    "expansion_of",
    "graph_for",
    "parse_seed",
    "resolve_seed",
    "timeline_for",
]

DEFAULT_LIMIT: Final = 10_000
#: Around the seed's own evidence, how far the incident window reaches (parents' events and
#: links are only looked for inside it).
DEFAULT_WINDOW_S: Final = 6 * 3600.0
_NS: Final = 1_000_000_000


def parse_seed(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` to a checked (key, value) pair.

    Raises:
        QueryError: naming what is wrong (unknown key, unsafe value, missing ``=``).
    """
    key, sep, value = text.partition("=")
    if not sep:
        raise QueryError(f"expected KEY=VALUE with KEY one of {', '.join(IDENTIFIER_KEYS)}")
    return check_seed(key.strip(), value.strip())


#: The order a bare value (no ``KEY=``) is tried in, most specific incident first, after the
#: kind its shape suggests (the web page tries the same order).
SEARCH_ORDER: Final = (
    "allocation_id",
    "correlation_id",
    "workflow_id",
    "node_id",
    "node_instance_id",
)
#: Value shapes the services mint: the kind tried first for a bare value ("ni-" before "n-").
_SHAPES: Final = (
    ("ni-", "node_instance_id"),
    ("n-", "node_id"),
    ("wf-", "workflow_id"),
    ("a-", "allocation_id"),
    ("c-", "correlation_id"),
)


def resolve_seed(store: Store, text: str) -> tuple[str, str]:
    """``KEY=VALUE``, or a bare value tried as each identifier kind in turn (the kind its shape
    suggests first, then :data:`SEARCH_ORDER`): the first kind the evidence mentions it as.

    Raises:
        QueryError: malformed (as :func:`parse_seed` says).
        NotFoundError: no evidence mentions the bare value as any kind; the message says
            which were tried.
    """
    if "=" in text:
        return parse_seed(text)
    value = text.strip()
    shaped = next((kind for prefix, kind in _SHAPES if value.startswith(prefix)), None)
    order = [shaped] if shaped else []
    order += [kind for kind in SEARCH_ORDER if kind != shaped]
    tried = []
    for key in order:
        key, value = check_seed(key, value)
        if store.seed(key, value).bounds is not None:
            return key, value
        tried.append(key)
    raise NotFoundError(f"no evidence mentions {value} (tried it as {', '.join(tried)})")


def check_seed(key: str, value: str) -> tuple[str, str]:
    if key not in IDENTIFIER_KEYS:
        raise QueryError(f"unknown identifier {key!r}; use one of {', '.join(IDENTIFIER_KEYS)}")
    reason = id_problem(key, value)
    if reason is not None:
        raise QueryError(f"{key} {reason}")
    return key, value


#: The fields an event shows, in the order the JSON shape lists them (after ts and ts_ns);
#: :func:`event_json` spells them out in this order.
SHOWN_FIELDS: Final = (
    "layer",
    "source",
    "service",
    "level",
    "message",
    *IDENTIFIER_KEYS,
    "trace_id",
    "span_id",
    "http_method",
    "http_path",
    "http_status",
    "duration_s",
    "owner_hint",
    "error_type",
    "entity_kind",
    "entity_id",
    "state_from",
    "state_to",
)


def event_json(event: Event, corrected_ns: int | None = None) -> dict[str, Any]:
    """An event as the API and ``--json`` show it (None fields left out).

    A busy node's answer is 10,000 of these, so the fields of :data:`SHOWN_FIELDS` are
    spelled out one by one rather than looped over: a loop (names zipped with their values)
    costs 40 % more per event. ``tests/correlator/test_incident.py`` holds the loop and
    proves the two agree, key order included.

    Args:
        event: the event.
        corrected_ns: its time corrected for its source's clock offset, when known.

    Returns:
        ``ts`` (RFC 3339), ``ts_ns``, ``corrected_ts_ns`` when it differs, the fields that
        are set, ``attrs`` when not empty, ``origin``, ``hash`` (16 hex digits: JSON numbers
        lose bits past 2**53) and ``raw``.
    """
    ts_ns = event.ts_ns
    shown: dict[str, Any] = {"ts": rfc3339_ns(ts_ns), "ts_ns": ts_ns}
    if corrected_ns is not None and corrected_ns != ts_ns:
        shown["corrected_ts_ns"] = corrected_ns
    shown["layer"] = event.layer  # layer and source are never None (NOT NULL in the store)
    shown["source"] = event.source
    value: Any
    if (value := event.service) is not None:
        shown["service"] = value
    if (value := event.level) is not None:
        shown["level"] = value
    if (value := event.message) is not None:
        shown["message"] = value
    if (value := event.node_id) is not None:
        shown["node_id"] = value
    if (value := event.node_instance_id) is not None:
        shown["node_instance_id"] = value
    if (value := event.correlation_id) is not None:
        shown["correlation_id"] = value
    if (value := event.allocation_id) is not None:
        shown["allocation_id"] = value
    if (value := event.workflow_id) is not None:
        shown["workflow_id"] = value
    if (value := event.trace_id) is not None:
        shown["trace_id"] = value
    if (value := event.span_id) is not None:
        shown["span_id"] = value
    if (value := event.http_method) is not None:
        shown["http_method"] = value
    if (value := event.http_path) is not None:
        shown["http_path"] = value
    if (value := event.http_status) is not None:
        shown["http_status"] = value
    if (value := event.duration_s) is not None:
        shown["duration_s"] = value
    if (value := event.owner_hint) is not None:
        shown["owner_hint"] = value
    if (value := event.error_type) is not None:
        shown["error_type"] = value
    if (value := event.entity_kind) is not None:
        shown["entity_kind"] = value
    if (value := event.entity_id) is not None:
        shown["entity_id"] = value
    if (value := event.state_from) is not None:
        shown["state_from"] = value
    if (value := event.state_to) is not None:
        shown["state_to"] = value
    if event.attrs:
        shown["attrs"] = event.attrs
    shown["origin"] = event.origin
    shown["hash"] = hash_text(event.hash)
    shown["raw"] = event.raw
    return shown


def expansion_of(store: Store, seed: Seed, window_s: float) -> tuple[graph.Expansion, int, int]:
    """The expansion from ``seed`` in the window its evidence spans, widened by ``window_s``
    either side, and that window (start, end excluded); the seed's own link counts are those
    it was read with. A timeline's and a graph's, and each hop's of a pull from Loki
    (``loki_pull``).

    Raises:
        NotFoundError: no evidence mentions the seed.
    """
    key, value = seed.key, seed.value
    if seed.bounds is None:
        raise NotFoundError(f"no evidence mentions {key}={value}")
    from_ns = seed.bounds[0] - int(window_s * _NS)
    to_ns = seed.bounds[1] + int(window_s * _NS) + 1
    cache: dict[tuple[str, str], Mapping[str, Mapping[str, int]]] = {(key, value): seed.link_counts}

    def link_counts(k: str, v: str) -> Mapping[str, Mapping[str, int]]:
        if (k, v) not in cache:
            cache[(k, v)] = store.link_counts(k, v, from_ns=from_ns, to_ns=to_ns)
        return cache[(k, v)]

    def prefetch(pairs: Sequence[tuple[str, str]]) -> None:
        missing = [p for p in pairs if p not in cache]
        if len(missing) > 1:
            cache.update(store.link_counts_many(missing, from_ns=from_ns, to_ns=to_ns))

    expansion = graph.expand(
        key,
        value,
        link_counts=link_counts,
        cardinalities=store.cardinalities(),
        prefetch=prefetch,
    )
    return expansion, from_ns, to_ns


def graph_for(
    store: Store, key: str, value: str, *, window_s: float = DEFAULT_WINDOW_S
) -> dict[str, Any]:
    """The identifier graph from one seed: ids, followed and refused links."""
    key, value = check_seed(key, value)
    expansion, from_ns, to_ns = expansion_of(store, store.seed(key, value), window_s)
    shown = expansion.as_dict()
    shown["window"] = {"from": rfc3339_ns(from_ns), "to": rfc3339_ns(to_ns)}
    return shown


def timeline_for(
    store: Store,
    key: str,
    value: str,
    *,
    from_ns: int | None = None,
    to_ns: int | None = None,
    limit: int = DEFAULT_LIMIT,
    window_s: float = DEFAULT_WINDOW_S,
    rules: Sequence[OwnerRule] = DEFAULT_RULES,
) -> dict[str, Any]:
    """The incident timeline of DESIGN §6 for one seed identifier.

    Args:
        store: the evidence.
        key: the seed's identifier kind (one of IDENTIFIER_KEYS).
        value: the seed's value.
        from_ns: only events at or after this time (default: all).
        to_ns: only events before this time (default: all).
        limit: at most this many events (``truncated`` says when more matched).
        window_s: how far around the seed's own evidence parents' events are looked for.
        rules: the owner table the verdict applies (an operator's rules, then the built-in).

    Returns:
        The JSON shape of DESIGN §6 (plus ``seed``, ``gaps``, ``reimages``, ``graph`` and
        ``generated_at``); each failure event carries ``owner``: the owner its evidence
        names and how (``stamped``, ``adapter``, ``inferred``, ``fallback``).

    Raises:
        QueryError: the seed or the window is malformed.
        NotFoundError: no evidence mentions the seed.
    """
    key, value = check_seed(key, value)
    if limit < 1:
        raise QueryError("limit must be at least 1")
    if from_ns is not None and to_ns is not None and from_ns >= to_ns:
        raise QueryError(
            f"the window from {rfc3339_ns(from_ns)} to {rfc3339_ns(to_ns)} holds "
            "nothing: 'from' must be before 'to'"
        )
    with collector_paused():
        return _timeline(store, key, value, from_ns, to_ns, limit, window_s, rules)


def _top(
    first: list[Event], second: list[Event], limit: int, truncated: bool
) -> tuple[list[Event], bool]:
    """The first ``limit`` events of two answers together, each event once, in the store's
    order (time, then hash): what one query over both sets of identifiers answers. Each
    answer is its own first ``limit`` at most, so the merge of the two is exact."""
    seen = {e.hash for e in first}
    merged = first + [e for e in second if e.hash not in seen]
    merged.sort(key=_order)
    return merged[:limit], truncated or len(merged) > limit


def _order(event: Event) -> tuple[int, int]:
    return event.ts_ns, event.hash


def _timeline(
    store: Store,
    key: str,
    value: str,
    from_ns: int | None,
    to_ns: int | None,
    limit: int,
    window_s: float,
    rules: Sequence[OwnerRule],
) -> dict[str, Any]:
    lo, hi = from_ns, to_ns
    # The seed's own events are part of every answer and do not depend on the expansion: they
    # are read on a thread of their own while the seed's bounds and links are read and the
    # expansion runs (DuckDB lets go of the GIL while it works, so the two overlap on two
    # cores), then merged with the events of the identifiers the expansion adds. A busy
    # node's 10,000 events are most of its answer. Leaving the block waits for the thread,
    # also when the expansion raised: the store must not be closed under it.
    with ThreadPoolExecutor(1, thread_name_prefix="correlator-seed") as pool:
        own = pool.submit(store.events_matching, {key: [value]}, from_ns=lo, to_ns=hi, limit=limit)
        expansion, window_from, window_to = expansion_of(store, store.seed(key, value), window_s)
        events, truncated = own.result()
    others = {
        k: [v for v in values if (k, v) != (key, value)] for k, values in expansion.ids.items()
    }
    if any(others.values()):
        added, added_truncated = store.events_matching(others, from_ns=lo, to_ns=hi, limit=limit)
        events, truncated = _top(events, added, limit, truncated or added_truncated)
    if expansion.parents:
        seen = {e.hash for e in events}
        parents = store.parent_events_many(
            [
                ParentQuery(
                    p.key,
                    p.value,
                    p.child_key,
                    p.child_values,
                    p.sibling_filters(expansion.ids, expansion.parents),
                )
                for p in expansion.parents
            ],
            from_ns=max(window_from, lo) if lo is not None else window_from,
            to_ns=min(window_to, hi) if hi is not None else window_to,
            limit=limit,
        )
        for extra, more in parents:
            truncated = truncated or more
            events.extend(e for e in extra if e.hash not in seen)
            seen.update(e.hash for e in extra)
    if len(events) > limit:
        events.sort(key=_order)  # the store's order: time, then hash
        events, truncated = events[:limit], True
    built = timeline.build(events, truncated=truncated)
    decided = verdict.decide(built.events, truncated=built.truncated, rules=rules)
    ids = {k: sorted(v) for k, v in expansion.ids.items()}
    for parent in expansion.parents:
        ids.setdefault(parent.key, [])
        if parent.value not in ids[parent.key]:
            ids[parent.key].append(parent.value)
    # Node instances seen on the included evidence, in order of appearance.
    seen_instances = dict.fromkeys(e.node_instance_id for e in built.events if e.node_instance_id)
    if seen_instances:
        instances = ids.setdefault("node_instance_id", [])
        known = set(instances)
        instances.extend(i for i in seen_instances if i is not None and i not in known)
    rendered = list(map(event_json, built.events, built.corrected_ns))
    # The first failure and its symptoms are a few events of up to 10,000 (all of them among
    # the timeline's): marked by position afterwards rather than tested for on every event.
    position: dict[int, int] = {}
    if decided.first_failure is not None or decided.explains:
        position = {e.hash: i for i, e in enumerate(built.events)}
        first = decided.first_failure.hash if decided.first_failure else None
        for event in decided.explains:
            if event.hash != first and event.hash in position:
                rendered[position[event.hash]]["symptom"] = True
        for digest, ownership in decided.owners.items():
            if digest in position:
                rendered[position[digest]]["owner"] = ownership.as_dict()
        if first in position:
            rendered[position[first]]["first_failure"] = True
            if decided.ownership is not None:
                rendered[position[first]]["owner"] = decided.ownership.as_dict()
    return {
        "seed": {key: value},
        "ids": ids,
        "verdict": decided.as_dict(lambda e: event_json(e, built.corrected_ns[position[e.hash]])),
        "events": rendered,
        "truncated": built.truncated or expansion.truncated,
        "clock_offsets": {k: v.as_dict() for k, v in built.offsets.items()},
        "gaps": built.gaps,
        "reimages": built.reimages,
        "graph": {
            "followed": [link.as_dict() for link in expansion.links if link.followed],
            "refused": [link.as_dict() for link in expansion.links if not link.followed],
        },
        "generated_at": rfc3339_ns(time.time_ns()),
    }
