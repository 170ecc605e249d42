from __future__ import annotations

import dataclasses

import pytest

from correlator.model import Event
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
    ("skews", "inner_s", "expected_offset", "consistent"),
    [
        ([0.0, 0.0, 0.0], 0.05, 0.0, True),  # inside already: no correction
        ([1.2, 1.2, 1.2], 0.05, -1.195, True),  # API 1.2 s ahead: pulled back just inside
        ([-2.0, -2.0], 0.05, 1.955, True),  # 2 s behind: pushed forward just inside
        ([1.2, -2.0], 0.05, 0.38, False),  # contradictory pairs: median of nearest shifts
        # Nearest shifts -1.195, -0.495 and 1.955: the median, not the mean (0.088) nor the
        # midpoint of the extremes (0.38).
        ([1.2, 0.5, -2.0], 0.05, -0.495, False),
        # The API's 0.3 s request does not fit the ingress's 0.1 s one: centred on it (shifts
        # -0.795 to keep the start inside, -0.995 the end: -0.895).
        ([1.0], 0.3, -0.895, True),
    ],
)
def test_clock_offsets_from_request_pairs(
    skews: list[float], inner_s: float, expected_offset: float, consistent: bool
) -> None:
    events = [
        e for n, skew in enumerate(skews) for e in _pair(10 * n, skew, f"c-{n}", inner_s=inner_s)
    ]
    offsets = estimate_offsets(events)
    assert set(offsets) == {"api:api"}
    assert offsets["api:api"].offset_s == pytest.approx(expected_offset, abs=1e-6)
    assert offsets["api:api"].consistent is consistent
    assert offsets["api:api"].pairs == len(skews)


def _request(at_s: float, layer: str, **route: str) -> Event:
    """A request of correlation c-1 ending at ``at_s``: 0.1 s at the ingress, 0.05 s at the API
    (which ends 5 ms before the ingress, on the same clock)."""
    api = layer == "api"
    return ev(
        at_s - 0.005 if api else at_s,
        layer,
        "request",
        http_status=200,
        duration_s=0.05 if api else 0.1,
        correlation_id="c-1",
        service=layer,
        **route,
    )


POST = {"http_method": "POST", "http_path": "/v1/allocations"}
GET = {"http_method": "GET", "http_path": "/v1/nodes"}


@pytest.mark.parametrize(
    ("events", "expected_offset"),
    [
        # One correlation id, two requests through the ingress: the API's is the nearer one,
        # though listed second.
        ([_request(0, "ingress"), _request(10, "ingress"), _request(10, "api")], 0.0),
        # The same method and path before nearness: the POST ended 10 s before the API's.
        (
            [
                _request(0, "ingress", **POST),
                _request(10, "ingress", **GET),
                _request(10, "api", **POST),
            ],
            -9.995,
        ),
        # The nearer of two POSTs (ended 8 s after the API's), not the GET at the same time.
        (
            [
                _request(0, "ingress", **POST),
                _request(12, "ingress", **GET),
                _request(20, "ingress", **POST),
                _request(12, "api", **POST),
            ],
            7.955,
        ),
    ],
)
def test_the_outer_request_is_the_nearest_of_the_same_route(
    events: list[Event], expected_offset: float
) -> None:
    offset = estimate_offsets(events)["api:api"]
    assert (offset.offset_s, offset.pairs) == (pytest.approx(expected_offset, abs=1e-6), 1)


@pytest.mark.parametrize("duration_s", [1e300, 1.7e308])
def test_a_hostile_request_duration_gives_an_offset_not_an_error(duration_s: float) -> None:
    # A stored request of 1e300 s (a hostile $request_time) made int(inf) raise OverflowError
    # and the timeline fail; such a request reaches back to the earliest time there is.
    events = [
        dataclasses.replace(_request(10, "ingress"), duration_s=duration_s),
        _request(10, "api"),
    ]
    offset = estimate_offsets(events)["api:api"]
    assert offset.pairs == 1


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


@pytest.mark.parametrize(
    ("gap_s", "silence_ns", "gaps"),
    [
        (600.0, 600 * S, []),  # exactly gap_s: not a gap
        (600.0, 600 * S + 1, [600.0]),  # a nanosecond longer
        (0.5, S // 2, []),
        (0.5, S // 2 + 1, [0.5]),
    ],
)
def test_a_gap_is_a_silence_longer_than_gap_s(
    gap_s: float, silence_ns: int, gaps: list[float]
) -> None:
    before = ev(0, "workflow", "provisioning")
    after = dataclasses.replace(ev(0, "workflow", "active"), ts_ns=T0 + silence_ns)
    timeline = build([before, after], gap_s=gap_s)
    assert timeline.gaps == [
        {"from_ns": T0, "to_ns": T0 + silence_ns, "seconds": seconds} for seconds in gaps
    ]
