"""The timeline page in a real Chromium against a real ``correlator serve``, and the page
``correlator timeline --html`` writes, opened from disk in the same browser.

The service runs as a subprocess on 127.0.0.1 over the demo incident plus one hostile record
posted through ``POST /v1/evidence``; reads need a token, so the page's token prompt is on the
path too. Playwright drives Debian's ``/usr/bin/chromium`` (``playwright install`` is never
needed). A screenshot at 1280x800 lands in ``test-artifacts/timeline.png``.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from agent_logging.loki import LokiClient
from correlator import demo
from correlator.cli import main
from tests.correlator.conftest import DEMO_NOW_NS
from tests.correlator.loki_incident import Incident, push_records
from tests.lokisim import LokiServer
from tests.real_parts import missing
from tests.servers import free_port

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the environment; `site` says so
    PLAYWRIGHT = False
else:
    PLAYWRIGHT = True

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
WRITE_TOKEN = "web-test-write-token"
READ_TOKEN = "web-test-read-token"
HOSTILE = "<img src=x onerror=window.__pwned=1>"
HOSTILE_RECORD = {
    "ts": "2026-11-18T10:16:50Z",  # inside a-7f3c's incident, ten seconds after its request
    "level": "warning",
    "event": HOSTILE,
    "service": "<script>window.__pwned=2</script>",
    "layer": "api",
    "allocation_id": "a-7f3c",
    "node_id": "<b>n</b>",  # refused by the adapter: noted in attrs, never an identifier
    "note": "<svg onload=window.__pwned=3>",
}
BASE_LAYERS = {"node", "ingress", "api", "workflow", "db"}
START_TIMEOUT_S = 30.0


@dataclass
class Site:
    """The running service and the browser that looks at it."""

    url: str
    browser: Browser


@dataclass
class Tab:
    """One browser tab and the uncaught errors its scripts raised."""

    page: Page
    errors: list[str] = field(default_factory=list)


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"correlator serve exited: {log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # polling a port that is not open yet: nothing to wait on
    raise TimeoutError(f"correlator serve did not answer within {START_TIMEOUT_S} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A real ``correlator serve`` over the demo incident and a hostile record, and Chromium.

    The browser starts while the service imports and opens its store: the two take seconds
    each on a small machine.
    """
    # Every test of the module comes through here: a missing part skips them, or fails them
    # in CI (tests.real_parts).
    if not PLAYWRIGHT:
        missing("Playwright", "the playwright package is not installed")
    if not CHROMIUM.exists():
        missing("Chromium", f"Debian's chromium is not installed ({CHROMIUM} is missing)")
    root = tmp_path_factory.mktemp("web")
    db = root / "demo.duckdb"
    demo.build(db, now_ns=DEMO_NOW_NS)
    port = free_port()
    env = {
        **os.environ,
        "CORRELATOR_TOKEN": WRITE_TOKEN,
        "CORRELATOR_READ_TOKEN": READ_TOKEN,
        "CORRELATOR_FINDINGS_INTERVAL_S": "0",
    }
    log = root / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "correlator", "--db", str(db), "serve", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM),
                args=[
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                ],
                headless=True,
            )
            _wait_healthy(url, process, log)
            posted = httpx.post(
                f"{url}/v1/evidence?source=ndjson",
                content=orjson.dumps(HOSTILE_RECORD),
                headers={"Authorization": f"Bearer {WRITE_TOKEN}"},
            )
            assert posted.json()["accepted"] == 1, posted.text
            yield Site(url, browser)
            browser.close()
    finally:
        _stop(process)


def _open(browser: Browser, *, token: str | None) -> Tab:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(10_000)
    if token is not None:
        context.add_init_script(
            f"window.sessionStorage.setItem('correlator.token', {orjson.dumps(token).decode()})"
        )
    tab = Tab(context.new_page())
    tab.page.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    return tab


