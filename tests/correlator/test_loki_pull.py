"""The pull of one incident from Loki, hop by hop (``correlator.loki_pull``), against the Loki
test server; ``tests/test_real_loki_timeline.py`` repeats what a real Loki must confirm."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from agent_logging.loki import LokiClient
from correlator import incident, loki_pull
from correlator.cli import main as correlator
from correlator.errors import NotFoundError, QueryError, SourceError
from correlator.loki_pull import Ask, PullLimits, hop_queries
from correlator.sources import loki
from correlator.store import Store
from tests.correlator.loki_incident import (
    OWN,
    WINDOW_S,
    Incident,
    pull_incident,
    pulled_messages,
    push_records,
)
from tests.lokisim import Limits, LokiServer

_S = 1_000_000_000
# The query timeout Loki's frontend answers (504), as the test server has it from Loki.
TIMED_OUT = (
    "request timed out, decrease the duration of the request or add more label matchers "
    "(prefer exact match over regex match) to reduce the amount of data processed"
)


class Recording(httpx.BaseTransport):
    """The network, with every query's parameters recorded, and the first queries answered
    with ``faults`` (status, body) instead."""

    def __init__(self, faults: list[tuple[int, str]] | None = None) -> None:
        self.network = httpx.HTTPTransport()
        self.faults = list(faults or [])
        self.queries: list[dict[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.queries.append(dict(request.url.params))
        if self.faults:
            status, body = self.faults.pop(0)
            return httpx.Response(status, text=body)
        return self.network.handle_request(request)

    def close(self) -> None:
        self.network.close()


@pytest.fixture
def incident_in(loki: LokiServer) -> Incident:
    """An incident and the busy node's other work, in the test server."""
    case = Incident()
    with LokiClient(loki.url) as client:
        push_records(client, case.own() + case.others())
    return case


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "pulled.duckdb") as opened:
        yield opened


Connect = Callable[[str, Recording], loki_pull.Fetch]


@pytest.fixture
def connect() -> Iterator[Connect]:
    """``connect(url, transport)``: a fetch through a client of the Loki at ``url`` (closed
    after the test)."""
    clients: list[LokiClient] = []

    def fetch_from(url: str, transport: Recording) -> loki_pull.Fetch:
        client = LokiClient(url, transport=transport)
        clients.append(client)
        return lambda query, start_ns, end_ns: loki.fetch(
            client, query, start_ns=start_ns, end_ns=end_ns
        )

    yield fetch_from
    for client in clients:
        client.close()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("seed", "entries_per_hop"),
    [
        # a: its API, workflow and node records; then its request (ingress, db) and run (the
        # step), and the node's line that names no work.
        ("a", [4, 4]),
        # wf: its two records; the allocation's other three; its request's two and the node's.
        ("wf", [2, 3, 3]),
        ("c", [3, 3, 2]),
    ],
)
def test_the_pull_follows_the_incident_across_five_layers_and_nothing_else(
    loki: LokiServer,
    incident_in: Incident,
    store: Store,
    seed: str,
    entries_per_hop: list[int],
    connect: Connect,
) -> None:
    transport = Recording()
    key = {"a": "allocation_id", "wf": "workflow_id", "c": "correlation_id"}[seed]
    done = pull_incident(
        store, connect(loki.url, transport), incident_in, f"{key}={incident_in.id(seed)}"
    )

    # Each entry of the incident came once; none of the busy node's other allocations, nor
    # its line outside the incident's window, was pulled.
    assert [hop.entries for hop in done.hops] == entries_per_hop
    assert done.entries == done.new == 8
    assert pulled_messages(store) == OWN
    assert done.requests == len(transport.queries)
    assert done.stopped is None
    data = incident.timeline_for(store, key, incident_in.id(seed), window_s=WINDOW_S)
    assert len(data["events"]) == 8
    assert data["verdict"]["owner_layer"] == "node"


