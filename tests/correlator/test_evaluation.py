"""``correlator eval``: incidents replayed from folders, scored against their truth."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from correlator.cli import main
from correlator.errors import InputError
from correlator.evaluation import evaluate, find_cases, read_truth

_T = "2026-11-20T10:00:0{}Z"


def _record(second: int, layer: str, event: str, **fields: object) -> dict[str, object]:
    return {"ts": _T.format(second), "level": "info", "event": event, "layer": layer, **fields}


def _case(
    root: Path, name: str, truth: dict[str, object], **files: list[dict[str, object]]
) -> Path:
    case = root / name
    case.mkdir(parents=True)
    (case / "truth.json").write_text(json.dumps(truth), "utf-8")
    for file_name, records in files.items():
        lines = b"".join(orjson.dumps(r) + b"\n" for r in records)
        (case / file_name.replace("_", "-", 1)).write_bytes(lines)
    return case


CERT_EVIDENCE = [
    _record(1, "workflow", "provision requested", allocation_id="a-1", node_id="n-1"),
    _record(
        2,
        "node",
        "claim failed",
        level="error",
        node_id="n-1",
        allocation_id="a-1",
        error={
            "type": "ssl.SSLCertVerificationError",
            "message": "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
            "certificate has expired (_ssl.c:1006)",
        },
    ),
    _record(3, "workflow", "provision failed", level="error", allocation_id="a-1"),
    _record(4, "node", "disk full", level="error", allocation_id="a-2", node_id="n-2"),
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "incidents"
    _case(
        root,
        "cert",
        {
            "seed": "allocation_id=a-1",
            "owner_layer": "cert",
            "first_failure_contains": "claim failed",
            "excluded": ["allocation_id=a-2"],
        },
        ndjson_services=CERT_EVIDENCE,
    )
    _case(
        root,
        "healthy",
        {"seed": "allocation_id=a-3", "owner_layer": "none"},
        ndjson=[
            _record(1, "api", "allocation requested", allocation_id="a-3"),
            _record(2, "node", "retrying", level="warning", allocation_id="a-3"),
            _record(3, "node", "claimed", allocation_id="a-3"),
        ],
    )
    return root


def test_a_corpus_is_replayed_and_scored(corpus: Path) -> None:
    report = evaluate([corpus])
    assert [(r.case, r.expected, r.got, r.right, r.why) for r in report.results] == [
        ("cert", "cert", "cert", True, "right"),
        ("healthy", "none", "none", True, "right"),
    ]
    assert report.results[0].owner_source == "inferred"
    assert report.results[0].accepted == 4
    assert report.accuracy == 1.0
    assert report.confusion() == {"cert": {"cert": 1}, "none": {"none": 1}}


def test_wrong_owner_wrong_first_failure_and_leaked_evidence_are_each_wrong(
    tmp_path: Path,
) -> None:
    base = {"seed": "allocation_id=a-1", "owner_layer": "cert"}
    _case(tmp_path, "owner", {**base, "owner_layer": "db"}, ndjson=CERT_EVIDENCE)
    _case(tmp_path, "text", {**base, "first_failure_contains": "expired!"}, ndjson=CERT_EVIDENCE)
    _case(tmp_path, "leak", {**base, "excluded": ["node_id=n-1"]}, ndjson=CERT_EVIDENCE)
    report = evaluate([tmp_path])
    assert [(r.case, r.right, r.why) for r in report.results] == [
        ("leak", False, "excluded evidence in the timeline: node_id=n-1"),
        ("owner", False, "owner cert, expected db"),
        ("text", False, "the first failure does not contain 'expired!': 'claim failed'"),
    ]
    assert report.accuracy == 0.0
    assert report.confusion() == {"cert": {"cert": 2}, "db": {"cert": 1}}


def test_the_command_prints_a_table_and_json_and_fails_under_the_floor(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert "accuracy 100.0% (2 of 2 right); false alarms on healthy cases: 0" in out
    assert main(["eval", "--json", str(corpus / "cert"), str(corpus / "healthy")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["accuracy"], data["right"], data["total"], data["false_alarms"]) == (
        1.0,
        2,
        2,
        [],
    )
    assert [c["case"] for c in data["cases"]] == ["cert", "healthy"]
    (corpus / "cert" / "truth.json").write_text(
        json.dumps({"seed": "allocation_id=a-1", "owner_layer": "db"}), "utf-8"
    )
    assert main(["eval", str(corpus)]) == 0  # no floor by default
    assert main(["eval", "--fail-under", "0.95", str(corpus)]) == 1
    assert "accuracy 50.0% is under --fail-under 95.0%" in capsys.readouterr().err


def test_an_owner_named_in_a_healthy_case_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _case(
        tmp_path,
        "quiet",
        {"seed": "allocation_id=a-1", "owner_layer": "none"},
        ndjson=CERT_EVIDENCE,
    )
    assert main(["eval", str(tmp_path)]) == 1
    assert "an owner was named in a healthy case: quiet" in capsys.readouterr().err


def test_an_operators_rules_file_changes_the_verdicts(
    tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "mine"\nowner_layer = "node"\nmessage = "certificate has expired"\n',
        "utf-8",
    )
    assert main(["eval", "--json", "--owner-rules", str(rules), str(corpus)]) == 0
    cases = json.loads(capsys.readouterr().out)["cases"]
    assert (cases[0]["got"], cases[0]["right"]) == ("node", False)
    rules.write_text('[[rule]]\nname = "bad"\nowner_layer = "nowhere"\nmessage = "x"\n', "utf-8")
    assert main(["eval", "--owner-rules", str(rules), str(corpus)]) == 2
    err = capsys.readouterr().err
    assert str(rules) in err
    assert "nowhere" in err


@pytest.mark.parametrize(
    ("truth", "message"),
    [
        ("{", "not JSON"),
        ("[]", "expected a JSON object"),
        ('{"seed": "allocation_id=a-1"}', "'seed' and 'owner_layer' are required"),
        ('{"seed": "allocation_id=a-1", "owner_layer": "x"}', "owner_layer 'x' is not one of"),
        ('{"seed": "alloc=a-1", "owner_layer": "db"}', "seed: unknown identifier 'alloc'"),
        ('{"seed": "allocation_id=a 1", "owner_layer": "db"}', "seed: allocation_id"),
        ('{"seed": "allocation_id=a-1", "owner_layer": "db", "why": 1}', "unknown field why"),
        (
            '{"seed": "allocation_id=a-1", "owner_layer": "db", "excluded": "x"}',
            "excluded must be a list",
        ),
        (
            '{"seed": "allocation_id=a-1", "owner_layer": "db", "sources": {"a": "csv"}}',
            "sources must map file names to a kind",
        ),
    ],
)
def test_a_bad_truth_file_is_named(tmp_path: Path, truth: str, message: str) -> None:
    path = tmp_path / "truth.json"
    path.write_text(truth, "utf-8")
    with pytest.raises(InputError, match=r"truth\.json") as raised:
        read_truth(path)
    assert message in str(raised.value)


def test_an_unreadable_case_is_reported_and_the_others_still_run(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = corpus / "odd"
    odd.mkdir()
    (odd / "truth.json").write_text('{"seed": "allocation_id=a-1", "owner_layer": "db"}')
    (odd / "services.log").write_text("hello\n")
    report = evaluate([corpus])
    assert [(r.case, r.got) for r in report.results] == [
        ("cert", "cert"),
        ("healthy", "none"),
        ("odd", "error"),
    ]
    assert "services.log: cannot tell its source kind from its name" in report.results[2].why
    assert main(["eval", str(corpus)]) == 2
    assert "cases that could not be read: odd" in capsys.readouterr().err


def test_a_file_named_in_sources_is_read_as_that_kind(tmp_path: Path) -> None:
    case = _case(
        tmp_path,
        "named",
        {"seed": "allocation_id=a-1", "owner_layer": "cert", "sources": {"svc.jsonl": "ndjson"}},
    )
    (case / "svc.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in CERT_EVIDENCE))
    assert evaluate([case]).results[0].right


def test_folders_without_cases_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no truth\.json"):
        find_cases([tmp_path])
    with pytest.raises(InputError, match="not a folder"):
        find_cases([tmp_path / "missing"])