@pytest.fixture(scope="module")
def shared_tab(site: Site) -> Iterator[Tab]:
    """One 1280x800 tab holding the read token, shared by the tests (each starts with goto)."""
    tab = _open(site.browser, token=READ_TOKEN)
    yield tab
    tab.page.context.close()


@pytest.fixture
def server(site: Site) -> str:
    """The service's base URL."""
    return site.url


@pytest.fixture
def page(shared_tab: Tab) -> Iterator[Page]:
    """The shared tab; the test fails on any uncaught error in the page's scripts."""
    shared_tab.errors.clear()
    yield shared_tab.page
    assert shared_tab.errors == []


def _timeline_json(server: str, query: str) -> dict[str, Any]:
    response = httpx.get(
        f"{server}/v1/timeline?{query}", headers={"Authorization": f"Bearer {READ_TOKEN}"}
    )
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def _lanes(page: Page) -> list[str]:
    layers: list[str] = page.locator("#lanes .lane").evaluate_all(
        "lanes => lanes.map(lane => lane.dataset.layer)"
    )
    return layers


def test_the_page_asks_for_the_read_token_and_keeps_it_for_the_tab(site: Site) -> None:
    tab = _open(site.browser, token=None)
    page, server = tab.page, site.url
    page.goto(f"{server}/")
    expect(page.locator("#auth")).to_be_visible()
    expect(page.locator("#auth-message")).to_contain_text("CORRELATOR_READ_TOKEN")
    expect(page.locator("#token")).to_be_focused()
    page.locator("#token").fill(READ_TOKEN)
    page.keyboard.press("Enter")
    expect(page.locator("#findings .finding")).to_have_count(2)
    expect(page.locator("#q")).to_be_focused()
    page.reload()
    expect(page.locator("#findings .finding")).to_have_count(2)
    expect(page.locator("#auth")).to_be_hidden()
    expect(page.locator("#q")).to_be_focused()
    assert page.evaluate("sessionStorage.getItem('correlator.token')") == READ_TOKEN
    page.context.close()
    assert tab.errors == []


def test_search_shows_lanes_verdict_evidence_and_pivots(server: str, page: Page) -> None:
    page.goto(f"{server}/")
    expect(page.locator("#q")).to_be_focused()
    page.keyboard.type("a-7f3c")
    page.keyboard.press("Enter")

    # The bare value resolves to an allocation, and the address bar says so.
    expect(page).to_have_url(f"{server}/?allocation_id=a-7f3c")
    expect(page.locator("#q")).to_have_value("allocation_id=a-7f3c")
    verdict = page.locator("#verdict")
    expect(verdict).to_contain_text("allocation_id=a-7f3c")
    expect(verdict.locator(".owner")).to_have_text("cert")
    expect(verdict).to_contain_text("confidence 95%")
    expect(verdict.locator(".verdict-loki")).to_have_count(0)  # no Loki: nothing pulled
    data = _timeline_json(server, "allocation_id=a-7f3c")
    present = {event["layer"] for event in data["events"]}
    assert present == BASE_LAYERS
    assert _lanes(page) == ["node", "ingress", "api", "workflow", "db"]
    expect(page.locator("#lanes .mark")).to_have_count(len(data["events"]))
    expect(page.locator("#lanes .mark.symptom")).to_have_count(len(data["verdict"]["explains"]))
    expect(page.locator("#lanes .reimage")).to_contain_text("reimage n-17: ni-3 → ni-4")
    expect(page.locator("#lanes .reimage-label")).to_have_text(["reimage n-17: ni-3 → ni-4"])
    expect(page.locator("#meta")).to_contain_text("api:provisioning-api -1.196 s")

    # The first failure opens with its raw evidence and identifiers.
    page.locator("#lanes .mark.first-failure").click()
    detail = page.locator("#detail")
    expect(detail).to_be_visible()
    expect(detail.locator(".flag-first")).to_have_text("first failure")
    expect(detail.locator("pre.raw")).to_contain_text(
        "SSL_do_handshake() failed (SSL: error:0A000086:SSL routines::certificate verify "
        "failed:certificate has expired)"
    )
    expect(detail.locator(".fields")).to_contain_text("certificate_expired")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "timeline.png"))

    # Pivot on the event's identifier, then on the node from the identifier list.
    correlation = data["verdict"]["first_failure"]["correlation_id"]
    detail.get_by_role("button", name=f"Show the timeline of correlation_id={correlation}").click()
    expect(page).to_have_url(f"{server}/?correlation_id={correlation}")
    expect(verdict).to_contain_text(f"correlation_id={correlation}")
    expect(detail).to_be_hidden()
    page.locator("#ids").get_by_role("button", name="Show the timeline of node_id=n-17").click()
    expect(page).to_have_url(f"{server}/?node_id=n-17")
    expect(verdict).to_contain_text("node_id=n-17")
    expect(page.locator("#q")).to_have_value("node_id=n-17")

    # Back and forward walk the searches.
    page.go_back()
    expect(page).to_have_url(f"{server}/?correlation_id={correlation}")
    expect(verdict).to_contain_text(f"correlation_id={correlation}")
    page.go_back()
    expect(verdict).to_contain_text("allocation_id=a-7f3c")
    page.go_forward()
    expect(verdict).to_contain_text(f"correlation_id={correlation}")


