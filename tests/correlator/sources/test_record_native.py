"""The native record mapping against the Python one, its reference.

``ndjson.parse_table`` (the bulk ingest's path: ``_record_native`` maps what it is certain of,
the Python mapping the rest) must give exactly the rows and rejects ``ndjson.parse_columns``
gives for the same lines: every column, hashes included, whatever the lines. The lines are
generated records of every shape the mapping distinguishes (each field right, wrong, absent,
null, of another type), written by orjson and by the stdlib with its escapes and spaces, and
hostile lines: mutated records, bytes of any sort, invalid UTF-8, repeated keys, numbers
orjson rewrites, deep nesting. Other tests prove the native part does the work: a generated
fleet's lines and canonical records are declined by none.
"""

from __future__ import annotations

import json
import random
from typing import Any, Final

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fleet import generate
from correlator._schema import events_table
from correlator.model import IDENTIFIER_KEYS, LAYERS, OWNER_LAYERS, Reject
from correlator.sources import _native, _record_native, ndjson
from correlator.sources._fields import LEVEL_WORDS
from correlator.sources._record_native import map_lines  # CI builds it: its absence fails

_KEYS: Final = (
    "ts", "layer", "service", "level", "event", "error", "msg", "message", "node_id",
    "node_instance_id", "correlation_id", "allocation_id", "workflow_id", "trace_id", "span_id",
    "method", "path", "status", "duration_s", "entity_kind", "entity_id", "state_from",
    "from_state", "state_to", "to_state", "exception", "stack", "exc_info", "stack_info",
    "env", "logger", "x", "é", "k\u2028", "",
)  # fmt: skip

_TEXTS: Final = st.sampled_from(
    [
        *LAYERS, *OWNER_LAYERS, *LEVEL_WORDS, "INFO", "Warn", " error", "ERROR!", "", "x",
        "a-1", "node-17", "n 1", "a/b@c+d~e:f.g_h", "x" * 256, "x" * 257, "é", "\u2028",
        "tab\there", 'quo"te', "back\\slash", "\x00", "\x1f\x7f", "😀", "ab/cd",
        "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "0" * 32, "0" * 16,
        "4BF92F3577B34DA6A3CE929D0E0E4736", "2026-11-22T13:11:19Z",
        "2026-11-22T13:11:19.123456789Z", "2026-11-22T13:11:19.1234567891Z",
        "2026-11-22T14:11:19+01:00", "2026-11-22T08:11:19.5-05:00", "2026-11-22 13:11:19Z",
        "2026-11-22t13:11:19z", "2026-11-22T13:11:60Z", "2026-02-29T00:00:00Z",
        "2024-02-29T23:59:59.999999999Z", "1677-09-21T00:12:44Z", "2262-04-11T23:47:16Z",
        "2026-11-22T13:11:19+24:00", "2026-11-22T13:11:19", "1970-01-01T00:00:00Z",
        "2026-11-22T13:11:19\t+01:00", "2026-11-22T13:11:19+01:0", "2026-11-22T13:11:19+0160",
        "2026-11-22T13:11:19.Z", "2026-11-22T13:11:19+1", "2026-11-22T13:11:19,Z",
        "2026-11-22T13:11:19 Z", "2026-11-22T13:11:19+01:00 ",
        "GET", "/v1/allocations", "requested", "provisioning",
    ]
)  # fmt: skip
_NUMBERS: Final = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-1000, 1000),
    st.sampled_from([100, 599, 99, 600, 201, 0, -1, 2**63 - 1, -(2**63), 2**63, 2**64]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(min_value=-(10**17), max_value=10**17, places=6, allow_nan=False).map(float),
    st.sampled_from([0.0, -0.0, 0.1, 0.0001, 0.00001, 1e16, 1e15, 123456789012345.6, 5e-324]),
)
#: Strings of the characters JSON writers escape differently (controls, quotes, slashes...).
_ESCAPED: Final = st.text(
    alphabet=st.sampled_from(
        [*map(chr, range(32)), '"', "\\", "/", "\x7f", "é", "\u2028", "😀", "a"]
    ),
    max_size=6,
)
_SCALARS: Final = st.none() | st.booleans() | _NUMBERS | _TEXTS | _ESCAPED | st.text(max_size=8)
#: Numbers as a writer other than orjson may write them (``0.10``, ``1E5``, ``-0``, ``1.0e+2``).
_NUMBER_TEXTS: Final = st.sampled_from(
    [
        "0.10",
        "1.50",
        "1.0",
        "10.0",
        "-1.0",
        "-0",
        "-0.0",
        "0.0",
        "0.00",
        "1E5",
        "1e-7",
        "0.0001",
        "0.00001",
        "0.000123",
        "123456789012345.0",
        "123456789012345.6",
        "1234567890123456.7",
        "00",
        "01",
        "1.",
        "-",
        ".5",
        "1e400",
        "9" * 25,
        "1.5e+20",
    ]
).map(str.encode) | st.from_regex(
    r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,18})?([eE][-+]?[0-9]{1,3})?", fullmatch=True
).map(str.encode)
_VALUES: Final = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=6,
)
_ERRORS: Final = st.fixed_dictionaries(
    {},
    optional={
        "type": _TEXTS | _VALUES,
        "owner_layer": _TEXTS | _VALUES,
        "message": _TEXTS,
        "stack": _TEXTS,
        "chain": _VALUES,
    },
)
_GOOD_TIMES: Final = st.sampled_from(
    [
        "2026-11-22T13:11:19Z", "2026-11-22T13:11:19.123456789Z", "2026-11-22T13:11:19.5Z",
        "2026-11-22T14:11:19+01:00", "2026-11-22T08:11:19.000001-05:00", "2024-02-29T23:59:60Z",
        "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z", "2261-12-31T23:59:59Z",
        "2026-11-22 13:11:19,5Z", "2026-11-22T13:11:19 +0100", "2026-11-22t13:11:19-05",
        "2026-11-22T13:11:19.1234567891z", "2026-11-22T13:11:19  -23:59",
    ]
)  # fmt: skip


