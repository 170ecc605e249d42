"""The aap adapter: AAP controller jobs and EDA activation instances become provider events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from correlator._schema import columns_from_events
from correlator.model import MAX_LINE_BYTES, Event, Reject, content_hash
from correlator.sources.aap import AAP_JOB_TYPES, parse
from tests.correlator.sources.strategies import ANY_JSON, TIMESTAMPS, instant

SAMPLES = Path(__file__).parents[1] / "samples" / "aap"
T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z
S = 1_000_000_000


def sample(name: str) -> list[bytes]:
    return (SAMPLES / name).read_bytes().splitlines()


def provider_event(
    job: dict[str, Any], origin: str, state: str, ts_ns: int, **fields: Any
) -> Event:
    entity_id = fields.pop("entity_id")
    return Event(
        ts_ns=ts_ns,
        layer="provider",
        source="aap",
        origin=origin,
        raw=orjson.dumps(job, option=orjson.OPT_SORT_KEYS).decode(),
        hash=content_hash("aap", orjson.dumps([entity_id, state, ts_ns])),
        entity_kind="provider_job",
        entity_id=entity_id,
        state_to=state,
        **fields,
    )


def test_failed_job() -> None:
    origin = "job_4711.json"
    lines = sample(origin)
    job = orjson.loads(b"\n".join(lines))
    common = {
        "entity_id": "aap:4711",
        "service": "aap",
        "node_id": "n-17",
        "correlation_id": "c-1f3a",
        "allocation_id": "a-9",
        "workflow_id": "wf-2",
        "attrs": {
            "provider": "aap",
            "type": "job",
            "name": "provision-vm",
            "status": "failed",
            "job_template": 12,
            "job_template_name": "provision-vm",
            "launch_type": "manual",
            "elapsed_s": 498.383,
            "failed": True,
        },
    }

    assert list(parse(lines, origin)) == [
        provider_event(
            job,
            origin,
            "pending",
            T0 + 2_482_391_000,
            message="AAP job 4711 provision-vm: pending",
            **common,
        ),
        provider_event(
            job,
            origin,
            "running",
            T0 + 3_120_455_000,
            message="AAP job 4711 provision-vm: running",
            state_from="pending",
            **common,
        ),
        provider_event(
            job,
            origin,
            "failed",
            T0 + 501_503_327_000,
            message="AAP job 4711 provision-vm: failed",
            state_from="running",
            level="error",
            owner_hint="provider",
            duration_s=498.383,
            **common,
        ),
    ]


def test_list_page_and_eda_instance() -> None:
    origin = "jobs_page.json"
    lines = sample(origin)

    items = list(parse(lines, origin))

    summary = [
        (
            item.entity_id,
            item.state_from,
            item.state_to,
            item.level,
            item.owner_hint,
            item.duration_s,
            item.allocation_id,
            item.workflow_id,
            (item.ts_ns - T0) // 1_000_000,
        )
        if isinstance(item, Event)
        else item.reason
        for item in items
    ]
    assert summary == [
        ("aap:4712", None, "pending", "info", None, None, "a-12", "wf-5", 521_000),
        ("aap:4712", "pending", "running", "info", None, None, "a-12", "wf-5", 522_000),
        # Canceled: a warning, and no owner (a cancellation is usually a consequence).
        ("aap:4712", "running", "canceled", "warning", None, 300.5, "a-12", "wf-5", 822_500),
        # Still running: no final phase; YAML extra_vars read for flat identifier keys; the job
        # itself is the workflow run.
        ("aap:4713", None, "pending", "info", None, None, "a-13", "aap:4713", 1_121_000),
        ("aap:4713", "pending", "running", "info", None, None, "a-13", "aap:4713", 1_123_000),
        "line 1 result 3 is neither an AAP job (a 'type' of ad_hoc_command, inventory_update, "
        "job, project_update, system_job, workflow_job) nor an EDA activation instance "
        "(activation_id, started_at, ended_at)",
        ("eda:31", None, "running", "info", None, None, None, "eda:31", 1_721_000),
        ("eda:31", "running", "failed", "error", "provider", 9.25, None, "eda:31", 1_730_250),
    ]
    canceled, eda_failed = items[2], items[-1]
    assert isinstance(canceled, Event)
    assert (
        canceled.message
        == "AAP job 4712 deprovision-vm: canceled: Job canceled by user operator-sa"
    )
    assert isinstance(eda_failed, Event)
    assert eda_failed.message == "EDA job 31 provision-events: failed: Container exited with code 1"
    assert eda_failed.attrs == {
        "provider": "eda",
        "name": "provision-events",
        "status": "failed",
        "explanation": "Container exited with code 1",
        "activation_id": 5,
    }


def test_a_phase_seen_in_two_polls_hashes_the_same() -> None:
    running = {
        "id": 9,
        "type": "job",
        "status": "running",
        "created": "2026-11-22T13:11:19Z",
        "started": "2026-11-22T13:11:20Z",
        "elapsed": 1.0,
    }
    done = {**running, "status": "successful", "finished": "2026-11-22T13:11:29Z", "elapsed": 9.0}

    first = list(parse([orjson.dumps(running)], "poll-1"))
    second = list(parse([orjson.dumps(done)], "poll-2"))

    assert [e.hash for e in second[:2]] == [e.hash for e in first]  # type: ignore[union-attr]
    assert [e.state_to for e in second] == ["pending", "running", "successful"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("extra_vars", "ids", "attrs"),
    [
        (
            '{"allocation_id": "a-1", "ids": {"allocation_id": "a-2", "node_id": "n-2"}}',
            {"allocation_id": "a-1", "node_id": "n-2"},
            {},
        ),
        ({"evidence": {"correlation_id": "c-3"}}, {"correlation_id": "c-3"}, {}),
        (
            '{"allocation_id": "a\\"; drop"}',
            {},
            {
                "rejected_ids": {
                    "allocation_id": (
                        "holds '\"' (U+0022) at position 1; allowed: ASCII letters, digits "
                        "and . _ : / @ + ~ -"
                    )
                }
            },
        ),
        ("allocation_id: 'a-4'\nnode_id: n-4 # the host\n", {"allocation_id": "a-4"}, {}),
        ("- not: a mapping", {}, {"extra_vars_unreadable": True}),
        ("[1, 2]", {}, {}),
        ("", {}, {}),
    ],
)
def test_identifiers_from_extra_vars(
    extra_vars: Any, ids: dict[str, str], attrs: dict[str, Any]
) -> None:
    job = {
        "id": 1,
        "type": "job",
        "status": "pending",
        "created": "2026-11-22T13:11:19Z",
        "extra_vars": extra_vars,
    }

    (item,) = parse([orjson.dumps(job)], "f")

    assert isinstance(item, Event)
    found = {key: getattr(item, key) for key in ("node_id", "correlation_id", "allocation_id")}
    assert {k: v for k, v in found.items() if v is not None} == ids
    assert {k: v for k, v in item.attrs.items() if k not in ("provider", "type", "status")} == attrs


GOOD = b'{"id": 1, "type": "job", "status": "pending", "created": "2026-11-22T13:11:19Z"}'


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            b'{"type": "job", "status": "failed", "created": "2026-11-22T13:11:19Z"}',
            "line 2 (aap job) lacks field 'id'",
        ),
        (
            b'{"id": 2, "activation_id": 5, "started_at": "2026-11-22T13:11:19Z"}',
            "line 2 (eda job) lacks field 'status'",
        ),
        (
            b'{"id": 2, "type": "job", "status": {"x": 1}, "created": "2026-11-22T13:11:19Z"}',
            "line 2 (aap job) has a field 'status' that is neither text nor an integer: {\"x\":1}",
        ),
        (
            b'{"id": 123456789012345678901234567890, "type": "job", "status": "new"}',
            "line 2 (aap job) has a field 'id' that is neither text nor an integer: "
            "1.2345678901234568e+29",
        ),
        (
            b'{"id": 2, "type": "job", "status": "new", "created": "soon"}',
            "line 2 (aap:2) has no readable time: created, started, finished",
        ),
        (
            b'{"id": 2, "type": "inventory_source", "status": "new"}',
            "line 2 is neither an AAP job (a 'type' of ad_hoc_command, inventory_update, job, "
            "project_update, system_job, workflow_job) nor an EDA activation instance "
            "(activation_id, started_at, ended_at)",
        ),
        (b"[3]", "line 2 result 1 is not a JSON object"),
        (
            b'{"id": 2, "type": "job"',
            "line 2 starts a JSON document that breaks at line 3: "
            "Expecting ',' delimiter (column 1)",
        ),
        (b'{"id": "\xc3", "type": "job"}', "line 2 is not valid UTF-8 (byte 0xc3 at offset 8)"),
        (
            # An oversized job (a huge job_explanation): the line limit, named.
            b'{"id": 2, "type": "job", "status": "failed", "job_explanation": "'
            + b"x" * MAX_LINE_BYTES
            + b'"}',
            f"line 2 is longer than 1 MiB ({MAX_LINE_BYTES:,} bytes)",
        ),
    ],
)
def test_bad_objects_are_rejected_and_the_rest_kept(line: bytes, reason: str) -> None:
    items = list(parse([GOOD, line, GOOD], "f"))

    assert [i.reason for i in items if isinstance(i, Reject)] == [reason]
    assert len([i for i in items if isinstance(i, Event)]) == 2


def test_unreadable_phase_time_is_kept_in_attrs() -> None:
    job = {
        "id": 5,
        "type": "job",
        "status": "failed",
        "created": "2026-11-22T13:11:19Z",
        "started": "later",
        "finished": "2026-11-22T13:11:29Z",
        "elapsed": "n/a",
    }

    items = list(parse([orjson.dumps(job)], "f"))

    assert [(e.state_from, e.state_to, e.duration_s) for e in items] == [  # type: ignore[union-attr]
        (None, "pending", None),
        ("pending", "failed", None),
    ]
    assert items[1].attrs["unreadable_times"] == {"started": "later"}  # type: ignore[union-attr]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=12)
    | st.sampled_from(["2026-11-22T13:11:19Z", "job", "failed", "canceled"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "type",
                    "status",
                    "created",
                    "started",
                    "finished",
                    "elapsed",
                    "extra_vars",
                    "results",
                    "activation_id",
                    "started_at",
                    "ended_at",
                    "summary_fields",
                    "name",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=14,
)


@given(JSON)
def test_parse_never_raises_on_json(document: Any) -> None:
    for item in parse([orjson.dumps(document)], "f"):
        assert isinstance(item, Event | Reject)


@given(st.lists(st.binary(max_size=40), max_size=8))
def test_parse_never_raises_on_bytes(lines: list[bytes]) -> None:
    for item in parse(lines, "f"):
        assert isinstance(item, Event | Reject)


_ABSENT = "absent: dropped from the job"
#: A time field: readable, absent, or anything at all.
_MAYBE_TIME = TIMESTAMPS | st.just(_ABSENT) | ANY_JSON
_JOB_IDS = st.integers(0, 2**63 - 1) | st.text(min_size=1, max_size=8)
_STATUSES = st.sampled_from(["successful", "failed", "error", "canceled", "stopped"]) | st.text(
    min_size=1, max_size=8
)


def _present(job: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in job.items() if value != _ABSENT}


#: Jobs with an id, a status and a readable final time; anything at all in every other field.
AAP_JOBS = st.fixed_dictionaries(
    {
        "type": st.sampled_from(sorted(AAP_JOB_TYPES)),
        "id": _JOB_IDS,
        "status": _STATUSES,
        "finished": TIMESTAMPS,
        "created": _MAYBE_TIME,
        "started": _MAYBE_TIME,
    },
    optional={
        "elapsed": ANY_JSON,
        "name": ANY_JSON,
        "extra_vars": ANY_JSON,
        "summary_fields": ANY_JSON,
        "job_template": ANY_JSON,
        "job_explanation": ANY_JSON,
        "launch_type": ANY_JSON,
        "failed": ANY_JSON,
    },
).map(_present)
EDA_JOBS = st.fixed_dictionaries(
    {
        "activation_id": ANY_JSON,
        "id": _JOB_IDS,
        "status": _STATUSES,
        "ended_at": TIMESTAMPS,
        "created_at": _MAYBE_TIME,
        "started_at": _MAYBE_TIME,
    },
    optional={"extra_var": ANY_JSON, "name": ANY_JSON, "status_message": ANY_JSON},
).map(_present)


def _duration_s(job: dict[str, Any]) -> float | None:
    """What the final event's duration must be: AAP's elapsed, EDA's ended_at - started_at."""
    if "type" in job:
        elapsed = job.get("elapsed")
        if isinstance(elapsed, int | float) and not isinstance(elapsed, bool):
            return float(elapsed)
        return None
    started, ended = instant(job.get("started_at")), instant(job["ended_at"])
    return None if started is None or ended is None else (ended - started) / 1e9


