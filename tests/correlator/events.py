"""Small builders of literal events for the correlator's pure-core tests."""

from __future__ import annotations

from typing import Any

from correlator.model import Event, content_hash

T0 = 1_795_000_000_000_000_000  # 2026-11-17T..., any fixed instant
S = 1_000_000_000


def ev(offset_s: float, layer: str, message: str = "", **fields: Any) -> Event:
    """An event ``offset_s`` seconds after T0; the hash is unique per content."""
    raw = f"{offset_s}|{layer}|{message}|{sorted(fields.items())}"
    return Event(
        ts_ns=T0 + int(offset_s * S),
        layer=layer,
        source=fields.pop("source", "ndjson"),
        origin="test",
        message=message,
        raw=raw,
        hash=content_hash("test", raw),
        **fields,
    )