def _mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Values that are right for a field seven times in eight, anything the eighth."""
    return st.one_of(*[good] * 7, _VALUES | _TEXTS)


_IDS: Final = _mostly(st.sampled_from(["a-1", "node-17", "c:1/2@x", "x" * 256]) | st.integers())
#: Each field's values: right for it most of the time, so that most records are mapped.
_FIELDS: Final = {
    "service": _mostly(st.sampled_from(["api", "node-agent", "é"])),
    "level": _mostly(st.sampled_from([*LEVEL_WORDS, "INFO", "Warn", "ERROR"])),
    "event": _mostly(_TEXTS | _ESCAPED),
    "msg": _mostly(_TEXTS | _ESCAPED),
    "message": _mostly(_TEXTS),
    **{key: _IDS for key in IDENTIFIER_KEYS},
    "trace_id": _mostly(st.just("4bf92f3577b34da6a3ce929d0e0e4736")),
    "span_id": _mostly(st.just("00f067aa0ba902b7")),
    "method": _mostly(st.sampled_from(["GET", "POST"])),
    "path": _mostly(st.sampled_from(["/v1/allocations", "/"])),
    "status": _mostly(st.integers(100, 599)),
    "duration_s": _mostly(_NUMBERS),
    "entity_kind": _mostly(st.just("allocation")),
    "entity_id": _mostly(st.sampled_from(["a-1", 4711, ""])),
    "state_from": _mostly(st.sampled_from(["requested", ""])),
    "from_state": _mostly(st.sampled_from(["requested", ""])),
    "state_to": _mostly(st.sampled_from(["release_failed", ""])),
    "to_state": _mostly(st.sampled_from(["release_failed", ""])),
    "error": _mostly(_ERRORS),
    "stack": _TEXTS,
    "exception": _TEXTS,
    "env": _VALUES | _ESCAPED,
    "x": _VALUES,
    "é": _VALUES,
    "k\u2028": _VALUES,
    "": _VALUES,
}
#: Records of the record schema with each field right most of the time (most mapped), and
#: records of any keys and values (nearly all refused).
_RECORDS: Final = st.one_of(
    st.fixed_dictionaries(
        {"ts": _mostly(_GOOD_TIMES), "layer": _mostly(st.sampled_from(LAYERS))},
        optional=_FIELDS,
    ),
    st.dictionaries(st.sampled_from(_KEYS), _VALUES | _TEXTS | _ERRORS, min_size=1, max_size=12),
)


def _render(record: dict[str, Any], style: str) -> bytes:
    if style == "orjson":  # its own writer cannot write integers past 64 bits: the stdlib's
        try:
            return orjson.dumps(record)
        except TypeError:
            style = "compact"
    if style == "ascii":  # \uXXXX escapes for everything past ASCII
        return json.dumps(record).encode()
    if style == "spaces":
        return (" " + json.dumps(record, ensure_ascii=False, indent=None) + " \r").encode()
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def _mutated(line: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(line) + 1)
    cut = rng.choice([b"", b"\xff", b"\\", b'"', b"\x00", b",", b"}", b"e5", b".0", b"-"])
    return line[:at] + cut + line[at + rng.randrange(3) :]


@st.composite
def _lines(draw: st.DrawFn) -> list[bytes]:
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        record = draw(_RECORDS)
        style = draw(st.sampled_from(["orjson", "ascii", "spaces", "compact"]))
        line = _render(record, style)
        kind = draw(st.sampled_from(["as is"] * 5 + ["number"] * 3 + ["mutated", "bytes"]))
        if kind == "number" and len(record) > 0:  # a number field as another writer wrote it
            line = line.rstrip(b" \r")[:-1] + b',"n":' + draw(_NUMBER_TEXTS) + b"}"
        elif kind == "mutated":
            line = _mutated(line, random.Random(draw(st.integers(0, 2**32))))
        elif kind == "bytes":
            line = draw(st.binary(max_size=60))
        lines.append(line.replace(b"\n", b" "))
    return lines


def _both(
    lines: list[bytes], source: str = "ndjson", default_layer: str | None = None
) -> tuple[tuple[list[Any], list[Reject]], tuple[list[Any], list[Reject]]]:
    """(native path, Python path): the rows as sorted dicts, and the rejects."""
    table, rejects = ndjson.parse_table(
        lines, "origin", default_layer=default_layer, source=source, start_line=7
    )
    columns, reference_rejects = ndjson.parse_columns(
        lines, "origin", default_layer=default_layer, source=source, start_line=7
    )
    reference = events_table(columns)

    def rows(found: Any) -> list[Any]:
        return sorted(found.to_pylist(), key=lambda row: (row["hash"], row["raw"]))

    return (rows(table), rejects), (rows(reference), reference_rejects)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=_lines(),
    source=st.sampled_from(["ndjson", "agent"]),
    default_layer=st.sampled_from([None, "node", "nonsense"]),
)
def test_the_native_mapping_gives_the_rows_and_rejects_of_the_python_one(
    lines: list[bytes], source: str, default_layer: str | None
) -> None:
    native, python = _both(lines, source, default_layer)
    assert native == python


_BASE: Final = {"ts": "2026-11-22T13:11:19Z", "layer": "api"}
#: Each field's edge values: the ones each rule of the mapping turns on.
_EDGES: Final[dict[str, list[Any]]] = {
    "ts": [
        "2026-11-22T13:11:60Z", "2026-11-22T13:11:61Z", "2026-13-01T00:00:00Z",
        "2026-04-31T00:00:00Z", "2025-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z", "1677-09-21T00:12:43.145224192Z", "1677-09-21T00:12:43Z",
        "2262-04-11T23:47:16.854775807Z", "2262-04-11T23:47:17Z", "2026-11-22T13:11:19.Z",
        "2026-11-22T13:11:19.1234567890Z", "2026-11-22T24:00:00Z", "2026-11-22T13:60:00Z",
        "2026-11-22T13:11:19-23:59", "2026-11-22T13:11:19+23:60", "2026-11-22T13:11:19+0100",
        "2026-11-22T13:11:19+01", "2026-11-22T13:11:19,5Z", "2026-11-22T13:11:19 Z",
        "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "\uff12026-11-22T13:11:19Z", "",
        1795353079, None,
    ],
    "layer": [*LAYERS, "API", "", None, 1],
    "service": ["api", "", None, 1, [], "é"],
    "level": [
        *LEVEL_WORDS, *(word.upper() for word in LEVEL_WORDS), "Warn", " info", "INFO ",
        "İnfo", "", None, 3, "verbose",
    ],
    "event": ["", "x", None, 1, {"a": 1}, [1], 1e20],
    "msg": ["", "m", None, 0, 1, False, [1]],
    "message": ["", "m", None, 0, 1, [1]],
    **{
        key: ["a-1", "x" * 256, "x" * 257, "n 1", "", 0, -5, 2**63 - 1, 2**63, 1.5, True,
              None, [], "é"]
        for key in IDENTIFIER_KEYS
    },
    "trace_id": ["4bf92f3577b34da6a3ce929d0e0e4736", "0" * 32, "4BF92F3577B34DA6A3CE929D0E0E4736",
                 "4bf9", 1, None, ""],
    "span_id": ["00f067aa0ba902b7", "0" * 16, "00F067AA0BA902B7", "00f0", 1, None, ""],
    "method": ["GET", "", None, 1],
    "path": ["/v1", "", None, 1],
    "status": [99, 100, 599, 600, "502", 502.0, True, None, -1],
    "duration_s": [0, 1, -1, 0.5, 2**62, "1", True, None, [], 1e-7],
    "entity_kind": ["allocation", "", None, 1],
    "entity_id": ["a-1", "", 4711, -1, None, 1.5, True],
    "state_from": ["requested", "", None, 1],
    "from_state": ["requested", "", None, 1],
    "state_to": ["failed", "", None, 1],
    "to_state": ["failed", "", None, 1],
    "error": [
        {}, {"type": "E"}, {"type": ""}, {"type": 1}, {"type": None}, {"stack": "s"},
        *({"owner_layer": owner} for owner in [*OWNER_LAYERS, "x", None, 1]),
        {"message": "m", "stack": "s", "type": "E", "owner_layer": "cert", "chain": [1]},
        "text", [], 1, None, True,
    ],
    **{key: ["tb", None, 1] for key in ("exception", "stack", "exc_info", "stack_info")},
    "s": [chr(c) + "x" for c in range(0x80)] + ["é", "\u2028", "😀", "\u0800", "\uffff"],
}  # fmt: skip
_EDGE_NUMBERS: Final = [
    "0.10", "1.50", "1.0", "10.0", "-1.0", "-0", "-0.0", "0.0", "0.00", "1E5", "1e-7", "0.0001",
    "0.00001", "0.000001", "0.0000001", "0.000123", "0.00012345678901234", "123456789012345.0",
    "123456789012345.6", "1234567890123456.7", "12345678901234567.0", "9007199254740993.0",
    "00", "01", "1.", "-", ".5", "1e400", "9" * 25, "1.5e+20", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "99999999999999999999", "0.1", "0.5",
]  # fmt: skip


def _edge_lines() -> list[bytes]:
    """A record of the schema with one field at one of its edge values, written every way,
    and numbers written as other writers write them; seeded random numbers besides."""
    lines = []
    for key, values in _EDGES.items():
        for value in values:
            for style in ("orjson", "ascii", "spaces"):
                lines.append(_render({**_BASE, key: value}, style))
    rng = random.Random(26)
    numbers = [*_EDGE_NUMBERS]
    for _ in range(400):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 19)))
        at = rng.randrange(len(digits) + 1)
        numbers.append(f"{rng.choice(['', '-'])}{digits[:at] or '0'}.{digits[at:] or '0'}")
        numbers.append(repr(rng.uniform(-1e6, 1e6) / 10 ** rng.randrange(12)))
    base = orjson.dumps(_BASE)[:-1]
    for key in (b"n", b"duration_s"):  # kept as written in attrs; read as a float's value
        lines.extend(base + b',"' + key + b'":' + number.encode() + b"}" for number in numbers)
    return lines


def test_every_edge_of_every_field_maps_as_the_python_mapping_maps_it() -> None:
    lines = _edge_lines()
    native, python = _both(lines)
    assert native == python
    rows, _, _ = map_lines(lines, "ndjson", "origin", None)
    assert rows > len(lines) // 2  # most of them natively: the native rules are what is tested


CANONICAL: Final = [
    b'{"ts":"2026-11-22T13:11:19.123456789Z","level":"error","event":"provisioning failed",'
    b'"service":"api","layer":"api","env":"prod","allocation_id":"a-9","correlation_id":"c-1",'
    b'"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7",'
    b'"error":{"type":"ProvisionError","message":"tls: expired","owner_layer":"cert",'
    b'"chain":[{"type":"SSLError","message":"certificate has expired"}],"stack":"..."}}',
    b'{"ts":"2026-11-22T13:11:20Z","level":"info","event":"request","service":"ingress",'
    b'"layer":"ingress","method":"POST","path":"/v1/allocations","status":502,'
    b'"duration_s":0.1746,"correlation_id":"c-1","node_id":17}',
    b'{"ts":"2026-11-22T14:11:21.5+01:00","level":"WARN","msg":"state changed",'
    b'"layer":"workflow","entity_kind":"allocation","entity_id":4711,"from_state":"requested",'
    b'"to_state":"release_failed","workflow_id":"wf-3","attempt":2,"ok":false,"tags":["a","b"],'
    b'"note":"caf\\u00e9 \\"quoted\\" \\/ \\ud83d\\ude00","nothing":null}',
    b'  {"ts": "2026-11-22T13:11:22Z", "layer": "node", "event": "", "node_id": "n-1"}  \r',
    b'{"ts":"2026-11-22T13:11:23Z","layer":"db","event":"x","exception":"Traceback ...",'
    b'"error":"just text","level":null,"service":null,"message":"kept in attrs"}',
]


def test_canonical_records_are_mapped_natively_as_the_python_mapping_maps_them() -> None:
    rows, _, declined = map_lines(CANONICAL, "agent", "origin", None)
    assert (rows, declined) == (len(CANONICAL), [])
    native, python = _both(CANONICAL, "agent")
    assert native == python
    assert len(native[0]) == len(CANONICAL)


def test_a_generated_fleet_is_mapped_natively_with_nothing_declined(tmp_path: Any) -> None:
    fleet = generate(tmp_path, 20_000, seed=3)
    for path in fleet.files:
        lines = path.read_bytes().splitlines()
        rows, _, declined = map_lines(lines, "agent", str(path), None)
        assert (rows, declined) == (len(lines), []), path
        native, python = _both(lines, "agent")
        assert native == python


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b"", id="blank"),
        pytest.param(b"[1]", id="not-an-object"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":1,"a":2}', id="repeated"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":1e5}', id="exponent"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":0.10}', id="zero-end"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":-0}', id="minus-zero"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":' + b"9" * 20 + b"}",
                     id="past-64-bits"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":"\\ud800"}', id="surrogate"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":"\xff"}', id="not-utf8"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a\\u0062":1}', id="key-escape"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","a":' + b"[" * 70
                     + b"]" * 70 + b"}", id="deep"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","node_id":"a b"}', id="bad-id"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19\\tZ","layer":"api"}', id="other-time-form"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","level":"verbose"}',
                     id="unknown-level"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","status":"502"}',
                     id="status-as-text"),
        pytest.param(b'{"ts":"2026-11-22T13:11:19Z","layer":"api","error":{"owner_layer":"x"}}',
                     id="unknown-owner"),
    ],
)  # fmt: skip
def test_what_the_native_mapping_leaves_to_the_python_one(line: bytes) -> None:
    rows, _, declined = map_lines([line], "ndjson", "origin", None)
    assert (rows, declined) == (0, [0])
    native, python = _both([line])
    assert native == python


@pytest.mark.parametrize("lanes", [1, 4])
def test_lines_hashed_side_by_side_hash_as_hashlib_does(lanes: int) -> None:
    """Lines of every length up to nine blocks, shuffled so that each count of blocks has lines
    of many lengths beside each other (the last block's counter and padding differ per lane),
    a few past the grouped counts (hashed alone), some with a '\r' the hash leaves out: the
    rows the Python path gives, hashes included, hashed four side by side (where the CPU can)
    and one by one."""
    rng = random.Random(26)
    lines = [orjson.dumps({**_BASE, "message": "m" * size}) for size in range(0, 1100)]
    lines += [orjson.dumps({**_BASE, "message": "é" * size}) for size in (1100, 2100, 5000)]
    lines += [line + b"\r" for line in lines[::7]]
    rng.shuffle(lines)
    used = _record_native.hash_lanes()
    try:
        assert _record_native.hash_lanes(lanes) in ({1} if lanes == 1 else {1, 4})
        native, python = _both(lines, "agent")
        assert len(native[0]) == len(lines)
        assert native == python
    finally:
        _record_native.hash_lanes(used)


def test_hash_lanes_takes_one_or_four() -> None:
    with pytest.raises(ValueError, match="lanes must be 1 or 4"):
        _record_native.hash_lanes(2)


def test_the_native_module_is_the_one_ingest_uses() -> None:
    assert _native.NATIVE


def test_a_line_that_is_not_bytes_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="line 1 is str, not bytes"):
        map_lines([b"{}", "{}"], "ndjson", "origin", None)
