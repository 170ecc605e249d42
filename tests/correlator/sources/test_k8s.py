"""The k8s adapter: kubectl -o json snapshots of custom resources become projection events."""

from __future__ import annotations

import copy
import inspect
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from correlator.model import Event, Reject, content_hash
from correlator.sources._documents import iter_documents
from correlator.sources.k8s import parse
from tests.correlator.sources.strategies import ANY_JSON, TIMESTAMPS, instant

SAMPLES = Path(__file__).parents[1] / "samples" / "k8s"
T0 = 1_795_353_079_000_000_000  # 2026-11-22T13:11:19Z
S = 1_000_000_000
QUOTE = "allowed: ASCII letters, digits and . _ : / @ + ~ -"


def sample(name: str) -> list[bytes]:
    return (SAMPLES / name).read_bytes().splitlines()


def canonical(item: dict[str, Any]) -> bytes:
    """The item as the adapter keeps it: sorted keys, without kubectl's bookkeeping."""
    item = copy.deepcopy(item)
    item["metadata"].pop("managedFields", None)
    item["metadata"].get("annotations", {}).pop(
        "kubectl.kubernetes.io/last-applied-configuration", None
    )
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def projection(raw: bytes, origin: str, **fields: Any) -> Event:
    fields.setdefault("hash", content_hash("k8s", raw))
    return Event(
        layer="projection",
        source="k8s",
        origin=origin,
        raw=raw.decode(),
        entity_kind="ProvisionRequest",
        **fields,
    )


def test_list_sample() -> None:
    origin = "provisionrequests.json"
    lines = sample(origin)
    items = orjson.loads(b"\n".join(lines))["items"]
    raw = [canonical(item) for item in items[:3]]

    assert list(parse(lines, origin)) == [
        projection(
            raw[0],
            origin,
            ts_ns=T0 + 6 * S,  # status.provisionJob.lastTransitionTime
            message="ProvisionRequest tenant-acme/pr-a-9: Running: waiting for the provider",
            node_id="n-17",
            correlation_id="c-1f3a",
            allocation_id="a-9",
            workflow_id="aap:4711",
            entity_id="pr-a-9",
            state_to="Running",
            attrs={
                "namespace": "tenant-acme",
                "resource_version": "918273",
                "uid": "0b1c6c1e-3f6a-4c55-a2b8-6f4c1f1f9a10",
                "generation": 2,
                "observed_generation": 2,
                "provider": "aap",
                "job_id": "4711",
                "provider_job": "aap:4711",
            },
        ),
        projection(
            raw[1],
            origin,
            ts_ns=T0 - 79 * S,  # the newest condition
            message="ProvisionRequest tenant-acme/pr-a-12: Provisioning",
            allocation_id="a-12",
            entity_id="pr-a-12",
            state_to="Provisioning",
            attrs={
                "namespace": "tenant-acme",
                "resource_version": "918301",
                "uid": "6a0c1d8e-0f59-4bd6-8d49-5f3f4e1c2b7a",
            },
        ),
        projection(
            raw[1],
            origin,
            hash=content_hash("k8s", raw[1] + b"\nDeleting"),
            ts_ns=T0 + 521 * S,  # metadata.deletionTimestamp
            level="warning",
            message="ProvisionRequest tenant-acme/pr-a-12: deletion requested while Provisioning",
            allocation_id="a-12",
            entity_id="pr-a-12",
            state_from="Provisioning",
            state_to="Deleting",
            attrs={
                "namespace": "tenant-acme",
                "resource_version": "918301",
                "uid": "6a0c1d8e-0f59-4bd6-8d49-5f3f4e1c2b7a",
                "deleted": True,
            },
        ),
        projection(
            raw[2],
            origin,
            ts_ns=T0 - 4279 * S,  # metadata.creationTimestamp
            message="ProvisionRequest pr-broken: no status",
            entity_id="pr-broken",
            attrs={
                "resource_version": "17",
                "rejected_ids": {"workflow_id": f"holds ' ' (U+0020) at position 2; {QUOTE}"},
            },
        ),
        Reject(
            "k8s",
            origin,
            1,
            "line 1 item 4 is not a Kubernetes object: it lacks field 'kind'",
            '{"apiVersion":"provisioning.example.com/v1alpha1","metadata":{"name":"pr-no-kind"}}',
        ),
    ]