@pytest.mark.integration
def test_a_place_is_asked_for_its_lines_that_name_no_work(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    transport = Recording()
    pull_incident(
        store, connect(loki.url, transport), incident_in, f"allocation_id={incident_in.id('a')}"
    )

    case = incident_in
    assert [query["query"] for query in transport.queries] == [
        f'{case.selector} | allocation_id="{case.id("a")}"',
        # The request and the run whole but for the allocation's lines (pulled already), and
        # the node and its installation without their lines that name work: one query.
        f'{case.selector} | ((correlation_id="{case.id("c")}" or workflow_id="{case.id("wf")}")'
        f' and allocation_id!="{case.id("a")}") or ((node_id="{case.id("n")}" or '
        f'node_instance_id="{case.id("ni")}") and correlation_id="" and allocation_id="" and '
        'workflow_id="")',
    ]


@pytest.mark.integration
def test_asking_twice_stores_nothing_new(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    seed = f"allocation_id={incident_in.id('a')}"
    first = pull_incident(store, connect(loki.url, Recording()), incident_in, seed)
    again = pull_incident(store, connect(loki.url, Recording()), incident_in, seed)

    assert (first.entries, first.new) == (8, 8)
    assert (again.entries, again.new) == (8, 0)
    assert store.count() == 8


@pytest.mark.integration
def test_a_bare_value_is_asked_for_as_every_kind(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    transport = Recording()
    done = pull_incident(store, connect(loki.url, transport), incident_in, incident_in.id("wf"))

    value = incident_in.id("wf")
    assert transport.queries[0]["query"] == (
        f'{incident_in.selector} | allocation_id="{value}" or correlation_id="{value}" or '
        f'workflow_id="{value}" or node_id="{value}" or node_instance_id="{value}"'
    )
    assert done.seed == ("workflow_id", value)
    assert pulled_messages(store) == OWN


@pytest.mark.integration
def test_a_value_nothing_mentions_is_not_found(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    with pytest.raises(NotFoundError, match="no evidence mentions a-nowhere"):
        pull_incident(store, connect(loki.url, Recording()), incident_in, "a-nowhere")


@pytest.mark.integration
def test_pages_cross_lokis_entry_limit(loki: LokiServer, store: Store, connect: Connect) -> None:
    case = Incident()
    allocation = case.id("a")
    records = [
        case.record(i / 1000, "node", f"task step {i}", allocation_id=allocation)
        for i in range(6000)
    ]
    with LokiClient(loki.url) as client:
        push_records(client, records)
    transport = Recording()

    done = pull_incident(store, connect(loki.url, transport), case, f"allocation_id={allocation}")

    assert done.entries == done.new == 6000
    limits = [int(query["limit"]) for query in transport.queries]
    assert len(limits) > 1
    assert max(limits) <= 5000
    assert done.requests == 1  # one query, its pages


@pytest.mark.integration
def test_a_window_longer_than_lokis_query_length_is_asked_in_pieces(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    transport = Recording()
    done = pull_incident(
        store,
        connect(loki.url, transport),
        incident_in,
        f"allocation_id={incident_in.id('a')}",
        limits=PullLimits(max_query_length_s=1500.0),
    )

    seed_query = f'{incident_in.selector} | allocation_id="{incident_in.id("a")}"'
    hop0 = [q for q in transport.queries if q["query"] == seed_query]
    windows = [(int(q["start"]), int(q["end"])) for q in hop0]
    assert len(windows) == 3  # an hour, in pieces of 25 minutes
    assert all(end - start <= 1500 * _S for start, end in windows)
    assert [start for start, _ in windows[1:]] == [end for _, end in windows[:-1]]
    assert done.entries == done.new == 8


@pytest.mark.integration
def test_a_refused_query_names_the_loki_setting(store: Store, connect: Connect) -> None:
    # A Loki whose max_entries_limit_per_query is under the 5,000 the client pages with: its
    # second page asks for more than 1,000 and is refused.
    with LokiServer(limits=Limits(max_entries_limit_per_query=1000)) as small:
        case = Incident()
        allocation = case.id("a")
        records = [
            case.record(i / 100, "node", "step", allocation_id=allocation) for i in range(300)
        ]
        with LokiClient(small.url) as client:
            push_records(client, records)
        with pytest.raises(SourceError) as refused:
            pull_incident(
                store, connect(small.url, Recording()), case, f"allocation_id={allocation}"
            )

    message = str(refused.value)
    assert "HTTP 400: max entries limit per query exceeded" in message
    assert "limits_config.max_entries_limit_per_query" in message


@pytest.mark.integration
def test_429s_and_503s_are_asked_again_after_a_growing_pause(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    transport = Recording([(429, "too many outstanding requests"), (503, ""), (429, "")])
    pauses: list[float] = []
    said: list[str] = []

    done = pull_incident(
        store,
        connect(loki.url, transport),
        incident_in,
        f"allocation_id={incident_in.id('a')}",
        limits=PullLimits(backoff_s=1.0),
        sleep=pauses.append,
        progress=said.append,
    )

    assert done.new == 8
    assert len(pauses) == 3
    # Drawn between half and all of 1, 2, 4 s.
    assert 0.5 <= pauses[0] <= 1
    assert 1 <= pauses[1] <= 2
    assert 2 <= pauses[2] <= 4
    assert said[:3] == [
        f"Loki answered HTTP 429; asking again in {pauses[0]:.1f} s (retry 1 of 5)",
        f"Loki answered HTTP 503; asking again in {pauses[1]:.1f} s (retry 2 of 5)",
        f"Loki answered HTTP 429; asking again in {pauses[2]:.1f} s (retry 3 of 5)",
    ]


@pytest.mark.integration
def test_a_loki_that_keeps_answering_429_fails_the_pull(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    transport = Recording([(429, "too many outstanding requests")] * 3)
    pauses: list[float] = []
    with pytest.raises(
        SourceError, match=r"HTTP 429: too many outstanding requests.*asked 3 times"
    ):
        pull_incident(
            store,
            connect(loki.url, transport),
            incident_in,
            f"allocation_id={incident_in.id('a')}",
            limits=PullLimits(retries=2),
            sleep=pauses.append,
        )
    assert len(pauses) == 2


@pytest.mark.integration
def test_a_query_timeout_is_not_asked_again(
    loki: LokiServer, incident_in: Incident, store: Store, connect: Connect
) -> None:
    pauses: list[float] = []
    with pytest.raises(SourceError) as refused:
        pull_incident(
            store,
            connect(loki.url, Recording([(504, TIMED_OUT)])),
            incident_in,
            f"allocation_id={incident_in.id('a')}",
            sleep=pauses.append,
        )
    assert pauses == []
    assert "HTTP 504: request timed out" in str(refused.value)
    assert "limits_config.query_timeout" in str(refused.value)


@pytest.mark.integration
@pytest.mark.parametrize(
    ("limits", "stopped", "not_asked"),
    [
        # From the request: its allocation in hop 1; the run and the node wait for hop 2.
        (PullLimits(max_hops=1), "the hop cap (1 after the seed's)", ["wf", "n", "ni"]),
        # Hop 2 is one query (the run, the node and its installation): none is left for it.
        (PullLimits(max_queries=2), "the query cap (2)", ["wf", "n", "ni"]),
    ],
)
def test_a_cap_stops_the_pull_and_says_what_was_not_asked(
    loki: LokiServer,
    incident_in: Incident,
    store: Store,
    limits: PullLimits,
    stopped: str,
    not_asked: list[str],
    connect: Connect,
) -> None:
    said: list[str] = []
    done = pull_incident(
        store,
        connect(loki.url, Recording()),
        incident_in,
        f"correlation_id={incident_in.id('c')}",
        limits=limits,
        progress=said.append,
    )

    assert done.stopped == stopped
    assert [ask.value for ask in done.not_asked] == [incident_in.id(k) for k in not_asked]
    assert said[-1].endswith(f"stopped at {stopped}: {len(not_asked)} identifiers not asked for")


@pytest.mark.parametrize(
    ("asks", "pulled", "max_chars", "queries"),
    [
        (
            [Ask("allocation_id", "a-1"), Ask("correlation_id", "c-1")],
            [],
            2000,
            ['{env="x"} | allocation_id="a-1" or correlation_id="c-1"'],
        ),
        (
            [
                Ask("workflow_id", "wf-1"),
                Ask("node_id", "n-1", ("correlation_id", "allocation_id", "workflow_id")),
                Ask("allocation_id", "a-2", ("correlation_id",)),
            ],
            [Ask("allocation_id", "a-1"), Ask("node_id", "n-0", ("allocation_id",))],
            2000,
            [
                '{env="x"} | (workflow_id="wf-1" and allocation_id!="a-1") or (node_id="n-1" and '
                'correlation_id="" and allocation_id="" and workflow_id="") or '
                '(allocation_id="a-2" and correlation_id="")'
            ],
        ),
        (
            # The same, too long for one query: a query a predicate, each as pipeline stages.
            [
                Ask("workflow_id", "wf-1"),
                Ask("node_id", "n-1", ("correlation_id", "allocation_id", "workflow_id")),
                Ask("allocation_id", "a-2", ("correlation_id",)),
            ],
            [Ask("allocation_id", "a-1")],
            100,
            [
                '{env="x"} | workflow_id="wf-1" | allocation_id!="a-1"',
                '{env="x"} | node_id="n-1" | correlation_id="" | allocation_id="" | workflow_id=""',
                '{env="x"} | allocation_id="a-2" | correlation_id=""',
            ],
        ),
        (
            # Split where one more identifier would pass the length; what was pulled left
            # out only while it takes at most half of it.
            [Ask("workflow_id", f"wf-{i}") for i in range(3)],
            [Ask("allocation_id", "a-0")],
            60,
            [
                '{env="x"} | workflow_id="wf-0" or workflow_id="wf-1"',
                '{env="x"} | workflow_id="wf-2"',
            ],
        ),
        (
            # A value is a quoted literal whatever it holds (seeds never hold such: they are
            # checked first; the escaping is the second line of defence).
            [Ask("correlation_id", 'c"} | x="1\\\n')],
            [],
            2000,
            ['{env="x"} | correlation_id="c\\"} | x=\\"1\\\\\\n"'],
        ),
    ],
)
def test_hop_queries(
    asks: list[Ask], pulled: list[Ask], max_chars: int, queries: list[str]
) -> None:
    built = hop_queries(asks, pulled=pulled, base_selector='{env="x"}', max_query_chars=max_chars)
    assert [query for query, _ in built] == queries
    assert sorted(ask for _, answers in built for ask in answers) == sorted(asks)


def test_hop_queries_refuses_an_unknown_key() -> None:
    with pytest.raises(QueryError, match="unknown identifier key 'trace'"):
        hop_queries([Ask("trace", "x")])


@pytest.mark.integration
def test_the_timeline_command_pulls_from_loki_first(
    loki: LokiServer,
    incident_in: Incident,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CORRELATOR_LOKI_URL", loki.url)
    db = tmp_path / "new.duckdb"  # not there yet: the pull makes it
    code = correlator(
        [
            "--db",
            str(db),
            "timeline",
            "--id",
            f"allocation_id={incident_in.id('a')}",
            "--since",
            "1h",
            "--loki-selector",
            incident_in.selector,
            "--json",
        ]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    # The timeline's own window (6 h around the seed) holds the node's earlier line too.
    data = orjson.loads(out)
    assert len(data["events"]) == 9
    assert "fan speed changed" in [e["message"] for e in data["events"]]
    assert [(hop["requests"], hop["entries"], hop["new"]) for hop in data["loki"]["hops"]] == [
        (1, 4, 4),
        (1, 5, 5),  # the run, the node and its installation: one query
    ]
    assert data["loki"]["hops"][0]["queries"] == [
        f'{incident_in.selector} | allocation_id="{incident_in.id("a")}"'
    ]
    assert "correlator: Loki hop 0: 1 query, 4 entries pulled (4 new)" in err
    assert "correlator: Loki: 2 hops, 2 queries, 9 entries pulled (9 new)" in err


@pytest.mark.integration
def test_local_evidence_joins_the_pulled_timeline(
    loki: LokiServer, incident_in: Incident, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "local.duckdb"
    local = tmp_path / "local.ndjson"
    local.write_bytes(
        orjson.dumps(
            incident_in.record(5.0, "api", "local only", allocation_id=incident_in.id("a"))
        )
        + b"\n"
    )
    assert correlator(["--db", str(db), "ingest", "--source", "ndjson", str(local)]) == 0
    code = correlator(
        [
            "--db",
            str(db),
            "timeline",
            "--id",
            f"allocation_id={incident_in.id('a')}",
            "--loki-url",
            loki.url,
            "--loki-selector",
            incident_in.selector,
            "--json",
        ]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    assert "local only" in [e["message"] for e in orjson.loads(out)["events"]]


@pytest.mark.integration
def test_a_hostile_seed_is_refused_before_loki_is_asked(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = correlator(
        [
            "--db",
            str(tmp_path / "h.duckdb"),
            "timeline",
            "--id",
            'allocation_id=a"} | x="1\\\n',
            "--loki-url",
            loki.url,
        ]
    )

    assert code == 2
    assert "allocation_id holds '\"' (U+0022) at position 1" in capsys.readouterr().err
    assert [r for r in loki.requests if r.path.endswith("query_range")] == []


def test_without_a_loki_the_pull_options_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CORRELATOR_LOKI_URL", raising=False)
    db = tmp_path / "none.duckdb"
    code = correlator(["--db", str(db), "timeline", "--id", "a-1", "--since", "2h"])

    assert code == 2
    assert "--since is a setting of the pull from Loki: give --loki-url" in (
        capsys.readouterr().err
    )
    assert not db.exists()


def test_window_reads_since_or_from_and_to() -> None:
    assert loki_pull.window("2h", None, "1795000000000000000") == (
        1795000000000000000 - 7200 * _S,
        1795000000000000000,
    )
    assert loki_pull.window(None, "1795000000000000000", "1795000060000000000") == (
        1795000000000000000,
        1795000060000000000,
    )
    with pytest.raises(QueryError, match="give --since or --from, not both"):
        loki_pull.window("1h", "now-2h", None)
    with pytest.raises(QueryError, match="holds nothing"):
        loki_pull.window(None, "1795000060000000000", "1795000000000000000")
