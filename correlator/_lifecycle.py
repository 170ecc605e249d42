"""What findings and latency read: the lifecycle evidence, or just the part findings depend on.

Lifecycle events are entity transitions, provider-job and projection events, and records that
report a node's ``occupancy`` (:data:`LIFECYCLE`). :func:`lifecycle_events` reads them all;
:func:`finding_events` only those the rules can depend on (each rule of
``correlator.findings.RULES`` declares its reach, and the query is built from them): in SQL,
each entity's latest transition, then every event of the entities that can make a finding or
that such a finding consults, and of any entity one of those events belongs to. At 10^7
events, where nearly every allocation ended healthy, that is a few events instead of ~800,000
Python objects (13 s and 5.7 GB).

Each read is one snapshot: the row ids the first query picks name the rows the second reads.

:func:`latency_samples` computes what ``correlator.latency.latency`` computes from the same
events (its module docstring says what), in SQL: each allocation's first entry into a
phase's start state, its first entry into the end state after that, and the provider, as
one duration (or an incomplete phase) per allocation and phase. The state and provider texts
are few: what they mean (a state's name, whether a provider is given and how it is named) is
decided in Python by the functions ``latency`` itself uses, and handed to the SQL as lists.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping
from typing import Final

import duckdb
import orjson

from correlator._rows import fetch_events
from correlator._schema import COLUMN_LIST
from correlator.findings import RULES, Rule
from correlator.latency import Incomplete, Samples, checked_phases, provider_name
from correlator.model import Event, state_name

__all__ = ["LIFECYCLE", "finding_events", "latency_samples", "lifecycle_events"]

#: The lifecycle events' condition. ``attrs`` is JSON text that orjson wrote, so a record
#: with an ``occupancy`` field holds the text ``"occupancy"``.
LIFECYCLE: Final = (
    "entity_kind IS NOT NULL OR layer IN ('provider', 'projection') OR attrs LIKE '%\"occupancy\"%'"
)

# The role an event's entity plays for the rules, as ``findings._matching.Index`` decides it:
# an entity needs a kind and an id (neither empty); a VM is a VM whatever its layer.
_ROLE: Final = """
CASE WHEN entity_kind <> '' AND entity_id <> '' THEN
    CASE WHEN entity_kind = 'vm' THEN 'vm'
         WHEN layer = 'projection' THEN 'projection'
         WHEN entity_kind IN ('allocation', 'provider_job', 'outbox') THEN entity_kind
    END