# The canonical JSON written out: the raw text each event keeps, and what its content hash (so
# de-duplication on re-ingest) is computed from. Sorted keys at every depth, no whitespace,
# UTF-8 unescaped, managedFields and the last-applied annotation dropped, list order kept.
_SAMPLE_ITEM_RAW = (
    '{"apiVersion":"provisioning.example.com/v1alpha1","kind":"ProvisionRequest",'
    '"metadata":{"annotations":{"provisioning.example.com/correlation-id":"c-1f3a"},'
    '"creationTimestamp":"2026-11-22T13:11:19Z","generation":2,"labels":{'
    '"app.kubernetes.io/managed-by":"provisioning-operator",'
    '"provisioning.example.com/allocation-id":"a-9","provisioning.example.com/node-id":"n-17"},'
    '"name":"pr-a-9","namespace":"tenant-acme","resourceVersion":"918273",'
    '"uid":"0b1c6c1e-3f6a-4c55-a2b8-6f4c1f1f9a10"},'
    '"spec":{"allocationId":"a-9","template":"rhel9"},'
    '"status":{"conditions":[{"lastTransitionTime":"2026-11-22T13:11:21Z",'
    '"message":"job launched","reason":"JobLaunched","status":"True","type":"Provisioning"}],'
    '"observedGeneration":2,"provisionJob":{"id":"4711",'
    '"lastTransitionTime":"2026-11-22T13:11:25Z","message":"waiting for the provider",'
    '"provider":"aap","state":"Running"}}}'
)
_UNSORTED = (
    b'{"status": {"phase": "Running"}, "metadata": {"name": "vm-1",\n'
    b'  "creationTimestamp": "2026-11-22T13:11:19Z", "managedFields": [{"manager": "kubectl"}],\n'
    b'  "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}",\n'
    b'    "z": "Z\xc3\xbcrich", "a": "1"}},\n'
    b'  "kind": "VMRequest", "apiVersion": "v1", "spec": {"b": [2, 1], "a": null, "c": 1.5}}'
)
_UNSORTED_RAW = (
    '{"apiVersion":"v1","kind":"VMRequest","metadata":{"annotations":{"a":"1","z":"Z\u00fcrich"},'
    '"creationTimestamp":"2026-11-22T13:11:19Z","name":"vm-1"},"spec":{"a":null,"b":[2,1],'
    '"c":1.5},"status":{"phase":"Running"}}'
)


def test_canonical_json_is_pinned_to_literal_text() -> None:
    (first, *_) = parse(sample("provisionrequests.json"), "f")
    (unsorted,) = parse(_UNSORTED.splitlines(), "f")

    assert isinstance(first, Event) and isinstance(unsorted, Event)
    assert first.raw == _SAMPLE_ITEM_RAW
    assert unsorted.raw == _UNSORTED_RAW
    assert unsorted.hash == content_hash("k8s", _UNSORTED_RAW) == -8864921893972781116
    # The helper the other tests build expected events with agrees with the literal.
    items = orjson.loads(b"\n".join(sample("provisionrequests.json")))["items"]
    assert canonical(items[0]).decode() == _SAMPLE_ITEM_RAW


def test_watch_events_one_per_line_with_a_broken_one() -> None:
    origin = "watch.jsonl"
    lines = sample(origin)
    first = orjson.dumps(orjson.loads(lines[0])["object"], option=orjson.OPT_SORT_KEYS)
    last = orjson.dumps(orjson.loads(lines[2])["object"], option=orjson.OPT_SORT_KEYS)
    common = {"entity_id": "pr-a-9", "workflow_id": "aap:4711"}

    items = list(parse(lines, origin))

    assert items == [
        projection(
            first,
            origin,
            ts_ns=T0 + 1121 * S,
            level="error",
            message="ProvisionRequest tenant-acme/pr-a-9: Failed: "
            "job 4711 failed: host unreachable",
            allocation_id="a-9",
            state_to="Failed",
            attrs={
                "namespace": "tenant-acme",
                "resource_version": "918400",
                "provider": "aap",
                "job_id": "4711",
                "provider_job": "aap:4711",
            },
            **common,
        ),
        Reject(
            "k8s",
            origin,
            2,
            "line 2 starts a JSON document that breaks at line 3: Expecting ',' delimiter "
            "(column 1)",
            lines[1].decode() + "\n" + lines[2].decode()[: 199 - len(lines[1])],
        ),
        projection(
            last,
            origin,
            ts_ns=T0 + 1121 * S,
            level="error",
            message="ProvisionRequest tenant-acme/pr-a-9: Failed",
            state_to="Failed",
            attrs={
                "namespace": "tenant-acme",
                "resource_version": "918500",
                "job_id": "aap:4711",
                "provider_job": "aap:4711",
            },
            **common,
        ),
        projection(
            last,
            origin,
            hash=content_hash("k8s", last + b"\nDeleting"),
            ts_ns=T0 + 1181 * S,
            level="warning",
            message="ProvisionRequest tenant-acme/pr-a-9: deletion requested while Failed",
            state_from="Failed",
            state_to="Deleting",
            attrs={
                "namespace": "tenant-acme",
                "resource_version": "918500",
                "job_id": "aap:4711",
                "provider_job": "aap:4711",
                "deleted": True,
            },
            **common,
        ),
    ]