def test_findings_link_to_their_timelines(server: str, page: Page) -> None:
    page.goto(f"{server}/")
    links = page.locator("#findings a.finding-link")
    expect(links).to_have_count(2)
    hrefs = links.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert hrefs == ["/?allocation_id=a-51d2", "/?allocation_id=a-9e01"]
    expect(page.locator("#findings")).to_contain_text("release_failed_stuck")

    links.nth(1).click()
    expect(page).to_have_url(f"{server}/?allocation_id=a-9e01")
    expect(page.locator("#verdict")).to_contain_text("No failure found")
    # The drift case has provider and projection evidence: their lanes follow the five.
    assert _lanes(page) == ["node", "ingress", "api", "workflow", "db", "provider", "projection"]
    expect(page.locator("#lanes .gap")).to_have_count(2)
    expect(links.nth(1)).to_have_attribute("aria-current", "page")

    links.nth(0).click()
    expect(page).to_have_url(f"{server}/?allocation_id=a-51d2")
    expect(page.locator("#verdict .owner")).to_have_text("node")


def test_findings_say_when_only_the_oldest_lifecycle_events_were_read(
    server: str, page: Page
) -> None:
    answer = {"findings": [], "truncated": True}
    page.route(
        "**/v1/findings",
        lambda route: route.fulfill(content_type="application/json", body=orjson.dumps(answer)),
    )
    try:
        page.goto(f"{server}/")
        expect(page.locator("#findings-status")).to_have_text(
            "No open findings. Only the oldest lifecycle events were read: findings about the "
            "newest may be missing."
        )
    finally:
        page.unroute("**/v1/findings")


def test_keyboard_reaches_and_opens_events(server: str, page: Page) -> None:
    page.goto(f"{server}/?allocation_id=a-7f3c")
    expect(page.locator("#verdict .owner")).to_have_text("cert")
    expect(page.locator("#q")).to_be_focused()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('mark')"):
            break
    else:
        pytest.fail("Tab never reached an event mark")
    first = page.locator("#lanes .mark").first
    expect(first).to_be_focused()
    expect(first).to_have_attribute("aria-label", re.compile(r"reimage requested by inventory"))

    page.keyboard.press("ArrowRight")
    second = page.locator("#lanes .mark").nth(1)
    expect(second).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#detail")).to_be_visible()
    expect(page.locator("#detail-title")).to_be_focused()
    expect(page.locator("#detail-title")).to_have_text("Event at 10:06:40.000 UTC")
    expect(page.locator("#detail .detail-message")).to_have_text("agent started on a fresh image")
    page.keyboard.press("Escape")
    expect(page.locator("#detail")).to_be_hidden()
    expect(second).to_be_focused()