END"""

# The reach of every rule (findings.RULES) as one query. $1: the ``state_to`` texts, as written,
# that read as "deleting"; then one list of texts per part of a rule's reach that names states
# (_parts numbers them). "deletes"/"occupies" are supersets of what the rules test
# (attrs["deleted"], attrs["occupancy"]): reading an entity too many does no harm.
_HEAD: Final = f"""
WITH lifecycle AS MATERIALIZED (
    SELECT rowid AS row_id, ts_ns, hash, entity_kind, entity_id, allocation_id, state_to,
           attrs LIKE '%"occupancy"%' AS occupies,
           attrs LIKE '%"deleted"%' OR list_contains($1::VARCHAR[], state_to) AS deletes,
           {_ROLE} AS role
    FROM events WHERE {LIFECYCLE}
),
entities AS (
    SELECT role, entity_kind, entity_id,
           arg_max(state_to, [ts_ns, hash]) FILTER (WHERE state_to <> '') AS last_state,
           bool_or(deletes) AS deleted
    FROM lifecycle WHERE role IS NOT NULL GROUP BY ALL
),
projected AS (SELECT count(*) > 0 AS some FROM entities WHERE role = 'projection'),
deleted_allocations AS (
    SELECT DISTINCT l.allocation_id AS entity_id
    FROM lifecycle l JOIN entities e USING (role, entity_kind, entity_id)
    WHERE l.role = 'projection' AND e.deleted AND l.allocation_id IS NOT NULL
)"""  # noqa: S608 - fixed text


@functools.cache
def _parts(rules: tuple[Rule, ...]) -> tuple[str, list[frozenset[str]]]:
    """The query that picks the row ids of every event the rules' reach holds, oldest first,
    and the state names whose written texts each of its parameters from $2 on lists (the
    limit is the last parameter).

    Each distinct part of a reach is one ``chosen_<n>`` selection of entities; an allocation
    read with its occupancy also picks the records that report it (``occupancy_<n>``).
    """
    reads = list(dict.fromkeys(part for rule in rules for part in rule.reach))
    ctes: list[str] = []
    chosen: list[str] = []
    occupancy: list[str] = []
    states: list[frozenset[str]] = []
    for n, part in enumerate(reads):
        if part.selects == "latest_in":
            states.append(part.states)
            where = f"list_contains(${len(states) + 1}::VARCHAR[], last_state)"
        elif part.selects == "every":
            where = "(SELECT projected.some FROM projected)" if part.when_projected else "true"
        else:  # named_by_deleted_projection
            where = "entity_id IN (SELECT entity_id FROM deleted_allocations)"
        # part.role is one of findings.ROLES, checked when the part was made
        ctes.append(
            f"chosen_{n} AS (SELECT role, entity_kind, entity_id FROM entities "  # noqa: S608 - rule data, not input
            f"WHERE role = '{part.role}' AND {where})"
        )
        chosen.append(f"SELECT * FROM chosen_{n}")  # noqa: S608 - rule data, not input
        if part.occupancy:
            ctes.append(
                f"occupancy_{n} AS (SELECT row_id, role, entity_kind, entity_id FROM lifecycle "  # noqa: S608 - rule data, not input
                f"WHERE occupies AND (allocation_id IN (SELECT entity_id FROM chosen_{n}) OR "
                f"(role = 'allocation' AND entity_id IN (SELECT entity_id FROM chosen_{n}))))"
            )
            chosen.append(
                f"SELECT role, entity_kind, entity_id FROM occupancy_{n} WHERE role IS NOT NULL"  # noqa: S608 - rule data, not input
            )
            occupancy.append(f"SELECT row_id FROM occupancy_{n}")  # noqa: S608 - rule data, not input
    ctes.append("chosen AS (" + " UNION ".join(chosen) + ")")
    picked = ["SELECT row_id FROM lifecycle JOIN chosen USING (role, entity_kind, entity_id)"]
    ctes.append("picked AS (" + " UNION ".join(picked + occupancy) + ")")
    sql = (
        _HEAD + ",\n" + ",\n".join(ctes) + "\n"  # noqa: S608 - rule data, not input
        "SELECT p.row_id FROM picked p JOIN lifecycle l USING (row_id) "
        f"ORDER BY l.ts_ns, l.hash LIMIT ${len(states) + 2}"
    )
    return sql, states


def _state_texts(cursor: duckdb.DuckDBPyConnection) -> list[str]:
    """Every distinct ``state_to`` the store holds: few, whatever its size; what each means
    is decided in Python, by the functions the pure cores use."""
    rows = cursor.execute("SELECT DISTINCT state_to FROM events WHERE state_to <> ''").fetchall()
    return [text for (text,) in rows]


def lifecycle_events(cursor: duckdb.DuckDBPyConnection, limit: int) -> tuple[list[Event], bool]:
    """Every lifecycle event (``Store.lifecycle_events``), oldest first: at most ``limit``,
    and whether more matched."""
    sql = f"SELECT {COLUMN_LIST} FROM events WHERE {LIFECYCLE} ORDER BY ts_ns, hash LIMIT ?"  # noqa: S608 - fixed text
    events = fetch_events(cursor, sql, [limit + 1])
    return events[:limit], len(events) > limit


def finding_events(
    cursor: duckdb.DuckDBPyConnection, limit: int, rules: tuple[Rule, ...] = RULES
) -> tuple[list[Event], bool]:
    """The lifecycle events findings can depend on (``Store.finding_events``), oldest first:
    at most ``limit``, and whether more matched; ``rules`` whose reach is read (the built-in
    ones unless a test says otherwise)."""
    cursor.execute("BEGIN TRANSACTION")
    try:
        named = sorted((text, state_name(text)) for text in _state_texts(cursor))
        sql, wanted = _parts(rules)
        texts = [[text for text, name in named if name in states] for states in wanted]
        deleting = [text for text, name in named if name == "deleting"]
        chosen = cursor.execute(sql, [deleting, *texts, limit + 1]).fetchall()
        row_ids = [row_id for (row_id,) in chosen[:limit]]
        events = (
            fetch_events(
                cursor,
                f"SELECT rowid, {COLUMN_LIST} FROM events "  # noqa: S608 - fixed names
                "WHERE rowid IN (SELECT unnest(?::BIGINT[]))",
                [row_ids],
                order=row_ids,
            )
            if row_ids
            else []
        )
    finally:
        cursor.execute("COMMIT")
    return events, len(chosen) > limit


# $1 state texts, $2 their phase numbers, $3 whether each starts (else ends) it: one row per
# (text, phase, start/end); $4 the provider texts (JSON, as json_extract gives them) that
# name a provider (latency.provider_name's "falsy is none" decided in Python).
_SAMPLES: Final = f"""
WITH lifecycle AS MATERIALIZED (
    SELECT ts_ns, hash, state_to,
           coalesce(entity_kind = 'allocation' AND layer <> 'projection', false) AS own,
           CASE WHEN own THEN entity_id ELSE allocation_id END AS allocation,
           json_extract(attrs, '$.provider')::VARCHAR AS provider
    FROM events WHERE {LIFECYCLE}
),
steps AS (
    SELECT allocation, ts_ns, hash, state_to, provider FROM lifecycle
    WHERE own AND allocation <> '' AND state_to <> ''
),
latest AS (
    SELECT allocation, max_by(provider, [ts_ns, hash]) AS provider FROM lifecycle
    WHERE allocation <> '' AND list_contains($4::VARCHAR[], provider) GROUP BY allocation
),
marks AS (
    SELECT unnest($1::VARCHAR[]) AS state_to, unnest($2::INTEGER[]) AS phase,
           unnest($3::BOOLEAN[]) AS starts
),
starts AS (
    SELECT m.phase, s.allocation,
           min({{'ts': s.ts_ns, 'h': s.hash, 'provider': s.provider}}) AS first
    FROM steps s JOIN marks m ON m.state_to = s.state_to AND m.starts GROUP BY ALL
),
ends AS (
    SELECT st.phase, st.allocation,
           min({{'ts': s.ts_ns, 'h': s.hash, 'provider': s.provider}}) AS first
    FROM starts st
    JOIN marks m ON m.phase = st.phase AND NOT m.starts
    JOIN steps s ON s.allocation = st.allocation AND s.state_to = m.state_to
         AND [s.ts_ns, s.hash] > [st.first.ts, st.first.h]
    GROUP BY ALL
)
SELECT st.phase,
       CASE WHEN list_contains($4::VARCHAR[], st.first.provider) THEN st.first.provider
            WHEN list_contains($4::VARCHAR[], e.first.provider) THEN e.first.provider
            ELSE l.provider END AS provider,
       list(e.first.ts - st.first.ts) FILTER (WHERE e.first IS NOT NULL) AS durations_ns,
       count(*) FILTER (WHERE e.first IS NULL) AS incomplete
