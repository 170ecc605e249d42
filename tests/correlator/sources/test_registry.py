"""Adding a source is one declaration and one registry line: a source declared here, and
registered in a fixture, is offered by ``ingest --help``, ingested by the CLI with its own
option, taken by ``POST /v1/evidence`` with its own query parameter, and named by the guess
for lines another kind rejects; nothing else is changed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from correlator import sources
from correlator.api import create_app
from correlator.cli import main
from correlator.errors import QueryError
from correlator.model import Event, Reject, content_hash
from correlator.sources._guess import guess_kinds
from correlator.store import Store
from tests.asgi_client import AsgiClient

TOKEN: Final = "registry-token"
#: The tiny format: ``time|allocation id|message``.
LINES: Final = (
    b"2026-11-22T13:11:19Z|a-9|release failed",
    b"2026-11-22T13:11:20Z|a-9|fenced",
)


def _layer(where: str, text: str) -> str:
    if text not in ("node", "api"):
        raise QueryError(f"{where}: {text!r} is not node or api")
    return text


def parse_pipe(
    lines: Iterable[bytes], origin: str, *, layer: str = "node"
) -> Iterator[Event | Reject]:
    """The tiny format's parser, as a source module would declare it."""
    for line_no, raw in enumerate(lines, 1):
        parts = raw.decode("utf-8", "replace").split("|")
        try:
            ts = datetime.strptime(parts[0], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:
            ts = None
        if ts is None or len(parts) != 3:
            yield Reject(
                "pipe", origin, line_no, "not time|id|message", raw[:200].decode("latin-1")
            )
            continue
        yield Event(
            ts_ns=int(ts.timestamp()) * 1_000_000_000,
            layer=layer,
            source="pipe",
            origin=origin,
            message=parts[2],
            raw=raw.decode(),
            hash=content_hash("pipe", raw),
            allocation_id=parts[1],
        )


PIPE: Final = sources.Source(
    "pipe",
    "time|allocation id|message lines of the registry test",
    parse=parse_pipe,
    options=(
        sources.Option(
            "layer",
            "--pipe-layer",
            "the layer of pipe lines (with --source pipe)",
            what="is the layer of pipe lines",
            query="layer",
            query_help="With `source=pipe`: the layer of its lines.",
            read=_layer,
        ),
    ),
)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> sources.Source:
    """The registry with the tiny source: its one line, added for the test."""
    monkeypatch.setitem(sources.SOURCES, PIPE.name, PIPE)
    return PIPE


@pytest.mark.usefixtures("registered")
def test_ingest_help_lists_the_new_source_and_its_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])

    shown = capsys.readouterr().out
    assert "  pipe      time|allocation id|message lines of the registry test" in shown
    assert "--pipe-layer PIPE_LAYER" in shown
    assert "aap, loki, pipe (see below)" in " ".join(shown.split())


@pytest.mark.usefixtures("registered")
def test_the_cli_ingests_the_new_source_with_its_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.pipe"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    db = str(tmp_path / "c.duckdb")

    assert main(["--db", db, "ingest", "--source", "pipe", "--pipe-layer", "api", str(path)]) == 0
    assert capsys.readouterr().err.startswith("accepted 2, duplicate 0, rejected 0 in ")
    # Its option is its own: another source is told whose it is.
    assert main(["--db", db, "ingest", "--source", "ndjson", "--pipe-layer", "api", str(path)]) == 2
    assert capsys.readouterr().err == (
        "correlator: --pipe-layer is the layer of pipe lines: use it with --source pipe\n"
    )
    with Store(db, read_only=True) as store:
        rows = store.cursor().execute("SELECT source, layer, allocation_id FROM events").fetchall()
    assert rows == [("pipe", "api", "a-9"), ("pipe", "api", "a-9")]


@pytest.mark.usefixtures("registered")
def test_the_api_takes_the_new_source_and_its_parameter(tmp_path: Path) -> None:
    with Store(tmp_path / "c.duckdb") as store:
        app = create_app(store, token=TOKEN)
        with AsgiClient(app) as client:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            posted = client.post(
                "/v1/evidence?source=pipe&layer=api", content=b"\n".join(LINES), headers=auth
            )
            wrong = client.post(
                "/v1/evidence?source=pipe&layer=db", content=b"\n".join(LINES), headers=auth
            )
            schema = client.get("/openapi.json").json()
        rows = store.cursor().execute("SELECT DISTINCT layer FROM events").fetchall()

    assert posted.status_code == 200, posted.text
    assert posted.json()["accepted"] == 2
    assert rows == [("api",)]
    assert wrong.status_code == 400
    assert wrong.json()["detail"] == "query parameter 'layer': 'db' is not node or api"
    parameters = schema["paths"]["/v1/evidence"]["post"]["parameters"]
    assert "pipe" in parameters[0]["schema"]["enum"]
    # pipe's layer parameter is text's too: declared once, described by both
    assert [p["name"] for p in parameters] == ["source", "tz", "format", "layer", "service"]
    layer = next(p for p in parameters if p["name"] == "layer")
    assert "source=text" in layer["description"]
    assert "pipe" in layer["description"]


@pytest.mark.usefixtures("registered")
def test_the_guess_names_the_new_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "app.log"
    path.write_bytes(b"\n".join(LINES) + b"\n")

    assert guess_kinds(LINES) == [("pipe", 2)]
    assert (
        main(["--db", str(tmp_path / "c.duckdb"), "ingest", "--source", "ndjson", str(path)]) == 1
    )
    assert capsys.readouterr().err.endswith(
        "correlator: no line was read as --source ndjson; the lines look like --source pipe\n"
    )


def test_without_the_registry_line_the_source_is_unknown(tmp_path: Path) -> None:
    # The other tests' source exists only through its line in the registry.
    assert "pipe" not in sources.SOURCES
    with pytest.raises(QueryError, match=r"^unknown source kind 'pipe'; use one of ndjson, agent"):
        sources.source("pipe")
