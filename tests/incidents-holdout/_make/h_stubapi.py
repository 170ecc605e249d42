"""The provisioning API of the hold-out web cases: stdlib ``http.server``, JSON log lines.

``python h_stubapi.py PORT TASKS_JSON LOG`` serves, on 127.0.0.1:PORT:

- ``POST /v1/nodes/{node}/tasks/claim``: the node's pending task from TASKS_JSON (re-read on
  every request: ``{"r22-n08": {"task_id": 8812, "allocation_id": "...", ...}}``), else 404
  ``no pending task``;
- ``POST /v1/tasks/{id}/result``: 200;
- ``GET /v1/allocations/{id}/console``: 404 ``console not ready`` until the allocation is in
  TASKS_JSON's ``consoles`` list, then 200;
- ``GET /v1/allocations/{id}``: 200 from TASKS_JSON's ``allocations``, else 404;
- ``GET /healthz``: 200.

Each request writes one record-schema line (``layer`` api) to LOG with nginx's
``X-Request-ID`` as ``correlation_id``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PORT, TASKS, LOG = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])


def log(level: str, event: str, **fields: Any) -> None:
    record = {
        "ts": dt.datetime.now(dt.UTC).isoformat(),
        "level": level,
        "event": event,
        "service": "provisioning-api",
        "layer": "api",
        **{k: v for k, v in fields.items() if v is not None},
    }
    with LOG.open("a") as out:
        out.write(json.dumps(record) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, body: dict[str, Any], ids: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        log(
            "info",
            "request",
            method=self.command,
            path=self.path,
            status=status,
            duration_s=round(time.monotonic() - self.started, 6),
            **ids,
        )

    def _route(self) -> None:
        self.started = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        state = json.loads(TASKS.read_text())
        ids: dict[str, Any] = {"correlation_id": self.headers.get("X-Request-ID")}
        if self.path == "/healthz":
            return self._answer(200, {"ok": True}, {})
        claim = re.fullmatch(r"/v1/nodes/([^/]+)/tasks/claim", self.path)
        if claim and self.command == "POST":
            ids["node_id"] = claim[1]
            task = state.get("tasks", {}).get(claim[1])
            if not task:
                return self._answer(404, {"error": "no pending task"}, ids)
            ids.update(allocation_id=task["allocation_id"], workflow_id=task.get("workflow_id"))
            log("info", "task claimed", task_id=task["task_id"], **ids)
            return self._answer(200, {"task": task}, ids)
        result = re.fullmatch(r"/v1/tasks/(\d+)/result", self.path)
        if result and self.command == "POST":
            for node, task in state.get("tasks", {}).items():
                if str(task["task_id"]) == result[1]:
                    ids.update(
                        node_id=node,
                        allocation_id=task["allocation_id"],
                        workflow_id=task.get("workflow_id"),
                    )
            log("info", "task result recorded", task_id=int(result[1]), **ids)
            return self._answer(200, {"recorded": True}, ids)
        console = re.fullmatch(r"/v1/allocations/([^/]+)/console", self.path)
        if console and self.command == "GET":
            ids["allocation_id"] = console[1]
            if console[1] in state.get("consoles", []):
                return self._answer(200, {"url": f"wss://console.prov.internal/{console[1]}"}, ids)
            return self._answer(404, {"error": "console not ready"}, ids)
        alloc = re.fullmatch(r"/v1/allocations/([^/]+)", self.path)
        if alloc and self.command == "GET":
            ids["allocation_id"] = alloc[1]
            found = state.get("allocations", {}).get(alloc[1])
            if found is None:
                return self._answer(404, {"error": f"allocation {alloc[1]} not found"}, ids)
            return self._answer(200, found, ids)
        return self._answer(404, {"error": "no such route"}, ids)

    do_GET = do_POST = _route

    def log_message(self, format: str, *args: Any) -> None:
        return


if __name__ == "__main__":
    log("info", f"listening on 127.0.0.1:{PORT}")
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
