"""Two real services on 127.0.0.1, each its own process, one calling the other.

``python -m examples.two_services`` starts ``inventory`` (layer ``api``) and ``provisioner``
(layer ``workflow``) under uvicorn, sends one request to the provisioner, which calls the
inventory with httpx and hands the work to a subprocess; then it prints every record the three
processes wrote, in time order. The same ``correlation_id``, ``allocation_id`` and ``trace_id``
appear in all of them, and nobody passed them by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def inventory_app() -> Any:
    """Service B: answers which node an allocation gets."""
    from fastapi import FastAPI

    import agent_logging
    from agent_logging.integrations.asgi import AgentLoggingMiddleware

    agent_logging.configure(service="inventory", layer="api", output="stdout", format="json")
    log = agent_logging.get_logger("inventory")
    app = FastAPI()
    app.add_middleware(AgentLoggingMiddleware)

    @app.post("/v1/nodes/reserve")
    def reserve() -> dict[str, str]:
        agent_logging.bind(node_id="n-17")
        log.info("node reserved", ids=agent_logging.current_ids())
        return {"node_id": "n-17"}

    return app


def provisioner_app(inventory_url: str) -> Any:
    """Service A: allocates, calls B, starts a subprocess."""
    from fastapi import FastAPI

    import agent_logging
    from agent_logging.integrations.asgi import AgentLoggingMiddleware
    from agent_logging.integrations.httpx import async_event_hooks

    agent_logging.configure(
        service="provisioner",
        layer="workflow",
        output="stdout",
        format="json",
        propagate_hosts=("127.0.0.1",),
    )
    log = agent_logging.get_logger("provisioner")
    app = FastAPI()
    app.add_middleware(AgentLoggingMiddleware)

    @app.post("/v1/allocations/{allocation_id}")
    async def allocate(allocation_id: str) -> dict[str, str]:
        with agent_logging.bound(allocation_id=allocation_id, workflow_id=f"wf-{allocation_id}"):
            log.info("allocation requested")
            async with httpx.AsyncClient(event_hooks=async_event_hooks()) as client:
                node = (await client.post(f"{inventory_url}/v1/nodes/reserve")).json()
            agent_logging.bind(node_id=node["node_id"])
            job = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "examples.two_services", "job",
                env={**os.environ, **agent_logging.env()},
            )  # fmt: skip
            await job.wait()
            log.info("allocation provisioned", node_id=node["node_id"])
        return {"allocation_id": allocation_id, **node}

    return app


def job() -> None:
    """The subprocess: an Ansible-like job that inherits the identifiers by environment."""
    import agent_logging

    agent_logging.configure(service="deploy-job", layer="workflow", output="stdout", format="json")
    agent_logging.get_logger("job").info("playbook finished", playbook="reimage.yml")


def _serve(name: str, port: int, inventory_url: str) -> None:
    import uvicorn

    app = inventory_app() if name == "inventory" else provisioner_app(inventory_url)
    uvicorn.run(app, host="127.0.0.1", port=port, log_config=None, access_log=False)


def _wait_ready(url: str, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while True:
        try:
            httpx.get(url, timeout=0.5)
        except httpx.TransportError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)
        else:
            return


def run_demo(out_dir: Path) -> list[dict[str, Any]]:
    """Start both services, make one request, stop them; returns every record, time-ordered."""
    inventory_port, provisioner_port = _free_port(), _free_port()
    inventory_url = f"http://127.0.0.1:{inventory_port}"
    provisioner_url = f"http://127.0.0.1:{provisioner_port}"
    processes = []
    outputs = []
    for name, port in (("inventory", inventory_port), ("provisioner", provisioner_port)):
        out = (out_dir / f"{name}.jsonl").open("wb")
        outputs.append(out)
        argv = [sys.executable, "-m", "examples.two_services", "serve", name, str(port)]
        argv.append(inventory_url)
        processes.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL))
    try:
        _wait_ready(f"{inventory_url}/docs", 20)
        _wait_ready(f"{provisioner_url}/docs", 20)
        response = httpx.post(f"{provisioner_url}/v1/allocations/a-9", timeout=30)
        response.raise_for_status()
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
        for out in outputs:
            out.close()
    records = []
    for path in sorted(out_dir.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            if line.startswith(b"{"):
                records.append(orjson.loads(line))
    return sorted(records, key=lambda record: record["ts"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve")
    serve.add_argument("name", choices=("inventory", "provisioner"))
    serve.add_argument("port", type=int)
    serve.add_argument("inventory_url")
    sub.add_parser("job")
    args = parser.parse_args(argv)
    if args.command == "serve":
        _serve(args.name, args.port, args.inventory_url)
    elif args.command == "job":
        job()
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            for record in run_demo(Path(tmp)):
                print(orjson.dumps(record).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