def test_dragging_across_the_lanes_zooms_and_reset_restores(server: str, page: Page) -> None:
    page.goto(f"{server}/?allocation_id=a-7f3c")
    marks = page.locator("#lanes .mark")
    expect(marks).to_have_count(15)
    first = page.locator("#lanes .mark.first-failure").bounding_box()
    lanes = page.locator("#lanes svg").bounding_box()
    assert first is not None and lanes is not None
    # From just before the first failure to just past it: only the burst around it remains.
    page.mouse.move(first["x"] - 4, lanes["y"] + 120)
    page.mouse.down()
    page.mouse.move(first["x"] + first["width"] + 30, lanes["y"] + 120, steps=4)
    page.mouse.up()
    expect(page.locator("#zoom-reset")).to_be_visible()
    expect(page.locator("#status")).to_contain_text("Zoomed to 10:16:4")
    shown = marks.count()
    assert 1 <= shown < 15
    expect(page.locator("#lanes .mark.first-failure")).to_have_count(1)
    expect(page.locator("#lanes .reimage")).to_have_count(0)
    page.locator("#zoom-reset").click()
    expect(marks).to_have_count(15)
    expect(page.locator("#zoom-reset")).to_be_hidden()


def _post(server: str, records: list[dict[str, Any]]) -> None:
    """Ingest agent records through ``POST /v1/evidence``; every one must be accepted."""
    posted = httpx.post(
        f"{server}/v1/evidence?source=ndjson",
        content=b"\n".join(orjson.dumps(record) for record in records),
        headers={"Authorization": f"Bearer {WRITE_TOKEN}"},
    )
    assert posted.json()["accepted"] == len(records), posted.text


def test_an_axis_over_several_days_names_each_day(server: str, page: Page) -> None:
    days = ["2026-11-10", "2026-11-11", "2026-11-12"]
    records = [
        {
            "ts": f"{day}T10:00:00Z",
            "level": "info",
            "event": f"step {i}",
            "service": "provisioning-api",
            "layer": "api",
            "allocation_id": "a-days",
        }
        for i, day in enumerate(days)
    ]
    _post(server, records)
    page.goto(f"{server}/?allocation_id=a-days")
    expect(page.locator("#lanes .mark")).to_have_count(3)
    expect(page.locator("#lanes .axis-date")).to_have_text("2026-11-10 UTC")
    labels = page.locator("#lanes .axis .tick").all_text_contents()
    # Each day after the first is named where its labels start: the same time on three days
    # must not read as three times "10:00:00".
    assert labels == ["10:00:00", "11-11 10:00:00", "11-12 10:00:00"]


def test_many_identifiers_of_a_kind_wait_behind_a_button(server: str, page: Page) -> None:
    corrs = [f"c-many-{i:02d}" for i in range(12)]
    records = [
        {
            "ts": f"2026-11-15T10:00:{i:02d}Z",
            "level": "info",
            "event": "request",
            "service": "provisioning-api",
            "layer": "api",
            "allocation_id": "a-many",
            "correlation_id": corr,
        }
        for i, corr in enumerate(corrs)
    ]
    _post(server, records)
    page.goto(f"{server}/?allocation_id=a-many")
    ids = page.locator("#ids")
    expect(ids.locator("button.pivot.current")).to_have_text("allocation_id=a-many")
    shown = ids.locator("button.pivot:not(.more)", has_text="correlation_id=")
    expect(shown).to_have_count(8)
    more = ids.get_by_role("button", name="Show 4 more correlation_id values")
    expect(more).to_have_text("4 more correlation_id")
    more.click()
    expect(shown).to_have_count(12)
    expect(ids.locator("button.more")).to_have_count(0)
    names = shown.all_text_contents()
    assert sorted(names) == [f"correlation_id={corr}" for corr in corrs]