FROM starts st
LEFT JOIN ends e USING (phase, allocation)
LEFT JOIN latest l USING (allocation)
GROUP BY ALL
"""  # noqa: S608 - fixed text


def latency_samples(
    cursor: duckdb.DuckDBPyConnection, phases: Mapping[str, tuple[str, str]]
) -> tuple[Samples, Incomplete]:
    """The samples ``correlator.latency.latency`` would take from every lifecycle event
    (``Store.latency_samples``), computed in SQL.

    Raises:
        QueryError: a phase is not a pair of two different non-empty state names.
    """
    wanted = checked_phases(phases)
    names = list(wanted)
    cursor.execute("BEGIN TRANSACTION")
    try:
        texts = _state_texts(cursor)
        providers = [
            p
            for (p,) in cursor.execute(
                f"SELECT DISTINCT json_extract(attrs, '$.provider')::VARCHAR FROM events "  # noqa: S608 - fixed text
                f"WHERE ({LIFECYCLE}) AND attrs LIKE '%\"provider\"%'"
            ).fetchall()
            if p is not None
        ]
        # The texts that name a provider (a falsy value names none), and the name each gives.
        given = {p: provider_name(value) for p in providers if (value := orjson.loads(p))}
        marks = [
            (text, number, starts)
            for text in texts
            for number, (start, end) in enumerate(wanted.values())
            for starts, state in ((True, start), (False, end))
            if state_name(text) == state
        ]
        rows = cursor.execute(
            _SAMPLES,
            [
                [text for text, _, _ in marks],
                [number for _, number, _ in marks],
                [starts for _, _, starts in marks],
                sorted(given),
            ],
        ).fetchall()
    finally:
        cursor.execute("COMMIT")
    samples: Samples = defaultdict(list)
    incomplete: Incomplete = defaultdict(int)
    for number, provider, durations_ns, unfinished in rows:
        key = (names[number], given.get(provider, provider_name(None)))
        samples[key].extend(d / 1e9 for d in durations_ns or ())
        if unfinished:
            incomplete[key] += unfinished
    return samples, incomplete
