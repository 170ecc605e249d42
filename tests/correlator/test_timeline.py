from __future__ import annotations

import pytest

from correlator.timeline import build, estimate_offsets
from tests.correlator.events import T0, S, ev


def _pair(
    at_s: float, skew_s: float, cid: str, outer_s: float = 0.1, inner_s: float = 0.05
) -> list:  # type: ignore[type-arg]
    """An ingress access line ending at ``at_s`` and the API's record of the same request,
    stamped by a clock ``skew_s`` ahead, ending 5 ms before the ingress finished."""
    return [
        ev(
            at_s,
            "ingress",
            "POST",
            http_status=200,
            duration_s=outer_s,
            correlation_id=cid,
            service="nginx",
        ),
        ev(
            at_s - 0.005 + skew_s,
            "api",
            "request",
            http_status=200,
            duration_s=inner_s,
            correlation_id=cid,
            service="api",
        ),
    ]


@pytest.mark.parametrize(
    ("skews", "expected_offset", "consistent"),
    [
        ([0.0, 0.0, 0.0], 0.0, True),  # inside already: no correction
        ([1.2, 1.2, 1.2], -1.195, True),  # API 1.2 s ahead: pulled back just inside
        ([-2.0, -2.0], 1.955, True),  # 2 s behind: pushed forward just inside
        ([1.2, -2.0], 0.38, False),  # contradictory pairs: median of nearest shifts
    ],
)
def test_clock_offsets_from_request_pairs(
    skews: list[float], expected_offset: float, consistent: bool
) -> None:
    events = [e for n, skew in enumerate(skews) for e in _pair(10 * n, skew, f"c-{n}")]
    offsets = estimate_offsets(events)
    assert set(offsets) == {"api:api"}
    assert offsets["api:api"].offset_s == pytest.approx(expected_offset, abs=1e-6)
    assert offsets["api:api"].consistent is consistent
    assert offsets["api:api"].pairs == len(skews)


def test_no_ingress_means_no_offsets() -> None:
    assert estimate_offsets([ev(0, "api", "request", http_status=200, correlation_id="c-1")]) == {}


def test_corrected_order_gaps_and_reimages() -> None:
    skewed = _pair(100, 1.2, "c-1")
    events = [
        ev(0, "node", "reimage requested", node_id="n-17", node_instance_id="ni-3"),
        ev(50, "node", "agent started", node_id="n-17", node_instance_id="ni-4"),
        *skewed,
        ev(100.5, "workflow", "provisioning"),
        ev(2000, "workflow", "active"),
    ]
    timeline = build(events, gap_s=600)
    # The API record (stamped 101.195) sorts before the workflow event once corrected.
    assert [e.message for e in timeline.events] == [
        "reimage requested",
        "agent started",
        "request",
        "POST",
        "provisioning",
        "active",
    ]
    assert timeline.gaps == [
        {"from_ns": T0 + int(100.5 * S), "to_ns": T0 + 2000 * S, "seconds": 1899.5}
    ]
    assert timeline.reimages == [
        {
            "node_id": "n-17",
            "from_instance": "ni-3",
            "to_instance": "ni-4",
            "last_seen_old_ns": T0,
            "first_seen_new_ns": T0 + 50 * S,
        }
    ]
    assert timeline.truncated is False