def test_crowded_reimages_are_all_drawn_and_their_labels_never_overlap(
    server: str, page: Page
) -> None:
    # Six records of one node, its instance changing at each: five reimages in five seconds.
    records = [
        {
            "ts": f"2026-11-16T10:00:0{i}Z",
            "level": "info",
            "event": "agent started",
            "service": "node-agent",
            "layer": "node",
            "node_id": "n-crowd",
            "node_instance_id": f"ni-crowd-{i}",
        }
        for i in range(6)
    ]
    _post(server, records)
    page.goto(f"{server}/?node_id=n-crowd")
    expect(page.locator("#lanes .reimage")).to_have_count(5)
    expect(page.locator("#lanes .reimage-line")).to_have_count(5)
    boxes = page.locator("#lanes .reimage-label").evaluate_all(
        "labels => labels.map(l => { const b = l.getBBox(); return [b.x, b.x + b.width]; })"
    )
    assert 1 <= len(boxes) < 5
    for (_, end), (start, _) in itertools.pairwise(sorted(boxes)):
        assert end <= start, boxes


def test_hostile_evidence_and_input_are_shown_never_run(server: str, page: Page) -> None:
    page.goto(f"{server}/?allocation_id=a-7f3c")
    hostile = page.locator("#lanes .mark.lv-warning")
    expect(hostile).to_have_count(1)
    hostile.click()
    expect(page.locator("#detail .detail-message")).to_have_text(HOSTILE)
    expect(page.locator("#detail .service")).to_have_text("<script>window.__pwned=2</script>")
    expect(page.locator("#detail pre.attrs")).to_contain_text("<svg onload=window.__pwned=3>")
    expect(page.locator("#detail pre.attrs")).to_contain_text("rejected_ids")
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("document.querySelectorAll('#main svg svg, #detail svg').length") == 0

    # Typed into the search box, the same text comes back as the API's refusal, as text.
    page.locator("#q").fill(HOSTILE)
    page.keyboard.press("Enter")
    expect(page.locator("#error")).to_contain_text("allocation_id holds '<' (U+003C) at position 0")
    expect(page.locator("#verdict")).to_be_hidden()
    page.goto(f"{server}/?allocation_id=%3Cscript%3Ewindow.__pwned%3D4%3C/script%3E")
    expect(page.locator("#error")).to_contain_text("allocation_id holds '<'")
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        (
            "a-0000",
            "no evidence mentions a-0000 (tried it as allocation_id, correlation_id, "
            "workflow_id, node_id, node_instance_id)",
        ),
        ("allocation_id=a-404", "no evidence mentions allocation_id=a-404"),
        ("colour=blue", "give exactly one identifier: ?KEY=VALUE with KEY one of node_id"),
    ],
)
def test_errors_are_shown_plainly(server: str, page: Page, typed: str, message: str) -> None:
    page.goto(f"{server}/")
    page.locator("#q").fill(typed)
    page.keyboard.press("Enter")
    expect(page.locator("#error")).to_contain_text(message)
    expect(page.locator("#lanes-section")).to_be_hidden()


HTML_HOSTILE = '</script><script>window.__pwned=5</script> & "quotes"'


