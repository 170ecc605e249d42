"""An operator's rules file for the ``text`` source: their own format, identifier and layer
rules, and every way a file can be wrong, each named."""

from __future__ import annotations

from pathlib import Path

import pytest

from correlator.cli import main
from correlator.errors import QueryError
from correlator.model import Event, Reject
from correlator.sources.text import FORMATS
from correlator.sources.text._rules_file import MAX_RULES_BYTES, read_rules
from correlator.sources.text._source import parse, settle
from correlator.store import Store

BILLING = r"""
[formats.billing]
pattern = '^(?P<time>\d{4}-\S+ \S+) (?P<level>[A-Z]+) \[(?P<request_id>[^\]]*)\] '
time_format = '%Y-%m-%d %H:%M:%S,%f'
zone = '+01:00'
example = '2026-11-29 04:29:29,123 ERROR [req-1] charge failed'

[[identifiers]]
field = 'request_id'
to = 'correlation_id'
formats = ['billing']

[[identifiers]]
pattern = 'allocation (?P<id>a-[0-9]+)'
to = 'allocation_id'

[[layers]]
match = '^billing'
layer = 'api'
"""

LINES = [
    b"2026-11-29 04:29:29,123 ERROR [req-1] charge failed for allocation a-9",
    b"  Traceback (most recent call last):",
    b"  ValueError: card declined",
    b"2026-11-29 04:29:30,000 INFO [req-2] retried",
]


