"""Durations, times and the findings' thresholds as the CLI and the HTTP API read them."""

from __future__ import annotations

import contextlib
import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from correlator import _environ
from correlator.errors import QueryError
from correlator.findings import DEFAULTS, FindingsConfig
from correlator.ingest import ingest_lines
from correlator.queries import findings, findings_config, parse_duration_s, parse_time_ns
from correlator.store import Store

# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15m", 900.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("1w", 604800.0),
        ("1y", 31536000.0),
        ("1d2h3m4s5ms", 93784.005),
    ],
)
def test_parse_duration_s(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "'' is not a duration"),
        ("1.5h", "'1.5h' is not a duration: use integers with units y, w, d, h, m, s, ms"),
        ("30m1h", "'30m1h' is not a duration"),
        ("15 m", "is not a duration"),
        ("-5m", "is not a duration"),
        ("5", "is not a duration"),
        ("1x", "is not a duration"),
        ("0s", "duration '0s' is zero"),
        ("300y", "longer than Loki can express"),
    ],
)
def test_parse_duration_refuses(text: str, message: str) -> None:
    with pytest.raises(QueryError, match=message.replace("(", r"\(")):
        parse_duration_s(text)


UNITS = ("y", "w", "d", "h", "m", "s", "ms")
FACTORS = (31536000, 604800, 86400, 3600, 60, 1, 0.001)


@given(
    st.lists(st.integers(0, 99), min_size=7, max_size=7),
    st.lists(st.booleans(), min_size=7, max_size=7),
)
def test_parse_duration_sums_its_parts(amounts: list[int], present: list[bool]) -> None:
    text = "".join(f"{a}{u}" for a, u, p in zip(amounts, UNITS, present, strict=True) if p)
    expected = sum(a * f for a, f, p in zip(amounts, FACTORS, present, strict=True) if p)
    if expected <= 0:
        with pytest.raises(QueryError):
            parse_duration_s(text)
    else:
        assert parse_duration_s(text) == pytest.approx(expected)


@given(st.text(max_size=12))
def test_parse_duration_raises_only_query_errors(text: str) -> None:
    with contextlib.suppress(QueryError):
        assert parse_duration_s(text) > 0


# -- times ---------------------------------------------------------------------------------


