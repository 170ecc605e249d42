"""How fast the strict Loki test server ingests pre-encoded pushes (entries/s, CPU µs/entry).

The server runs stand-alone in a child process, exactly as ``benchmarks.ship`` runs it
(:class:`benchmarks._common.LokiProcess`). This process encodes every batch before the clock
starts and then only sends them, one after the other, over one keep-alive
``http.client`` connection: the client is idle, so the figure is the server's ceiling.

Batches look like agent_logging's: protobuf + snappy, about 1 MiB each, 311-byte JSON lines,
five structured-metadata pairs per entry (four identifiers and ``level``), ``--streams``
streams per batch, timestamps new and increasing so that every entry is stored (none
de-duplicated, none refused). Each round sends ``--batches`` batches; the server keeps what
earlier rounds stored, so later rounds also pay for what it holds.

Reported per round: entries/s (entries / wall time from the first request sent until the
last response read) and the server process's CPU time per entry (user + system, from
``/proc/PID/stat`` before and after the round); the best of ``--rounds`` rounds is quoted.

Run: ``python -m benchmarks.lokisim_ingest [--rounds 3] [--batches 20] [--streams 1] [--json]``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import time
from typing import Any, Final
from urllib.parse import urlsplit

from benchmarks._common import LokiProcess, machine_note
from tests.lokisim import PushEntry, PushStream, encode_protobuf_push

LINE_BYTES: Final = 311
BATCH_BYTES: Final = 1 << 20
PUSH_PATH: Final = "/loki/api/v1/push"
HEADERS: Final = {"Content-Type": "application/x-protobuf", "Connection": "keep-alive"}
METADATA: Final = (
    ("node_instance_id", "ni-3"),
    ("correlation_id", "5f0c6f5e-8f8e-4a3b-9a53-1f2d3c4b5a69"),
    ("allocation_id", "a-9"),
    ("workflow_id", "wf-2"),
    ("level", "info"),
)


def _line(ts_ns: int, i: int) -> str:
    """An agent_logging-shaped JSON record padded to exactly ``LINE_BYTES`` bytes."""
    head = (
        f'{{"ts":"{ts_ns}","level":"info","event":"task claimed","service":"bench",'
        f'"layer":"node","env":"prod","node_id":"n-17","allocation_id":"a-9",'
        f'"workflow_id":"wf-2","task":"reimage","attempt":{i},"pad":"'
    )
    # Hex digits, not one repeated byte, so snappy compresses about as much as real records.
    pad = hashlib.sha256(str(i).encode()).hexdigest() * 5
    return head + pad[: LINE_BYTES - len(head) - 2] + '"}'


def _entry_bytes() -> int:
    # Line plus metadata plus about 20 bytes of protobuf framing and timestamp.
    return LINE_BYTES + sum(len(n) + len(v) + 6 for n, v in METADATA) + 20


def build_batches(n_batches: int, n_streams: int, first_ts_ns: int, first_i: int) -> list[bytes]:
    """Encode ``n_batches`` push bodies of about 1 MiB each.

    Args:
        n_batches: how many bodies.
        n_streams: streams per body (entries spread round-robin).
        first_ts_ns: timestamp of the first entry; each next entry is 1 µs later.
        first_i: the ``attempt`` counter of the first entry (keeps lines unique).

    Returns:
        The bodies, ready to POST.
    """
    per_batch = BATCH_BYTES // _entry_bytes()
    bodies = []
    i = first_i
    for _ in range(n_batches):
        per_stream: list[list[PushEntry]] = [[] for _ in range(n_streams)]
        for k in range(per_batch):
            ts_ns = first_ts_ns + (i - first_i) * 1000
            per_stream[k % n_streams].append(PushEntry(ts_ns, _line(ts_ns, i), METADATA))
            i += 1
        streams = [
            PushStream(
                f'{{service_name="bench", layer="node", env="prod", node_id="n-{s}"}}',
                tuple(entries),
            )
            for s, entries in enumerate(per_stream)
        ]
        bodies.append(encode_protobuf_push(streams))
    return bodies


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def send_round(url: str, bodies: list[bytes]) -> float:
    """POST every body in order over one keep-alive connection; return the wall time.

    Raises:
        RuntimeError: the server answered anything but 204.
    """
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        connection.connect()
        began = time.perf_counter()
        for body in bodies:
            connection.request("POST", PUSH_PATH, body=body, headers=HEADERS)
            response = connection.getresponse()
            answer = response.read()
            if response.status != 204:
                raise RuntimeError(f"push answered {response.status}: {answer[:300]!r}")
        return time.perf_counter() - began
    finally:
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=20, help="about 1 MiB each, per round")
    parser.add_argument("--streams", type=int, default=1, help="streams per batch")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    note = machine_note()
    start_ns = time.time_ns() - 60 * 1_000_000_000
    per_round = []
    with LokiProcess() as loki:
        process = getattr(loki, "_process", None)
        if process is None:
            raise RuntimeError("no server process")
        pid = int(process.pid)
        stored = 0
        for r in range(args.rounds):
            first_i = r * args.batches * (BATCH_BYTES // _entry_bytes())
            bodies = build_batches(args.batches, args.streams, start_ns + first_i * 1000, first_i)
            entries = args.batches * (BATCH_BYTES // _entry_bytes())
            cpu_before = _cpu_s(pid)
            wall_s = send_round(loki.url, bodies)
            cpu_s = _cpu_s(pid) - cpu_before
            stored += entries
            held = loki.count()
            if held != stored:
                raise RuntimeError(f"the server holds {held} entries, expected {stored}")
            per_round.append(
                {
                    "entries": entries,
                    "body_bytes": sum(map(len, bodies)) // len(bodies),
                    "wall_s": round(wall_s, 4),
                    "entries_per_s": round(entries / wall_s),
                    "server_cpu_us_per_entry": round(cpu_s / entries * 1e6, 2),
                    "held_after": held,
                }
            )
    best = max(per_round, key=lambda run: run["entries_per_s"])
    result: dict[str, Any] = {
        "machine": note,
        "streams": args.streams,
        "rounds": per_round,
        "best_entries_per_s": best["entries_per_s"],
        "best_server_cpu_us_per_entry": min(r["server_cpu_us_per_entry"] for r in per_round),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(note)
    print(f"streams per batch: {args.streams}; batch ~{best['body_bytes']:,} bytes compressed")
    for i, run in enumerate(per_round, 1):
        print(
            f"round {i}: {run['entries']:,} entries in {run['wall_s']:.3f} s = "
            f"{run['entries_per_s']:,} entries/s, server CPU {run['server_cpu_us_per_entry']} "
            f"µs/entry (holding {run['held_after']:,})"
        )
    print(
        f"best of {args.rounds}: {result['best_entries_per_s']:,} entries/s, "
        f"{result['best_server_cpu_us_per_entry']} µs CPU/entry in the server"
    )


if __name__ == "__main__":
    main()