@given(AAP_JOBS | EDA_JOBS)
def test_every_job_with_a_final_time_becomes_events(job: dict[str, Any]) -> None:
    eda = "type" not in job
    created, started = ("created_at", "started_at") if eda else ("created", "started")

    items = list(parse([orjson.dumps(job)], "f"))

    expected_states = [
        *(["pending"] if instant(job.get(created)) is not None else []),
        *(["running"] if instant(job.get(started)) is not None else []),
        job["status"],
    ]
    assert [i.state_to if isinstance(i, Event) else i for i in items] == expected_states
    final = items[-1]
    assert isinstance(final, Event)
    assert final.duration_s == _duration_s(job)
    assert final.entity_id == f"{'eda' if eda else 'aap'}:{job['id']}"


def test_an_unreadable_time_nested_to_the_limit_is_a_reject_not_a_lost_file() -> None:
    # The job (253 levels under "created") can be written; its attrs, which keep the time one
    # level deeper (unreadable_times), could not: the store's insert failed, and the file.
    deep = b'{"id": 1, "type": "job", "status": "failed", "started": "2026-11-22T13:11:19Z", '
    deep += b'"created": ' + b"[" * 253 + b"]" * 253 + b"}"

    items = list(parse([GOOD, deep, GOOD], "f"))

    assert [i.reason for i in items if isinstance(i, Reject)] == [
        "line 2 (aap:1) is nested deeper than the 254 levels of objects and arrays a job may have"
    ]
    columns_from_events([i for i in items if isinstance(i, Event)])  # as the store takes them