def cr(**status: Any) -> dict[str, Any]:
    return {
        "kind": "VMRequest",
        "metadata": {"name": "vm-1", "creationTimestamp": "2026-11-22T13:11:19Z"},
        "status": status,
    }


@pytest.mark.parametrize(
    ("status", "state", "level"),
    [
        ({"provisionJob": {"state": "Succeeded"}, "phase": "Ready"}, "Succeeded", "info"),
        ({"phase": "Failed"}, "Failed", "error"),
        ({"state": "Canceled"}, "Canceled", "warning"),
        ({"state": "ProvisionFailed"}, "ProvisionFailed", "error"),
        ({}, None, "info"),
    ],
)
def test_state_and_level(status: dict[str, Any], state: str | None, level: str) -> None:
    (item,) = parse([orjson.dumps(cr(**status))], "f")

    assert isinstance(item, Event)
    assert (item.state_to, item.level) == (state, level)


@pytest.mark.parametrize(
    ("status", "offset_s", "unreadable"),
    [
        ({"lastUpdated": "2026-11-22T13:11:29Z"}, 10, None),
        (
            {"lastUpdated": "soon", "conditions": [{"lastTransitionTime": "2026-11-22T13:11:39Z"}]},
            20,
            {"status.lastUpdated": "soon"},
        ),
        (
            {
                "conditions": [
                    {"lastTransitionTime": "2026-11-22T13:11:49Z"},
                    {"lastTransitionTime": "2026-11-22T13:11:39Z"},
                    {"lastTransitionTime": 5},
                ]
            },
            30,
            {"status.conditions[].lastTransitionTime": 5},
        ),
        ({}, 0, None),
    ],
)
def test_most_specific_time(
    status: dict[str, Any], offset_s: int, unreadable: dict[str, Any] | None
) -> None:
    (item,) = parse([orjson.dumps(cr(**status))], "f")

    assert isinstance(item, Event)
    assert item.ts_ns == T0 + offset_s * S
    assert item.attrs.get("unreadable_times") == unreadable


@pytest.mark.parametrize(
    ("metadata", "spec", "ids"),
    [
        (
            {
                "labels": {"example.com/allocation-id": "a-1", "node_id": "n-1"},
                "annotations": {"example.com/Correlation-ID": "c-1", "allocation_id": "a-2"},
            },
            {},
            {"allocation_id": "a-1", "node_id": "n-1", "correlation_id": "c-1"},
        ),
        # A key merely containing an identifier name is not one of ours.
        ({"labels": {"example.com/preallocation-id": "x", "allocation-id-hint": "y"}}, {}, {}),
        (
            {},
            {"allocationId": "a-3", "workflow_id": "wf-3", "nodeInstanceId": "ni-3"},
            {"allocation_id": "a-3", "workflow_id": "wf-3", "node_instance_id": "ni-3"},
        ),
        ({"labels": {"x.io/node-id": 17}}, {}, {"node_id": "17"}),
    ],
)
def test_identifier_convention(
    metadata: dict[str, Any], spec: dict[str, Any], ids: dict[str, str]
) -> None:
    obj = cr()
    obj["metadata"].update(metadata)
    obj["spec"] = spec

    (item,) = parse([orjson.dumps(obj)], "f")

    assert isinstance(item, Event)
    found = {
        key: getattr(item, key)
        for key in ("node_id", "node_instance_id", "correlation_id", "allocation_id", "workflow_id")
    }
    assert {k: v for k, v in found.items() if v is not None} == ids


