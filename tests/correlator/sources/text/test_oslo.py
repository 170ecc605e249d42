"""The ``oslo`` format on loghub's OpenStack sample, and its tracebacks in both forms."""

from __future__ import annotations

import zoneinfo
from datetime import UTC

from correlator.sources.text import Parsed
from correlator.sources.text.oslo import OSLO
from tests.correlator.sources.text.records import fixture_lines, records

INSTANCE = "b9000564-fe1a-409b-b8cc-1e88b294cd1d"
DELETE_REQUEST = "req-c53a921a-16c7-422e-8c9d-c922a720d047"


def _read_all() -> list[Parsed]:
    found, orphans = records(OSLO, fixture_lines("openstack_2k_head.log"))
    assert orphans == []
    parsed = [OSLO.read(record, UTC) for record in found]
    assert all(isinstance(record, Parsed) for record in parsed), parsed
    return [record for record in parsed if isinstance(record, Parsed)]


def test_every_line_of_the_loghub_sample_is_a_record() -> None:
    parsed = _read_all()

    assert len(parsed) == 54
    assert sum(record.fields["file"].startswith("nova-api.") for record in parsed) == 27
    assert sum(record.fields["file"].startswith("nova-compute.") for record in parsed) == 27
    assert sum("request_id" in record.fields for record in parsed) == 50  # the other 4 say [-]


def test_a_compute_line_reads_as_written() -> None:
    line = fixture_lines("openstack_2k_head.log")[6]

    assert OSLO.read(line, UTC) == Parsed(
        ts_ns=1_494_892_804_500_000_000,  # 2017-05-16T00:00:04.500Z
        level="INFO",
        message=f"[instance: {INSTANCE}] VM Started (Lifecycle Event)",
        fields={
            "pid": "2931",
            "logger": "nova.compute.manager",
            "file": "nova-compute.log.1.2017-05-16_13:55:31",
            "context": "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab - - - - -",
            "request_id": "req-3ea4052c-895d-4b64-9e2d-04d64c4d94ab",
            "instance": INSTANCE,
        },
    )


def test_the_api_and_compute_lines_of_one_deletion_share_its_request() -> None:
    deletion = [r for r in _read_all() if r.fields.get("request_id") == DELETE_REQUEST]

    files = {record.fields["file"].split(".")[0] for record in deletion}
    assert files == {"nova-api", "nova-compute"}
    api = [r for r in deletion if r.fields["file"].startswith("nova-api")]
    assert f"DELETE /v2/54fadb412c4e40cdbaed9335e4c35a9e/servers/{INSTANCE}" in api[0].message
    compute = [r for r in deletion if r.fields["file"].startswith("nova-compute")]
    assert {r.fields["instance"] for r in compute} == {INSTANCE}


def test_a_line_without_context_reads_dash() -> None:
    parsed = OSLO.read(
        "2017-05-16 00:00:10.302 2931 INFO nova.virt.libvirt.driver [-] "
        f"[instance: {INSTANCE}] Instance spawned successfully.",
        UTC,
    )

    assert isinstance(parsed, Parsed)
    assert parsed.fields == {
        "pid": "2931",
        "logger": "nova.virt.libvirt.driver",
        "context": "-",
        "instance": INSTANCE,
    }


def test_a_global_request_id_comes_before_the_request_id() -> None:
    parsed = OSLO.read(
        "2018-06-27 06:43:27.264 1705 ERROR nova.compute.manager "
        "[req-11111111-1111-1111-1111-111111111111 req-22222222-2222-2222-2222-222222222222 "
        "admin admin - default default] boom",
        UTC,
    )

    assert isinstance(parsed, Parsed)
    assert parsed.fields["global_request_id"] == "req-11111111-1111-1111-1111-111111111111"
    assert parsed.fields["request_id"] == "req-22222222-2222-2222-2222-222222222222"


# Written from oslo.log's format strings: logging_context_format_string for the record,
# logging_exception_prefix ("%(asctime)s.%(msecs)03d %(process)d ERROR %(name)s %(instance)s")
# on the traceback's lines. The loghub sample holds no traceback.
PREFIXED_TRACEBACK = [
    "2018-06-27 06:43:27.264 1705 ERROR nova.compute.manager [req-3ea4052c-895d-4b64-9e2d-"
    f"04d64c4d94ab - - - - -] [instance: {INSTANCE}] Instance failed to spawn",
    f"2018-06-27 06:43:27.264 1705 ERROR nova.compute.manager [instance: {INSTANCE}] "
    "Traceback (most recent call last):",
    f"2018-06-27 06:43:27.264 1705 ERROR nova.compute.manager [instance: {INSTANCE}]   "
    'File "/usr/lib/python2.7/site-packages/nova/compute/manager.py", line 2168, in _build',
    f"2018-06-27 06:43:27.264 1705 ERROR nova.compute.manager [instance: {INSTANCE}]     "
    "yield resources",
    f"2018-06-27 06:43:27.264 1705 ERROR nova.compute.manager [instance: {INSTANCE}] "
    "BuildAbortException: Build of instance aborted",
    "2018-06-27 06:43:27.264 1705 ERROR nova.compute.manager ",
    "2018-06-27 06:43:28.001 1705 INFO nova.compute.manager [-] next record",
]


def test_a_traceback_that_repeats_the_prefix_folds_into_its_record() -> None:
    found, orphans = records(OSLO, PREFIXED_TRACEBACK)

    assert orphans == []
    assert len(found) == 2
    parsed = OSLO.read(found[0], UTC)
    assert isinstance(parsed, Parsed)
    assert parsed.level == "ERROR"
    assert parsed.message == "\n".join(
        [
            f"[instance: {INSTANCE}] Instance failed to spawn",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python2.7/site-packages/nova/compute/manager.py", line 2168, '
            "in _build",
            "    yield resources",
            "BuildAbortException: Build of instance aborted",
            "",
        ]
    )


def test_a_plain_traceback_and_old_trace_lines_fold_into_their_record() -> None:
    lines = [
        "2015-01-02 03:04:05.678 99 ERROR ironic.conductor [req-3ea4052c-895d-4b64-9e2d-"
        "04d64c4d94ab - - - - -] deploy failed",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "2015-01-02 03:04:05.678 99 TRACE ironic.conductor ValueError: bad",
    ]

    found, orphans = records(OSLO, lines)

    assert (len(found), orphans) == (1, [])
    parsed = OSLO.read(found[0], UTC)
    assert isinstance(parsed, Parsed)
    assert parsed.message.splitlines() == [
        "deploy failed",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "ValueError: bad",
    ]


def test_times_are_read_in_the_zone_given() -> None:
    line = "2026-07-01 12:00:00.250 1 INFO x [-] summer"

    parsed = OSLO.read(line, zoneinfo.ZoneInfo("Europe/Berlin"))

    assert isinstance(parsed, Parsed)
    assert parsed.ts_ns == 1_782_900_000_250_000_000  # 2026-07-01T10:00:00.250Z


def test_what_is_not_oslo_gets_a_reason() -> None:
    assert OSLO.read("hello", UTC) == (
        "not an oslo.log line (expected e.g. 2017-05-16 00:00:04.500 2931 INFO name [-] ...)"
    )
    assert OSLO.read("2017-02-30 00:00:00.000 1 INFO x [-] m", UTC) == (
        "oslo.log time: 2017-02-30 is not a valid date: day is out of range for month"
    )
