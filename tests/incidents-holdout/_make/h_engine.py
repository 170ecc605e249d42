"""The workflow engine of the hold-out workflow_state case: python-statemachine per allocation.

``/tmp/h_venv/bin/python h_engine.py PORT STATE_JSON LOG AUDIT`` serves on 127.0.0.1:PORT:

- ``POST /allocations/{id}/events/{event}``: ``release`` is applied at once (200, or 409 with
  the machine's ``TransitionNotAllowed`` text); every other event is queued (202) and applied
  by a worker thread in batches every 2 s, as the engine acknowledges its outbox feed.

STATE_JSON holds ``{allocation_id: {"state": ..., "workflow_id": ..., "node_id": ...}}``; it is
loaded at start and rewritten after each transition. SIGTERM logs how many queued events are
dropped and exits. LOG gets record-schema lines (structlog-style, the traceback in
``exception``); AUDIT gets one ``workflow`` transition line per applied event.
"""

from __future__ import annotations

import datetime as dt
import json
import queue
import re
import signal
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from statemachine import State, StateMachine
from statemachine.exceptions import TransitionNotAllowed

PORT, STATE, LOG, AUDIT = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
LOCK = threading.Lock()


class AllocationMachine(StateMachine):
    requested = State(initial=True)
    provisioning = State()
    active = State()
    releasing = State()
    released = State(final=True)

    provision = requested.to(provisioning)
    provisioned = provisioning.to(active)
    release = active.to(releasing)
    release_done = releasing.to(released)


def stamp() -> str:
    return dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")


def log(level: str, event: str, **fields: Any) -> None:
    record = {
        "ts": stamp(),
        "level": level,
        "event": event,
        "service": "workflow-engine",
        "layer": "workflow",
        "logger": "engine.machine",
        **{k: v for k, v in fields.items() if v is not None},
    }
    with LOCK, LOG.open("a") as out:
        out.write(json.dumps(record) + "\n")


def load() -> dict[str, dict[str, Any]]:
    return json.loads(STATE.read_text())


def machine_for(info: dict[str, Any]) -> AllocationMachine:
    return AllocationMachine(start_value=info["state"])


def apply(alloc: str, event: str, correlation_id: str | None) -> tuple[int, str]:
    with LOCK:
        allocations = load()
    info = allocations.get(alloc)
    if info is None:
        return 404, f"unknown allocation {alloc}"
    machine = machine_for(info)
    before = info["state"]
    ids = {
        "allocation_id": alloc,
        "workflow_id": info.get("workflow_id"),
        "node_id": info.get("node_id"),
        "correlation_id": correlation_id,
    }
    try:
        machine.send(event)
    except TransitionNotAllowed as exc:
        log(
            "error",
            "event rejected by the allocation state machine",
            event_name=event,
            state=before,
            error={"type": "statemachine.exceptions.TransitionNotAllowed", "message": str(exc)},
            exception=traceback.format_exc(),
            **ids,
        )
        return 409, str(exc)
    after = next(iter(machine.configuration)).id
    with LOCK:
        allocations = load()
        allocations[alloc]["state"] = after
        STATE.write_text(json.dumps(allocations))
        with AUDIT.open("a") as out:
            out.write(
                json.dumps(
                    {
                        "ts": stamp(),
                        "entity_kind": "allocation",
                        "entity_id": alloc,
                        "from": before,
                        "to": after,
                        "attributes": {"event": event},
                        "service": "workflow-engine",
                        **{k: v for k, v in ids.items() if v and k != "correlation_id"},
                    }
                )
                + "\n"
            )
    log("info", "transition applied", event_name=event, state_from=before, state_to=after, **ids)
    return 200, after


EVENTS: queue.Queue[tuple[str, str, str | None]] = queue.Queue()


def worker() -> None:
    while True:
        time.sleep(2.0)
        while not EVENTS.empty():
            apply(*EVENTS.get())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        found = re.fullmatch(r"/allocations/([^/]+)/events/([a-z_]+)", self.path)
        if not found:
            status, text = 404, "no such route"
        elif found[2] == "release":
            status, text = apply(found[1], "release", self.headers.get("X-Correlation-ID"))
        else:
            EVENTS.put((found[1], found[2], self.headers.get("X-Correlation-ID")))
            log(
                "info",
                "event queued",
                allocation_id=found[1],
                event_name=found[2],
                queued=EVENTS.qsize(),
            )
            status, text = 202, "queued"
        data = json.dumps({"result": text} if status < 300 else {"error": text}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


def stop(signum: int, frame: Any) -> None:
    log("warning", f"shutting down on SIGTERM: {EVENTS.qsize()} queued event(s) not processed")
    sys.exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, stop)
    log(
        "info",
        f"workflow-engine {sys.argv[5] if len(sys.argv) > 5 else '2.8.0'} listening "
        f"on 127.0.0.1:{PORT}",
    )
    threading.Thread(target=worker, daemon=True).start()
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