def test_hash_follows_the_resource_version() -> None:
    obj = cr(phase="Running")
    once = list(parse([orjson.dumps(obj)], "a"))
    again = list(parse(orjson.dumps(obj, option=orjson.OPT_INDENT_2).splitlines(), "b"))
    obj["metadata"]["resourceVersion"] = "2"
    changed = list(parse([orjson.dumps(obj)], "a"))

    assert [e.hash for e in once] == [e.hash for e in again]  # type: ignore[union-attr]
    assert [e.hash for e in once] != [e.hash for e in changed]  # type: ignore[union-attr]


GOOD = orjson.dumps(cr(phase="Running"))


@pytest.mark.parametrize(
    ("lines", "reasons"),
    [
        (
            [b"{", b'  "kind": "X",', b'  "metadata": {"name": "x"'],
            [
                "line 2 starts a JSON document that breaks at line 5: Expecting ',' delimiter "
                "(column 1)"
            ],
        ),
        (
            [b"{", b'  "kind": "X\xff",', b'  "metadata": {"name": "x"}', b"}"],
            [
                "line 3 is not valid UTF-8 (byte 0xff at offset 12)",
                "line 2 starts a document (to line 5) that spans rejected line 3",
            ],
        ),
        ([b'{"kind": "X", "n": NaN}'], ["line 2 is not valid JSON: NaN is not JSON"]),
        (
            [b'{"kind": "X", "n": "\\ud800"}'],
            ["line 2 is not valid JSON: no low surrogate in string: line 1 column 21 (char 20)"],
        ),
        ([b'"just text"'], ["line 2 is not a JSON object"]),
        ([b'{"kind": "X"}'], ["line 2 is not a Kubernetes object: it lacks field 'metadata.name'"]),
        (
            [b'{"kind": "X", "metadata": {"name": "x", "creationTimestamp": "today"}}'],
            [
                "line 2 (X x) has no readable time: none of status.provisionJob.lastTransitionTime,"
                " status.lastUpdated, status.conditions[].lastTransitionTime, "
                "metadata.creationTimestamp"
            ],
        ),
        ([b"x" * 1_048_577], ["line 2 is longer than 1 MiB (1,048,576 bytes)"]),
        ([b"]"], ["line 2 is not valid JSON: Expecting value (column 1)"]),
    ],
)
def test_bad_documents_are_rejected_and_the_rest_kept(
    lines: list[bytes], reasons: list[str]
) -> None:
    items = list(parse([GOOD, *lines, GOOD], "f"))

    assert [r.reason for r in items if isinstance(r, Reject)] == reasons
    assert len([e for e in items if isinstance(e, Event)]) == 2


def test_documents_framing() -> None:
    lines = [b"", b"[", b"  {}", b"]  {", b'"a": 1}', b"  ", b"7 8"]

    assert list(iter_documents(lines, "k8s", "f")) == [
        (2, [{}]),
        (4, {"a": 1}),
        (7, 7),
        (7, 8),
    ]


@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.text(max_size=8), ANY_JSON, max_size=4) | st.lists(ANY_JSON),
            st.sampled_from([0, orjson.OPT_INDENT_2]),
        ),
        max_size=5,
    )
)
def test_documents_are_framed_alike_however_written(
    documents: list[tuple[Any, int]],
) -> None:
    # A line that is a whole document is read at once; others are framed by their nesting
    # (strings holding brackets and quotes included): the same documents either way.
    lines: list[bytes] = []
    expected = []
    for document, option in documents:
        expected.append((len(lines) + 1, document))
        lines.extend(orjson.dumps(document, option=option).split(b"\n"))

    assert list(iter_documents(lines, "k8s", "f")) == expected


# -- documents too deep or too large -----------------------------------------------------------

DEEP_JSON = b"[" * 100_000 + b"]" * 100_000  # python3 -c 'print("["*100000+"]"*100000)'


def _events(items: list[Event | Reject]) -> int:
    return len([item for item in items if isinstance(item, Event)])


