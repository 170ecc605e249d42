"""Fault injection: failures, stalls, resets, delays, outages and data loss."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.lokisim import LokiServer, PushEntry, PushStream, encode_protobuf_push

pytestmark = pytest.mark.integration

PROTO = {"Content-Type": "application/x-protobuf"}


def body(loki: LokiServer, line: str) -> bytes:
    entry = PushEntry(loki.limits.now(), line)
    return encode_protobuf_push([PushStream('{service_name="api"}', (entry,))])


@pytest.fixture
def push(http: httpx.Client, loki: LokiServer) -> Callable[[str], httpx.Response]:
    def send(line: str) -> httpx.Response:
        return http.post(f"{loki.url}/loki/api/v1/push", content=body(loki, line), headers=PROTO)

    return send


def stored(loki: LokiServer) -> list[str]:
    return [entry.line for entry in loki.entries()]


def test_fail_next_answers_without_storing(
    loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    loki.fail_next(2, 503, body="ingester unavailable")
    first, second, third = push("one"), push("two"), push("three")
    assert [(r.status_code, r.text) for r in (first, second)] == [(503, "ingester unavailable")] * 2
    assert "retry-after" not in first.headers
    assert third.status_code == 204
    assert stored(loki) == ["three"]
    assert [(r.status, r.entries_in_body) for r in loki.requests] == [(503, 1), (503, 1), (204, 1)]


@pytest.mark.parametrize(("retry_after_s", "header"), [(2, "2"), (0.5, "0.5"), (30.0, "30")])
def test_fail_next_sends_retry_after(
    loki: LokiServer, push: Callable[[str], httpx.Response], retry_after_s: float, header: str
) -> None:
    loki.fail_next(1, 429, retry_after_s=retry_after_s)
    response = push("x")
    assert (response.status_code, response.headers["retry-after"]) == (429, header)


def test_pending_faults_counts_unconsumed_faults(
    loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    loki.fail_next(2, 500)
    loki.stall_next(1, 0.0)
    assert loki.pending_faults == 3
    push("a")
    assert loki.pending_faults == 2


def test_faults_are_consumed_in_order_by_pushes_only(
    http: httpx.Client, loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    loki.fail_next(1, 500)
    loki.reset_next(1)
    loki.fail_next(1, 429)
    query = {"query": '{service_name="api"}'}
    assert http.get(f"{loki.url}/loki/api/v1/query_range", params=query).status_code == 200
    assert http.get(f"{loki.url}/ready").status_code == 200
    assert push("a").status_code == 500
    with pytest.raises(httpx.TransportError):
        push("b")
    assert push("c").status_code == 429
    assert push("d").status_code == 204
    assert stored(loki) == ["d"]


def test_reset_next_drops_the_connection_without_a_response(
    loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    loki.reset_next(1)
    with pytest.raises(httpx.TransportError):
        push("lost")
    assert push("kept").status_code == 204
    assert stored(loki) == ["kept"]
    reset, ok = loki.requests
    assert (reset.status, reset.entries_in_body, ok.status) == (0, 1, 204)


def test_stall_next_holds_the_request_then_answers_normally(
    loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    loki.stall_next(1, 0.2)
    assert push("slow").status_code == 204
    assert stored(loki) == ["slow"]


def test_stall_longer_than_the_client_timeout_still_stores(loki: LokiServer) -> None:
    loki.stall_next(1, 0.5)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{loki.url}/loki/api/v1/push", content=body(loki, "late"), headers=PROTO, timeout=0.05
        )
    # The server finishes the stalled request: the client's retry will be de-duplicated.
    assert loki.wait_for_entries(1, timeout_s=5.0)
    assert stored(loki) == ["late"]


def test_set_delay_slows_every_push(
    loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    loki.set_delay(0.5)
    for line in ("a", "b"):
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                f"{loki.url}/loki/api/v1/push",
                content=body(loki, line),
                headers=PROTO,
                timeout=0.05,
            )
    loki.set_delay(0)
    assert push("c").status_code == 204
    assert loki.wait_for_entries(3, timeout_s=5.0)


def test_stop_interrupts_a_stall(loki: LokiServer) -> None:
    loki.stall_next(1, 60.0)
    errors: list[BaseException] = []

    def client() -> None:
        try:
            httpx.post(f"{loki.url}/loki/api/v1/push", content=body(loki, "x"), headers=PROTO)
        except httpx.TransportError as exc:
            errors.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    # The stall begins once the push has taken its fault from the queue.
    deadline = time.monotonic() + 10.0
    while loki.pending_faults and time.monotonic() < deadline:
        thread.join(timeout=0.01)
    loki.stop()
    thread.join(timeout=10.0)
    assert not thread.is_alive()
    assert len(errors) == 1
    assert loki.count() == 0


def test_outage_refuses_connections_and_keeps_data(
    http: httpx.Client, loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    assert push("before").status_code == 204
    url = loki.url
    with httpx.Client(base_url=url) as kept_alive:
        assert kept_alive.get("/ready").status_code == 200
        loki.go_down()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/ready")
        with pytest.raises(httpx.TransportError):
            kept_alive.get("/ready")
        loki.come_up()
        assert loki.url == url
        assert kept_alive.get("/ready").status_code == 200
    assert push("after").status_code == 204
    assert stored(loki) == ["before", "after"]


def test_drop_stored_simulates_data_loss(
    http: httpx.Client, loki: LokiServer, push: Callable[[str], httpx.Response]
) -> None:
    for line in ("a", "b", "c"):
        push(line)
    assert loki.drop_stored(lambda entry: entry.line != "b") == 2
    assert stored(loki) == ["b"]
    query = {"query": '{service_name="api"}'}
    result = http.get(f"{loki.url}/loki/api/v1/query_range", params=query).json()["data"]["result"]
    assert [v[1] for stream in result for v in stream["values"]] == ["b"]
    # A resend of a lost entry is stored again.
    assert push("a").status_code == 204
    assert sorted(stored(loki)) == ["a", "b"]


def test_module_entry_point_serves_until_sigterm(http: httpx.Client) -> None:
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.lokisim", "--host", "127.0.0.1", "--port", "0"],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline().strip()
        assert banner.startswith("listening on http://127.0.0.1:")
        url = banner.removeprefix("listening on ")
        assert http.get(f"{url}/ready").text == "ready\n"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
