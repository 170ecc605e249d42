"""nginx's linking of stored error lines (``nginx.link_stored``) reads only the access lines
that could be linked to (of an error's request, near its time) and links exactly as the linker
does over every event: generated requests of a few clients, methods and paths, with and
without durations, near and far from their error lines, ingested in one file or in two in
either order. Requests alike in all (client, method, path, end) go to the one of the lowest
content hash, as the store reads them in that order."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from correlator.ingest import ingest_lines
from correlator.model import Event
from correlator.sources.nginx import link_errors_to_access, parse
from correlator.store import Store
from tests.stored import stored_events

_CLIENTS: Final = ["127.0.0.1", "10.0.0.7"]
_REQUESTS: Final = ["GET /v1/nodes", "POST /v1/nodes", "POST /v1/allocations", "GET /v1/x"]
_DURATIONS: Final = [None, "0.000", "0.500", "1.500", "30.000"]


def _access(second: int, client: str, request: str, duration: str | None, n: int) -> bytes:
    timing = f" rt={duration}" if duration is not None else ""
    return (
        f"{client} - - [22/Nov/2026:12:{second // 60:02d}:{second % 60:02d} +0000] "
        f'"{request} HTTP/1.1" 502 0 "-" "curl/8.5.0" "req-{n:04d}"{timing}'
    ).encode()


def _error(second: int, client: str, request: str, n: int) -> bytes:
    return (
        f"2026/11/22 12:{second // 60:02d}:{second % 60:02d} [error] 7#7: *{n} connect() "
        f'failed (111: Connection refused), client: {client}, server: api, request: "{request} '
        'HTTP/1.1", upstream: "http://127.0.0.1:8001/", host: "api"'
    ).encode()


_SECONDS: Final = st.integers(0, 45)
_ACCESS_LINES: Final = st.lists(
    st.tuples(
        _SECONDS, st.sampled_from(_CLIENTS), st.sampled_from(_REQUESTS), st.sampled_from(_DURATIONS)
    ),
    max_size=25,
)
_ERROR_LINES: Final = st.lists(
    st.tuples(_SECONDS, st.sampled_from(_CLIENTS), st.sampled_from(_REQUESTS)), max_size=8
)


def _links(store: Store) -> dict[int, str | None]:
    return {e.hash: e.correlation_id for e in stored_events(store) if e.attrs["log"] == "error"}


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(accesses=_ACCESS_LINES, errors=_ERROR_LINES, order=st.sampled_from(["one", "ae", "ea"]))
def test_stored_links_are_the_linkers_over_every_event(
    tmp_path_factory: object,
    accesses: list[tuple[int, str, str, str | None]],
    errors: list[tuple[int, str, str]],
    order: str,
) -> None:
    access_lines = [_access(*a, n) for n, a in enumerate(accesses)]
    error_lines = [_error(*e, n) for n, e in enumerate(errors)]
    every = [
        item for item in parse([*access_lines, *error_lines], "all") if isinstance(item, Event)
    ]
    expected = {
        e.hash: e.correlation_id
        for e in link_errors_to_access(sorted(every, key=lambda e: (e.ts_ns, e.hash)))
        if e.attrs["log"] == "error"
    }
    directory = Path(str(tmp_path_factory.mktemp("links")))  # type: ignore[attr-defined]
    with Store(directory / "evidence.duckdb") as store:
        if order == "one":
            ingest_lines(store, "nginx", [*access_lines, *error_lines], "both.log")
        else:
            files = [("access.log", access_lines), ("error.log", error_lines)]
            for origin, lines in files if order == "ae" else files[::-1]:
                ingest_lines(store, "nginx", lines, origin)
        assert _links(store) == expected


_EDGES: Final = [
    "21/Sep/1677:00:12:44 +0000",
    "01/Jan/1678:00:00:00 +0000",
    "11/Apr/2262:23:47:16 +0000",
]


@pytest.mark.parametrize("access_time", _EDGES)
@pytest.mark.parametrize(
    "error_time", ["1677/09/21 00:12:44", "1678/01/01 00:00:01", "2262/04/11 23:47:16"]
)
def test_hostile_times_and_durations_are_linked_without_an_error(
    tmp_path: Path, access_time: str, error_time: str
) -> None:
    # A request of 1e300 s at either end of the times a store holds, and an error line at
    # either end: the span, the windows and the linker stay within the range (they raised
    # OverflowError, or DuckDB's "Overflow in subtraction of INT64", before).
    access = (
        f'127.0.0.1 - - [{access_time}] "GET /v1/x HTTP/1.1" 502 0 "-" "curl" "abc" rt=1e300'
    ).encode()
    error = (
        f"{error_time} [error] 7#7: *1 connect() failed, client: 127.0.0.1, server: s, "
        'request: "GET /v1/x HTTP/1.1"'
    ).encode()
    every = [item for item in parse([access, error], "all") if isinstance(item, Event)]
    expected = {
        e.hash: e.correlation_id
        for e in link_errors_to_access(sorted(every, key=lambda e: (e.ts_ns, e.hash)))
        if e.attrs["log"] == "error"
    }
    with Store(tmp_path / "evidence.duckdb") as store:
        assert ingest_lines(store, "nginx", [access, error], "f.log").accepted == 2
        assert _links(store) == expected
