"""The terminal table of a timeline: every event once, each gap and reimage marked once."""

from __future__ import annotations

from typing import Any

import pytest

from correlator.render import print_timeline

T = 1_795_367_175_000_000_000
S = 1_000_000_000


def _event(ts_ns: int, layer: str, message: str, **fields: Any) -> dict[str, Any]:
    return {"ts": "", "ts_ns": ts_ns, "layer": layer, "message": message, **fields}


def test_markers_appear_once_before_the_first_event_at_their_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Two events share the gap's end (an API record corrected onto the ingress clock lands on
    # the ingress record's nanosecond), and two the reimage's first sighting.
    data = {
        "verdict": {"owner_layer": None, "confidence": 0.0, "explains": []},
        "ids": {"allocation_id": ["a-1"]},
        "clock_offsets": {},
        "events": [
            _event(T, "node", "agent started", node_id="n-1", node_instance_id="ni-1"),
            _event(T + 600 * S, "api", "request", corrected_ts_ns=T + 601 * S),
            _event(T + 601 * S, "ingress", "POST /v1/allocations"),
            _event(T + 700 * S, "node", "task claimed", node_id="n-1", node_instance_id="ni-2"),
            _event(T + 700 * S, "node", "heartbeat", node_id="n-1", node_instance_id="ni-2"),
        ],
        "gaps": [{"from_ns": T, "to_ns": T + 601 * S, "seconds": 601.0}],
        "reimages": [
            {
                "node_id": "n-1",
                "from_instance": "ni-1",
                "to_instance": "ni-2",
                "first_seen_new_ns": T + 700 * S,
            }
        ],
        "truncated": False,
    }
    print_timeline(data)
    out = capsys.readouterr().out
    assert out.count("gap of 601.0 s") == 1
    assert out.count("reimage: n-1 ni-1 → ni-2") == 1
    assert out.index("gap of 601.0 s") < out.index("request") < out.index("POST /v1/allocations")
    assert out.index("reimage: n-1") < out.index("task claimed") < out.index("heartbeat")