def test_the_html_file_shows_the_events_and_carries_the_timeline_as_json(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The browser of the module's site, not its service: the page is a file of its own.
    evidence = tmp_path / "agent.jsonl"
    records = [
        {
            "ts": "2026-11-22T13:11:19Z",
            "level": "info",
            "event": "task claimed",
            "service": "node-agent",
            "layer": "node",
            "allocation_id": "a-1",
        },
        {
            "ts": "2026-11-22T13:11:20Z",
            "level": "error",
            "event": HTML_HOSTILE,
            "service": "node-agent",
            "layer": "node",
            "allocation_id": "a-1",
        },
    ]
    evidence.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    db = str(tmp_path / "c.duckdb")
    assert main(["--db", db, "ingest", "--source", "agent", "--quiet", str(evidence)]) == 0
    assert main(["--db", db, "timeline", "--id", "allocation_id=a-1", "--json"]) == 0
    expected = orjson.loads(capsys.readouterr().out)
    written = tmp_path / "timeline.html"
    argv = ["--db", db, "timeline", "--id", "allocation_id=a-1", "--html", str(written)]
    assert main(argv) == 0

    tab = _open(site.browser, token=None)
    page = tab.page
    page.goto(written.as_uri())
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td").nth(4)).to_have_text("task claimed")
    hostile = rows.nth(1).locator("td").nth(4)
    expect(hostile).to_have_text(HTML_HOSTILE)
    expect(hostile).to_be_visible()
    data = page.evaluate("JSON.parse(document.getElementById('timeline-data').textContent)")
    # Two runs of the command, each stamped with its own time; the rest is the same timeline.
    assert data.pop("generated_at") >= expected.pop("generated_at")
    assert data == expected
    assert [event["message"] for event in data["events"]] == ["task claimed", HTML_HOSTILE]
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.context.close()
    assert tab.errors == []


def test_the_api_docs_render_with_no_request_leaving_the_machine(site: Site) -> None:
    # /docs is Swagger UI; its scripts and styles must come from the service itself (an
    # operator's machine may have no internet): every request to another host is refused
    # and recorded, and the page must render all the same.
    context = site.browser.new_context()
    outside: list[str] = []

    def only_local(route: Any) -> None:
        host = httpx.URL(route.request.url).host
        if host in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    docs = context.new_page()
    try:
        docs.goto(f"{site.url}/docs")
        expect(docs.locator(".swagger-ui .info .title")).to_contain_text(
            "evidence-pipeline correlator"
        )
        expect(docs.locator(".opblock-summary-path", has_text="/v1/timeline")).to_be_visible()
        docs.wait_for_load_state("networkidle")  # late requests (fonts, badges) too
    finally:
        context.close()
    assert outside == []


@pytest.fixture(scope="module")
def pulling(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Incident]]:
    """A second ``correlator serve``, over an empty database, started with the Loki test
    server holding an incident (``loki_incident``): its base URL, and the incident."""
    loki = LokiServer().start()
    root = tmp_path_factory.mktemp("web-loki")
    log = root / "serve.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORRELATOR_")}
    env["CORRELATOR_FINDINGS_INTERVAL_S"] = "0"
    case = Incident()
    try:
        with LokiClient(loki.url) as client:
            push_records(client, case.own() + case.others())
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "correlator", "--db", str(root / "pulled.duckdb"),
                 "serve", "--port", str(port), "--loki-url", loki.url,
                 "--loki-selector", case.selector],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, process, log)
            yield url, case
        finally:
            _stop(process)
    finally:
        loki.stop()


def test_a_service_with_a_loki_pulls_the_timeline_and_says_what_it_asked(
    site: Site, pulling: tuple[str, Incident]
) -> None:
    server, case = pulling
    tab = _open(site.browser, token=None)
    page = tab.page
    page.goto(f"{server}/?allocation_id={case.id('a')}")

    verdict = page.locator("#verdict")
    expect(verdict.locator(".owner")).to_have_text("node")
    line = verdict.locator(".verdict-loki")
    expect(line).to_have_text(re.compile(r"^Pulled from Loki: .* new\)\.$"))
    # What the page said is what the pull answered: asked again, Loki answers the same
    # entries, and the store gains none of them.
    again = httpx.get(f"{server}/v1/timeline?allocation_id={case.id('a')}").json()["loki"]
    hops, queries, entries = len(again["hops"]), again["requests"], again["entries"]
    assert again["new"] == 0
    assert entries >= 8  # the incident's own, across five layers
    expect(line).to_have_text(
        f"Pulled from Loki: {hops} hops, {queries} queries, {entries} entries ({entries} new)."
    )
    assert _lanes(page) == ["node", "ingress", "api", "workflow", "db"]
    page.context.close()
    assert tab.errors == []