def test_parse_time_ns_reads_rfc3339_nanoseconds_and_now_minus() -> None:
    assert parse_time_ns("2026-11-22T13:11:19.5Z") == 1_795_353_079_500_000_000
    assert parse_time_ns(" 1795353079000000000 ") == 1_795_353_079_000_000_000
    before = time.time_ns()
    ago = parse_time_ns("now-1h")
    assert before - 3600 * 10**9 <= ago <= time.time_ns() - 3600 * 10**9
    assert before <= parse_time_ns("now") <= time.time_ns()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday", "'yesterday' is not a time: use RFC 3339, nanoseconds, or now-1h"),
        ("now-1.5h", "'1.5h' is not a duration"),
        ("now+1h", "'now\\+1h' is not a time"),
        ("2026-11-22T13:11:19", "is not a time"),
        ("\u00b2", "'\u00b2' is not a time: use RFC 3339"),  # a digit to str.isdigit()
        ("\u0663\u0663", "is not a time: use RFC 3339"),  # Arabic-Indic digits
        ("9223372036854775808", "nanoseconds since 1970 end at 2\\*\\*63 - 1"),
        ("2300-01-01T00:00:00Z", "'2300-01-01T00:00:00Z' is not a time"),
    ],
)
def test_parse_time_ns_refuses(text: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        parse_time_ns(text)


# -- the findings' thresholds ---------------------------------------------------------------


def test_each_findings_threshold_has_its_variable() -> None:
    assert dict(_environ.FINDINGS_THRESHOLDS) == {
        "release_failed_deadline_s": "CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S",
        "provision_job_deadline_s": "CORRELATOR_FINDINGS_PROVISION_JOB_DEADLINE_S",
        "outbox_publish_deadline_s": "CORRELATOR_FINDINGS_OUTBOX_PUBLISH_DEADLINE_S",
        "drift_threshold_s": "CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S",
        "orphan_grace_s": "CORRELATOR_FINDINGS_ORPHAN_GRACE_S",
        "critical_factor": "CORRELATOR_FINDINGS_CRITICAL_FACTOR",
    }
    # A field of FindingsConfig (a rule's threshold) has its variable.
    assert list(_environ.FINDINGS_THRESHOLDS) == list(DEFAULTS)


@pytest.mark.parametrize(
    ("environ", "overrides", "expected"),
    [
        ({}, None, FindingsConfig()),
        ({}, {}, FindingsConfig()),
        (
            {"CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S": "60"},
            None,
            FindingsConfig(drift_threshold_s=60.0),
        ),
        (
            {
                "CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S": "1800",
                "CORRELATOR_FINDINGS_PROVISION_JOB_DEADLINE_S": "3600.5",
                "CORRELATOR_FINDINGS_OUTBOX_PUBLISH_DEADLINE_S": "0",
                "CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S": " 90 ",
                "CORRELATOR_FINDINGS_ORPHAN_GRACE_S": "1e3",
                "CORRELATOR_FINDINGS_CRITICAL_FACTOR": "1",
            },
            None,
            FindingsConfig(
                release_failed_deadline_s=1800.0,
                provision_job_deadline_s=3600.5,
                outbox_publish_deadline_s=0.0,
                drift_threshold_s=90.0,
                orphan_grace_s=1000.0,
                critical_factor=1.0,
            ),
        ),
        ({"CORRELATOR_FINDINGS_ORPHAN_GRACE_S": ""}, None, FindingsConfig()),  # empty: unset
        ({"CORRELATOR_FINDINGS_ORPHAN_GRACE_S": "  "}, None, FindingsConfig()),
        ({"CORRELATOR_FINDINGS_INTERVAL_S": "5m"}, None, FindingsConfig()),  # not a threshold
        ({"CORRELATOR_FINDINGS_DRIFT_S": "5m"}, None, FindingsConfig()),  # no such variable
        ({}, {"orphan_grace_s": 30.0}, FindingsConfig(orphan_grace_s=30.0)),
        (
            {
                "CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S": "60",
                "CORRELATOR_FINDINGS_CRITICAL_FACTOR": "2",
            },
            {"drift_threshold_s": 30.0},
            FindingsConfig(drift_threshold_s=30.0, critical_factor=2.0),
        ),
        (
            {"CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S": "not read"},  # an override replaces it
            {"drift_threshold_s": 30.0},
            FindingsConfig(drift_threshold_s=30.0),
        ),
        ({}, {"critical_factor": 1}, FindingsConfig(critical_factor=1.0)),
    ],
)
def test_findings_config(
    environ: dict[str, str], overrides: dict[str, float] | None, expected: FindingsConfig
) -> None:
    assert findings_config(environ, overrides) == expected


_NAMES = (
    "release_failed_deadline_s, provision_job_deadline_s, outbox_publish_deadline_s, "
    "drift_threshold_s, orphan_grace_s, critical_factor"
)


@pytest.mark.parametrize(
    ("environ", "overrides", "message"),
    [
        (
            {"CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S": "5m"},
            None,
            "CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S must be a number of at least 0, not '5m'",
        ),
        (
            {"CORRELATOR_FINDINGS_ORPHAN_GRACE_S": "-1"},
            None,
            "CORRELATOR_FINDINGS_ORPHAN_GRACE_S must be a number of at least 0, not '-1'",
        ),
        (
            {"CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S": "nan"},
            None,
            "CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S must be a number of at least 0, "
            "not 'nan'",
        ),
        (
            {"CORRELATOR_FINDINGS_PROVISION_JOB_DEADLINE_S": "inf"},
            None,
            "CORRELATOR_FINDINGS_PROVISION_JOB_DEADLINE_S must be a number of at least 0, "
            "not 'inf'",
        ),
        (
            {"CORRELATOR_FINDINGS_OUTBOX_PUBLISH_DEADLINE_S": "1e999"},  # inf, written longer
            None,
            "CORRELATOR_FINDINGS_OUTBOX_PUBLISH_DEADLINE_S must be a number of at least 0, "
            "not '1e999'",
        ),
        (
            {"CORRELATOR_FINDINGS_CRITICAL_FACTOR": "0.5"},
            None,
            "CORRELATOR_FINDINGS_CRITICAL_FACTOR must be a number of at least 1, not '0.5'",
        ),
        (
            {"CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S": "60"},
            {"drift_threshold": 60.0},
            f"unknown threshold 'drift_threshold'; use one of {_NAMES}",
        ),
        (
            {},
            {"CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S": 60.0},  # a variable is not a field
            f"unknown threshold 'CORRELATOR_FINDINGS_DRIFT_THRESHOLD_S'; use one of {_NAMES}",
        ),
        (
            {},
            {"drift_threshold_s": -0.5},
            "drift_threshold_s must be a number of at least 0, not -0.5",
        ),
        (
            {},
            {"orphan_grace_s": math.nan},
            "orphan_grace_s must be a number of at least 0, not nan",
        ),
        (
            {},
            {"critical_factor": 0.999},
            "critical_factor must be a number of at least 1, not 0.999",
        ),
        (
            {},
            {"orphan_grace_s": True},  # a bool is not a number of seconds
            "orphan_grace_s must be a number of at least 0, not True",
        ),
    ],
)
def test_findings_config_names_a_bad_value(
    environ: dict[str, str], overrides: dict[str, float] | None, message: str
) -> None:
    with pytest.raises(QueryError) as raised:
        findings_config(environ, overrides)
    assert str(raised.value) == message


#: An allocation that failed to release 1,000 s before ``STUCK_NOW_NS``.
STUCK = (
    b'{"ts":"2026-11-22T13:41:20Z","entity_kind":"allocation","entity_id":"a-9",'
    b'"from":"releasing","to":"release_failed","attributes":{"occupancy":"cleanup"},'
    b'"allocation_id":"a-9"}'
)
STUCK_NOW_NS = 1_795_354_880_000_000_000 + 1000 * 1_000_000_000


@pytest.mark.parametrize(
    ("variable", "config", "rules"),
    [
        (None, None, []),  # the default deadline, 3600 s
        ("999", None, ["release_failed_stuck"]),
        ("1000", None, []),
        ("999", FindingsConfig(), []),  # a config given wins over the environment
        (None, FindingsConfig(release_failed_deadline_s=999.0), ["release_failed_stuck"]),
    ],
)
def test_findings_read_the_environment_unless_given_a_config(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    variable: str | None,
    config: FindingsConfig | None,
    rules: list[str],
) -> None:
    # What GET /v1/findings and the findings logger of correlator serve call.
    if variable is not None:
        monkeypatch.setenv("CORRELATOR_FINDINGS_RELEASE_FAILED_DEADLINE_S", variable)
    ingest_lines(store, "workflow", [STUCK], "workflow.ndjson")

    answer = findings(store, STUCK_NOW_NS, config)

    assert [f["rule"] for f in answer["findings"]] == rules


def test_findings_refuse_a_malformed_variable(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORRELATOR_FINDINGS_CRITICAL_FACTOR", "half")
    with pytest.raises(
        QueryError,
        match=r"^CORRELATOR_FINDINGS_CRITICAL_FACTOR must be a number of at least 1, not 'half'$",
    ):
        findings(store, STUCK_NOW_NS)