def test_deep_json_is_a_reject_and_its_neighbours_are_kept() -> None:
    # It crashed the ingest with RecursionError (the stdlib decoder recurses once per level)
    # and lost every document of the file.
    items = list(parse([GOOD, DEEP_JSON, GOOD.replace(b"vm-1", b"vm-2")], "deep.json"))

    assert [item.reason for item in items if isinstance(item, Reject)] == [
        "line 2 starts a JSON document nested deeper than 512 levels (at line 2); "
        "the limit is 512 levels"
    ]
    assert _events(items) == 2


def test_a_document_that_never_closes_does_not_take_the_next_one_with_it() -> None:
    # Found by test_hostile: a record cut short 512 levels deep, then a good one. The good
    # one's own braces took the open document past 512 levels at its line, and it was skipped
    # with the broken one; it is now read again as a document's start.
    broken = GOOD[:-1] + b',"x":' + b"[" * 511  # 512 levels open at its end
    after = GOOD.replace(b"vm-1", b"vm-2")

    items = list(parse([GOOD, broken, after], "f"))

    assert [item.reason for item in items if isinstance(item, Reject)] == [
        "line 2 starts a JSON document nested deeper than 512 levels (at line 3); "
        "the limit is 512 levels"
    ]
    assert _events(items) == 2


def test_a_pretty_printed_deep_document_is_refused_where_it_gets_too_deep() -> None:
    deep = [b"{", *[b"  " * n + b'"a": {' for n in range(1, 600)], *[b"  }"] * 599, b"}"]

    items = list(parse([*deep, GOOD], "f"))

    assert [item.reason for item in items if isinstance(item, Reject)] == [
        "line 1 starts a JSON document nested deeper than 512 levels (at line 513); "
        "the limit is 512 levels"
    ]
    assert _events(items) == 1  # reading resumed at the next line that starts a document


def test_a_document_over_the_size_limit_is_refused_and_reading_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("correlator.sources._documents.MAX_DOCUMENT_BYTES", 1000)
    big = [b"{", b'  "kind": "VMRequest",', *[b'  "x": "' + b"y" * 90 + b'",'] * 20, b"}"]

    items = list(parse([GOOD, *big, GOOD.replace(b"vm-1", b"vm-2")], "f"))

    assert [item.reason for item in items if isinstance(item, Reject)] == [
        "line 2 starts a JSON document of over 1,000 bytes (at line 13); the limit is 1,000 bytes"
    ]
    assert _events(items) == 2