def _rules(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    return path


def test_an_operators_format_ids_and_layers_read_a_file(tmp_path: Path) -> None:
    rules = read_rules(str(_rules(tmp_path, BILLING)), frozenset(FORMATS))

    items = list(parse(LINES, "/var/log/billing.log", rules=rules))

    assert not [item for item in items if isinstance(item, Reject)]
    first, second = (item for item in items if isinstance(item, Event))
    assert first.ts_ns == 1_795_922_969_123_000_000  # 03:29:29.123Z: the format's +01:00
    assert (first.level, first.layer, first.service) == ("error", "api", "billing")
    assert (first.correlation_id, first.allocation_id) == ("req-1", "a-9")
    assert first.message == "charge failed for allocation a-9"
    assert first.error_type == "ValueError"
    assert (second.correlation_id, second.allocation_id) == ("req-2", None)


def test_auto_prefers_the_operators_format(tmp_path: Path) -> None:
    rules = read_rules(str(_rules(tmp_path, BILLING)), frozenset(FORMATS))

    values, note = settle(LINES, {"text_format": "auto", "rules": rules})

    assert values["text_format"] == "billing"
    # python's asctime reads them too: a tie goes to the operator's format
    assert note == (
        "--format auto chose billing: it reads 4 of the first 4 lines (also read: python 4)"
    )


def test_builtin_false_leaves_only_the_operators_rules(tmp_path: Path) -> None:
    rules = read_rules(str(_rules(tmp_path, "builtin = false\n" + BILLING)), frozenset(FORMATS))
    line = b"time=2026-11-29T04:29:29Z msg=x request_id=r-1 service=nova-api"

    [item] = parse([line], "stdin", rules=rules, text_format="logfmt", layer="api")

    assert isinstance(item, Event)
    assert item.correlation_id is None  # the built-in request_id rule is off
    assert item.layer == "api"


def test_the_cli_takes_the_rules_file_and_its_format(tmp_path: Path) -> None:
    log = tmp_path / "billing.log"
    log.write_bytes(b"\n".join(LINES) + b"\n")
    db = str(tmp_path / "c.duckdb")
    rules = str(_rules(tmp_path, BILLING))

    assert (
        main(
            [
                "--db",
                db,
                "ingest",
                "--source",
                "text",
                "--text-rules",
                rules,
                "--format",
                "billing",
                str(log),
            ]
        )
        == 0
    )
    with Store(db) as store:
        rows = (
            store.cursor()
            .execute("SELECT correlation_id, allocation_id FROM events ORDER BY ts_ns")
            .fetchall()
        )

    assert rows == [("req-1", "a-9"), ("req-2", None)]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("formats = 3", "formats: must be a table of formats ([formats.NAME])"),
        ("[formats.x]\nstart = 'a'", "formats.x.pattern: is required"),
        (
            "[formats.x]\npattern = '(?P<when>.)'",
            "formats.x.pattern: has no (?P<time>...) group: a record needs a time",
        ),
        (
            "[formats.x]\npattern = '(?P<time>['",
            "formats.x.pattern: is not a regular "
            "expression: unterminated character set at position 9",
        ),
        (
            "[formats.oslo]\npattern = '(?P<time>.)'",
            "formats.oslo: 'oslo' is a built-in format's name; choose another",
        ),
        (
            "[formats.X]\npattern = '(?P<time>.)'",
            "formats.X: a format's name is 1-40 of a-z, 0-9, _ and -, starting with a letter",
        ),
        (
            "[formats.x]\npattern = '(?P<time>.)'\nzone = 'Mars/Olympus'",
            "formats.x.zone: "
            "'Mars/Olympus' is not a time zone: use UTC, an offset such as +01:00 or -0530, or "
            "an IANA name such as Europe/Berlin",
        ),
        (
            "[formats.x]\npattern = '(?P<time>.)'\ncolour = 'red'",
            "formats.x: unknown key "
            "'colour'; the keys are example, pattern, start, time_format, zone",
        ),
        (
            "[[identifiers]]\nfield = 'host'\nto = 'hostname'",
            "identifiers[1].to: 'hostname' "
            "is not an identifier; use one of node_id, node_instance_id, correlation_id, "
            "allocation_id, workflow_id, trace_id, span_id",
        ),
        ("[[identifiers]]\nto = 'node_id'", "identifiers[1]: give a field, a pattern, or both"),
        (
            "[[identifiers]]\nfield = 'h'\nto = 'node_id'\nformats = ['nope']",
            "identifiers[1].formats: no format is named 'nope'",
        ),
        (
            "[[identifiers]]\nfield = 'h'\nto = 'node_id'\nformats = 'klog'",
            "identifiers[1].formats: must be an array of format names",
        ),
        (
            "[[identifiers]]\nfield = 7\nto = 'node_id'",
            "identifiers[1].field: must be a non-empty string, not 7",
        ),
        ("identifiers = 'x'", "identifiers: must be an array of tables ([[identifiers]])"),
        (
            "[[layers]]\nmatch = 'x'\nlayer = 'frontend'",
            "layers[1].layer: 'frontend' is not "
            "a layer; use one of node, ingress, api, workflow, db, provider, projection",
        ),
        ("[[layers]]\nlayer = 'api'", "layers[1].match: is required"),
        ("builtin = 'yes'", "builtin: must be true or false"),
        (
            "owners = 1",
            "the file: unknown key 'owners'; the keys are builtin, formats, identifiers, layers",
        ),
    ],
)
def test_a_wrong_rules_file_is_refused_naming_the_place(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = _rules(tmp_path, text)

    with pytest.raises(QueryError) as raised:
        read_rules(str(path), frozenset(FORMATS))

    assert str(raised.value) == f"{path}: {problem}"


def test_a_file_that_is_not_toml_too_large_or_missing_is_refused(tmp_path: Path) -> None:
    not_toml = _rules(tmp_path, "[formats.x\n")
    large = tmp_path / "large.toml"
    large.write_bytes(b"#" * (MAX_RULES_BYTES + 1))
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")

    for path, message in [
        (
            not_toml,
            f"{not_toml} is not a TOML file: Expected ']' at the end of a table "
            "declaration (at line 1, column 11)",
        ),
        (large, f"{large}: a rules file is at most 1,048,576 bytes"),
        (
            binary,
            f"{binary} is not a TOML file: 'utf-8' codec can't decode byte 0xff in "
            "position 0: invalid start byte",
        ),
        (
            tmp_path / "none.toml",
            f"cannot read the text rules file {tmp_path / 'none.toml'}: No such file or directory",
        ),
    ]:
        with pytest.raises(QueryError) as raised:
            read_rules(str(path), frozenset(FORMATS))
        assert str(raised.value) == message


def test_the_cli_names_the_option_of_a_bad_rules_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _rules(tmp_path, "[[layers]]\nlayer = 'api'")
    log = tmp_path / "a.log"
    log.write_text("time=2026-11-29T04:29:29Z msg=x\n")

    code = main(
        [
            "--db",
            str(tmp_path / "c.duckdb"),
            "ingest",
            "--source",
            "text",
            "--text-rules",
            str(path),
            str(log),
        ]
    )

    assert code == 2
    assert f"--text-rules: {path}: layers[1].match: is required" in capsys.readouterr().err