def test_a_document_that_never_closes_is_held_to_the_limit_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An input that opens a list and never closes it: the framer holds the document to its
    # cap (64 MiB; 8 MiB here, for speed), not to the end of the input, and reads on after it.
    cap = 8 * 1024 * 1024
    monkeypatch.setattr("correlator.sources._documents.MAX_DOCUMENT_BYTES", cap)
    line = b'  "' + b"x" * (1024 * 1024 - 8) + b'",'

    def lines() -> Iterator[bytes]:
        yield b"["
        for _ in range(3 * 8):
            yield line
        yield GOOD

    tracemalloc.start()
    try:
        items = list(parse(lines(), "f"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert [item.reason for item in items if isinstance(item, Reject)] == [
        "line 1 starts a JSON document of over 8,388,608 bytes (at line 10); "
        "the limit is 8,388,608 bytes (8 MiB)"
    ]
    assert _events(items) == 1
    assert peak < 2 * cap, peak  # 24 MiB of input


def test_strings_are_skipped_in_one_pass() -> None:
    # A line of escaped quotes that never closes: each quote was a start to try again from.
    hostile = b'["' + b'\\"' * 300_000

    started = time.process_time()
    items = list(parse([GOOD, hostile, GOOD.replace(b"vm-1", b"vm-2")], "f"))

    assert time.process_time() - started < 1.0
    assert _events(items) == 2


def test_a_document_too_deep_for_the_stack_left_is_a_reject() -> None:
    # Within the 512 levels, but read from deep in a stack already (a thread of a server).
    depth = 400
    lines = [b"[" * depth, b"]" * depth, b"{}"]  # on two lines: framed, then decoded
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + depth // 2)
    try:
        items = list(iter_documents(lines, "k8s", "f"))
    finally:
        sys.setrecursionlimit(limit)

    assert items == [
        Reject("k8s", "f", 1, "line 1 starts a JSON document nested too deep to read here", ANY),
        (3, {}),
    ]


@given(st.lists(st.binary(max_size=40), max_size=8))
def test_parse_never_raises_on_bytes(lines: list[bytes]) -> None:
    for item in parse(lines, "f"):
        assert isinstance(item, Event | Reject)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "kind",
                    "metadata",
                    "name",
                    "status",
                    "items",
                    "phase",
                    "creationTimestamp",
                    "labels",
                    "provisionJob",
                    "state",
                    "deletionTimestamp",
                    "object",
                    "type",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(JSON)
def test_parse_never_raises_on_json(document: Any) -> None:
    lines = orjson.dumps(document, option=orjson.OPT_INDENT_2).splitlines()

    for item in parse(lines, "f"):
        assert isinstance(item, Event | Reject)


_MAYBE_TIME = TIMESTAMPS | ANY_JSON
_IDS = st.dictionaries(
    st.sampled_from(["example.com/allocation-id", "node_id", "workflow-id"]) | st.text(max_size=8),
    ANY_JSON,
    max_size=3,
)
#: A Kubernetes object: a kind, a name and a readable creationTimestamp; anything at all in
#: every other field the adapter reads.
K8S_OBJECTS = st.fixed_dictionaries(
    {
        "kind": st.text(min_size=1, max_size=12),
        "metadata": st.fixed_dictionaries(
            {"name": st.text(min_size=1, max_size=12), "creationTimestamp": TIMESTAMPS},
            optional={
                "namespace": ANY_JSON,
                "resourceVersion": ANY_JSON,
                "uid": ANY_JSON,
                "generation": ANY_JSON,
                "deletionTimestamp": _MAYBE_TIME,
                "labels": _IDS | ANY_JSON,
                "annotations": _IDS | ANY_JSON,
                "managedFields": ANY_JSON,
            },
        ),
    },
    optional={
        "status": st.fixed_dictionaries(
            {},
            optional={
                "phase": ANY_JSON,
                "state": ANY_JSON,
                "message": ANY_JSON,
                "observedGeneration": ANY_JSON,
                "lastUpdated": _MAYBE_TIME,
                "conditions": st.lists(
                    st.fixed_dictionaries({}, optional={"lastTransitionTime": _MAYBE_TIME})
                    | ANY_JSON,
                    max_size=3,
                )
                | ANY_JSON,
                "provisionJob": st.fixed_dictionaries(
                    {},
                    optional={
                        "state": ANY_JSON,
                        "message": ANY_JSON,
                        "provider": st.sampled_from(["aap", "eda"]) | ANY_JSON,
                        "id": ANY_JSON,
                        "jobId": ANY_JSON,
                        "lastTransitionTime": _MAYBE_TIME,
                    },
                )
                | ANY_JSON,
            },
        )
        | ANY_JSON,
        "spec": st.dictionaries(
            st.sampled_from(["allocationId", "node_id", "workflowId", "nodeInstanceId"]),
            ANY_JSON,
            max_size=3,
        )
        | ANY_JSON,
    },
)


@given(
    st.lists(K8S_OBJECTS, min_size=1, max_size=3),
    st.sampled_from(["object", "watch-event", "list"]),
)
def test_every_object_with_a_kind_a_name_and_a_time_becomes_events(
    objects: list[dict[str, Any]], framing: str
) -> None:
    if framing == "list":
        documents: list[Any] = [{"kind": "List", "items": objects}]
    elif framing == "watch-event":
        documents = [{"type": "MODIFIED", "object": obj} for obj in objects]
    else:
        documents = objects
    lines = [
        line
        for doc in documents
        for line in orjson.dumps(doc, option=orjson.OPT_INDENT_2).splitlines()
    ]

    items = list(parse(lines, "f"))

    expected: list[tuple[Any, Any, str | None]] = []
    for obj in objects:
        expected.append((obj["kind"], obj["metadata"]["name"], None))
        if instant(obj["metadata"].get("deletionTimestamp")) is not None:
            expected.append((obj["kind"], obj["metadata"]["name"], "Deleting"))
    assert [
        (i.entity_kind, i.entity_id, "Deleting" if i.state_to == "Deleting" else None)
        if isinstance(i, Event)
        else i
        for i in items
    ] == expected
