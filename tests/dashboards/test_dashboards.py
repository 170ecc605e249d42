"""The generated Grafana dashboards: reproducible, portable, and every LogQL expression valid.

The parser tests run ``dashboards/logql_check.mjs`` (Grafana's ``@grafana/lezer-logql`` grammar
under node) on every expression after substituting template variables the way Grafana does
(:func:`substitute`); they install the pinned npm package with ``npm ci`` when
``dashboards/node_modules`` is missing. Every expression also runs against the real Loki at
``LOKI_URL`` (``scripts/test.sh`` starts one). Without node or a Loki those tests skip, and
fail in CI (``CI=true``: :mod:`tests.real_parts`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dashboards
from agent_logging.schema import IDENTIFIER_KEYS, LAYERS
from dashboards import build
from dashboards.__main__ import main
from tests.real_parts import missing

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "dashboards"
LOKI_REF = {"type": "loki", "uid": "${loki}"}

COMMITTED: dict[str, dict[str, Any]] = {
    path.name: json.loads(path.read_text("utf-8"))
    for path in sorted(dashboards.JSON_DIR.glob("*.json"))
}


def _panels() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, board in COMMITTED.items():
        for panel in board["panels"]:
            yield name, panel


def _targets() -> list[dict[str, Any]]:
    return [target for _, panel in _panels() for target in panel["targets"]]


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a JSON document, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


# -- reproducible -----------------------------------------------------------------------------


def test_regenerating_gives_the_committed_bytes() -> None:
    rendered = dashboards.render_all()
    assert sorted(rendered) == sorted(COMMITTED)
    for name, text in rendered.items():
        assert (dashboards.JSON_DIR / name).read_bytes() == text.encode(), name
    assert dashboards.stale_files() == []


def test_check_names_changed_missing_and_orphaned_files(tmp_path: Path) -> None:
    assert main(["--dir", str(tmp_path)]) == 0
    assert main(["--check", "--dir", str(tmp_path)]) == 0

    (tmp_path / "node-evidence.json").write_text("{}\n")
    (tmp_path / "shipping-health.json").unlink()
    (tmp_path / "old-dashboard.json").write_text("{}\n")
    assert dashboards.stale_files(tmp_path) == [
        "node-evidence.json",
        "old-dashboard.json",
        "shipping-health.json",
    ]
    assert main(["--check", "--dir", str(tmp_path)]) == 1


def test_check_of_a_missing_directory_names_every_dashboard(tmp_path: Path) -> None:
    assert dashboards.stale_files(tmp_path / "absent") == sorted(COMMITTED)


# -- portable: stable uids, schema version, datasources as variables ---------------------------


def test_uids_are_stable_and_unique() -> None:
    assert {name: board["uid"] for name, board in COMMITTED.items()} == {
        "incident-timeline.json": "ep-incident-timeline",
        "lifecycle-findings.json": "ep-lifecycle-findings",
        "node-evidence.json": "ep-node-evidence",
        "shipping-health.json": "ep-shipping-health",
    }


def test_every_dashboard_has_the_current_schema_version() -> None:
    assert build.SCHEMA_VERSION == 41
    assert {board["schemaVersion"] for board in COMMITTED.values()} == {41}


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_the_loki_datasource_is_a_variable(name: str) -> None:
    variables = COMMITTED[name]["templating"]["list"]
    assert variables[0] == {
        "type": "datasource",
        "name": "loki",
        "label": "Loki",
        "query": "loki",
        "regex": "",
        "current": {},
        "options": [],
        "hide": 0,
        "refresh": 1,
        "includeAll": False,
        "multi": False,
    }


def test_every_panel_and_query_points_at_the_datasource_variable() -> None:
    panels = list(_panels())
    assert len(panels) == 25
    for name, panel in panels:
        assert panel["datasource"] == LOKI_REF, (name, panel["title"])
        assert panel["targets"], (name, panel["title"])
        for target in panel["targets"]:
            assert target["datasource"] == LOKI_REF, (name, panel["title"])


def test_no_datasource_uid_is_hard_coded_anywhere() -> None:
    for name, board in COMMITTED.items():
        refs = [value for key, value in _walk(board) if key == "datasource"]
        assert refs, name
        assert all(ref == LOKI_REF for ref in refs), name
    for path in dashboards.JSON_DIR.glob("*.json"):
        assert "ep-loki" not in path.read_text("utf-8")


_VARIABLE_USE = re.compile(r"\$\{([A-Za-z_]\w*)|\$([A-Za-z_]\w*)")
_BUILTINS = {"__auto", "__range", "__interval", "__field", "__data", "__value"}


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_every_variable_used_is_defined(name: str) -> None:
    board = COMMITTED[name]
    defined = {variable["name"] for variable in board["templating"]["list"]}
    used = {
        a or b
        for _, value in _walk(board)
        if isinstance(value, str)
        for a, b in _VARIABLE_USE.findall(value)
    }
    assert used - _BUILTINS <= defined
    assert defined <= used, "a variable nothing uses"


def test_identifiers_reach_queries_only_uriencoded_and_labels_only_regex_escaped() -> None:
    allowed = {
        *(f'"${{{key}:uriencode}}"' for key in IDENTIFIER_KEYS),
        "`${env:regex}`",
        "`${service:regex}`",
    }
    for target in _targets():
        rest = target["expr"]
        for form in allowed:
            rest = rest.replace(form, "")
        assert re.findall(r"\$\{?(\w+)", rest) in ([], ["__auto"], ["__range"]), target["expr"]


def test_identifier_filter() -> None:
    assert dashboards.identifier_filter("node_id") == (
        '| node_id="${node_id:uriencode}" or _empty_means_any="${node_id:uriencode}"'
    )


# -- what each dashboard shows ----------------------------------------------------------------


def test_incident_timeline_has_a_variable_per_identifier_and_a_logs_panel_per_layer() -> None:
    board = COMMITTED["incident-timeline.json"]
    textboxes = {
        v["name"]: v["query"] for v in board["templating"]["list"] if v["type"] == "textbox"
    }
    assert textboxes == {
        "node_id": "",
        "node_instance_id": "",
        "correlation_id": "",
        "allocation_id": "",
        "workflow_id": "",
        "correlator_url": "http://127.0.0.1:8080",
    }
    log_panels = [p for p in board["panels"] if p["type"] == "logs"]
    layers = [re.match(r'\{layer="(\w+)"', p["targets"][0]["expr"]) for p in log_panels]
    assert [m.group(1) for m in layers if m] == ["node", "ingress", "api", "workflow", "db"]
    assert set(dashboards.LAYER_ORDER) == set(LAYERS)
    for panel in log_panels:
        for key in IDENTIFIER_KEYS:
            assert dashboards.identifier_filter(key) in panel["targets"][0]["expr"]
    assert {p["type"] for p in board["panels"]} == {"logs", "timeseries", "state-timeline"}


def _exprs(name: str) -> list[str]:
    return [t["expr"] for p in COMMITTED[name]["panels"] for t in p["targets"]]


def test_node_evidence_follows_one_node_across_installations() -> None:
    exprs = _exprs("node-evidence.json")
    assert all(dashboards.identifier_filter("node_id") in e for e in exprs)
    assert all(
        e.startswith(("sum by (node_id, node_instance_id)", "sum by (event, task)", "{"))
        for e in exprs
    )
    assert sum("node_instance_id)" in e for e in exprs) == 2
    assert sum('task!=""' in e for e in exprs) == 2


def test_lifecycle_findings_read_finding_records_and_release_failed() -> None:
    exprs = _exprs("lifecycle-findings.json")
    assert sum('| event="finding"' in e for e in exprs) == 3
    assert any(
        e.startswith("sum by (provider) (count_over_time(") and '| state_to="release_failed"' in e
        for e in exprs
    )


def test_shipping_health_charts_spool_and_delivery_counters_per_service() -> None:
    exprs = _exprs("shipping-health.json")
    unwrapped = [m for e in exprs for m in re.findall(r"\| unwrap (\w+)", e)]
    assert unwrapped == [
        "spool_records",
        "oldest_unsent_age_s",
        "spool_bytes",
        "retried",
        "dropped",
        "dead_lettered",
        "write_errors",
    ]
    assert all(e.startswith("max by (service_name) (max_over_time(") for e in exprs[:-1])
    assert exprs[-1].endswith(' | last_error!="" or spool_error!=""')


ENV = "env=~`${env:regex}`"
SERVICE = "service_name=~`${service:regex}`"
NODE = '| node_id="${node_id:uriencode}" or _empty_means_any="${node_id:uriencode}"'
IDS = [
    f'| {key}="${{{key}:uriencode}}" or _empty_means_any="${{{key}:uriencode}}"'
    for key in IDENTIFIER_KEYS
]
HEALTH = [SERVICE, '|= `"shipping health"`', '| event="shipping health"']

#: Every panel's query and what it must keep: the stream, the label and metadata filters, the
#: grouping its title promises. Emptying a query or dropping one of its filters fails.
PANEL_FILTERS: dict[tuple[str, str], list[str]] = {
    ("incident-timeline.json", "Failures by owner layer"): [
        "sum by (owner_layer) (",
        *IDS,
        '| json owner_layer="error.owner_layer"',
        '| owner_layer!=""',
    ],
    ("incident-timeline.json", "Allocation lifecycle states"): [
        "sum by (allocation_id, state_to) (",
        '{layer="workflow", ',
        *IDS,
        '| entity_kind="allocation"',
        '| state_to!=""',
    ],
    **{
        ("incident-timeline.json", f"{layer} layer"): [f'{{layer="{layer}", ', *IDS]
        for layer in ("node", "ingress", "api", "workflow", "db")
    },
    ("node-evidence.json", "Installations (node_instance_id) over time"): [
        "sum by (node_id, node_instance_id) (",
        '{layer="node", ',
        NODE,
    ],
    ("node-evidence.json", "Installations seen in the time range"): [
        "sum by (node_id, node_instance_id) (",
        '{layer="node", ',
        NODE,
        "[$__range]",
    ],
    ("node-evidence.json", "Task records by event"): [
        "sum by (event, task) (",
        '{layer="node", ',
        NODE,
        '| task!=""',
    ],
    ("node-evidence.json", "Task claims and results"): ['{layer="node", ', NODE, '| task!=""'],
    ("node-evidence.json", "Node errors"): ['{layer="node", ', NODE, '| level=~"error|critical"'],
    ("node-evidence.json", "All node records"): ['{layer="node", ', NODE],
    ("lifecycle-findings.json", "Open findings by rule and severity"): [
        "count by (rule, severity) (",
        '| event="finding"',
    ],
    ("lifecycle-findings.json", "release_failed transitions by provider"): [
        "sum by (provider) (",
        '{layer="workflow", ',
        '| state_to="release_failed"',
    ],
    ("lifecycle-findings.json", "Findings seen in the time range"): [
        "sum by (rule, severity, entity_kind, entity_id, allocation_id) (",
        '| event="finding"',
        "[$__range]",
    ],
    ("lifecycle-findings.json", "Finding records"): ['| event="finding"'],
    **{
        ("shipping-health.json", title): [*HEALTH, f"| unwrap {field} |"]
        for field, title in [
            ("spool_records", "Spool depth (records not yet acknowledged)"),
            ("oldest_unsent_age_s", "Oldest unsent record age"),
            ("spool_bytes", "Spool size"),
            ("retried", "Retried pushes (cumulative)"),
            ("dropped", "Dropped records (cumulative)"),
            ("dead_lettered", "Dead-lettered records (cumulative)"),
            ("write_errors", "Spool write errors: records lost, a full disk (cumulative)"),
        ]
    },
    ("shipping-health.json", "Health records with an error"): [
        *HEALTH,
        '| last_error!="" or spool_error!=""',
    ],
}


def test_every_panel_is_in_the_filter_table() -> None:
    queries = {(name, panel["title"]): panel["targets"] for name, panel in _panels()}
    assert len(queries) == 25  # titles are unique per dashboard
    assert sorted(queries) == sorted(PANEL_FILTERS)


@pytest.mark.parametrize(("board", "title"), sorted(PANEL_FILTERS))
def test_a_panel_query_selects_env_and_keeps_its_filters(board: str, title: str) -> None:
    [panel] = [p for p in COMMITTED[board]["panels"] if p["title"] == title]
    [target] = panel["targets"]
    expr = target["expr"]
    # The env variable restricts the stream selector itself, before any pipeline stage.
    assert 0 <= expr.find(ENV) < expr.find(" |"), expr
    missing = [stage for stage in PANEL_FILTERS[board, title] if stage not in expr]
    assert missing == [], expr


def test_links_lead_to_the_correlator_timeline() -> None:
    urls = [
        link["url"]
        for board in COMMITTED.values()
        for key, links in _walk(board)
        if key == "links"
        for link in links
    ]
    assert len(urls) == 11
    assert urls.count("${correlator_url:raw}/v1/findings") == 1
    # Each other link opens the timeline of one identifier, with that identifier's own value
    # (the variable, a series label or a table column of the same name), percent-encoded.
    link = re.compile(
        r"\$\{correlator_url:raw\}/\?(\w+)="
        r"\$\{(?:__field\.labels\.|__data\.fields\.)?(\w+):percentencode\}"
    )
    keys = [link.fullmatch(url) for url in urls if not url.endswith("/v1/findings")]
    assert all(m and m[1] == m[2] and m[1] in IDENTIFIER_KEYS for m in keys), urls
    board_links = [link["url"] for link in COMMITTED["incident-timeline.json"]["links"]]
    assert board_links == [
        f"${{correlator_url:raw}}/?{key}=${{{key}:percentencode}}" for key in IDENTIFIER_KEYS
    ]
    # The same links open the Loki-backed timeline when the service pulls from a Loki: the
    # operator hovering one is told so.
    tips = [link["tooltip"] for link in COMMITTED["incident-timeline.json"]["links"]]
    assert all("--loki-url" in tip for tip in tips), tips


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_panels_tile_the_grid(name: str) -> None:
    panels = COMMITTED[name]["panels"]
    assert [p["id"] for p in panels] == list(range(1, len(panels) + 1))
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= build.GRID_WIDTH
        # A panel without width or height would cover no cell and overlap nothing.
        assert pos["y"] >= 0 and pos["w"] >= 1 and pos["h"] >= 1, panel["title"]
        mine = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not mine & cells, panel["title"]
        cells |= mine


def test_layout_wraps_to_a_new_row_below_the_tallest_panel() -> None:
    board = build.Dashboard(
        uid="t",
        title="t",
        description="",
        variables=(build.datasource_variable(),),
        panels=(
            build.logs("a", '{a="1"}', width=12, height=5),
            build.logs("b", '{a="1"}', width=8, height=9),
            build.logs("c", '{a="1"}', width=6, height=3),
        ),
    ).as_json()
    assert [p["gridPos"] for p in board["panels"]] == [
        {"h": 5, "w": 12, "x": 0, "y": 0},
        {"h": 9, "w": 8, "x": 12, "y": 0},
        {"h": 3, "w": 6, "x": 0, "y": 9},
    ]


@pytest.mark.parametrize("width", [0, 25])
def test_a_panel_wider_than_the_grid_is_refused(width: int) -> None:
    board = build.Dashboard("t", "t", "", (), (build.logs("a", '{a="1"}', width=width),))
    with pytest.raises(ValueError, match=f"width {width} not in 1..24"):
        board.as_json()


# -- provisioning -----------------------------------------------------------------------------


def test_provisioning_files_name_the_datasource_and_the_dashboards() -> None:
    try:
        import yaml
    except ImportError:  # pragma: no cover - depends on the environment
        missing("PyYAML", "the yaml package is not installed")
    sources = yaml.safe_load((PACKAGE_DIR / "provisioning" / "datasources.yaml").read_text())
    assert sources["apiVersion"] == 1
    (loki,) = sources["datasources"]
    assert (loki["type"], loki["uid"], loki["url"]) == ("loki", "ep-loki", "${LOKI_URL}")
    derived = loki["jsonData"]["derivedFields"]
    assert [d["name"] for d in derived] == [
        "allocation_id",
        "correlation_id",
        "workflow_id",
        "node_id",
        "node_instance_id",
    ]
    for field in derived:
        assert field["matcherType"] == "label"
        assert field["matcherRegex"] == field["name"]
        assert field["url"] == (
            f"${{CORRELATOR_URL}}/?{field['name']}=$${{__value.raw:percentencode}}"
        )

    providers = yaml.safe_load((PACKAGE_DIR / "provisioning" / "dashboards.yaml").read_text())
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    assert provider["allowUiUpdates"] is False
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards/evidence-pipeline"


# -- every LogQL expression parses (Grafana's grammar under node) -----------------------------

ALL = object()
"""A multi-value variable set to All: Grafana inserts its custom all value (``.+``) as is."""

#: Grafana's interval variables, as a 5-minute range at a 1-minute step would set them.
INTERVALS = {"__auto": "1m", "__interval": "1m", "__range": "5m"}

SAMPLE: dict[str, object] = {
    "env": ALL,
    "service": ["api", "node-agent"],
    "node_id": "n-17.rack-3",
    "node_instance_id": "ni-4",
    "correlation_id": "c-1f2e",
    "allocation_id": "a-7f3c",
    "workflow_id": "wf-a-7f3c-provision",
}
EMPTY = SAMPLE | dict.fromkeys(IDENTIFIER_KEYS, "")


def uriencode(value: str) -> str:
    """Grafana's ``uriencode`` format: ``encodeURI``, then ``!'()*`` encoded too."""
    return urllib.parse.quote(value, safe=";,/?:@&=+$#")


def regex_format(value: str | list[str]) -> str:
    """Grafana's ``regex`` format (``escapeRegex`` of ``@grafana/data``, ``(a|b)`` for lists)."""
    if isinstance(value, list):
        escaped = [regex_format(v) for v in value]
        return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    return re.sub(r"[\\^$*+?.()|\[\]{}/]", lambda m: "\\" + m.group(), value)


def substitute(expr: str, values: Mapping[str, object]) -> str:
    """Interpolate ``expr`` as Grafana does for the formats the dashboards use."""

    def one(match: re.Match[str]) -> str:
        name, fmt = match.group(1) or match.group(3), match.group(2) or ""
        if name in INTERVALS:
            return INTERVALS[name]
        value = values[name]
        if value is ALL:
            return ".+"
        if fmt == "uriencode" and isinstance(value, str):
            return uriencode(value)
        if fmt == "regex" and isinstance(value, str | list):
            return regex_format(value)
        raise AssertionError(f"${{{name}:{fmt}}} is not a use the dashboards should make")

    return re.sub(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)", one, expr)


_GO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def go_unquote(literal: str) -> str:
    """Read a LogQL string literal as Loki's lexer does (Go ``text/scanner`` rules).

    Raises:
        ValueError: Loki would refuse the literal (``\\.`` and other unknown escapes, a raw
            newline in a double-quoted string, a backtick in a raw string).
    """
    if len(literal) >= 2 and literal[0] == literal[-1] == "`":
        if "`" in literal[1:-1]:
            raise ValueError(f"backtick inside a raw string: {literal!r}")
        return literal[1:-1]
    if not (len(literal) >= 2 and literal[0] == literal[-1] == '"'):
        raise ValueError(f"not a string literal: {literal!r}")
    body, out, i = literal[1:-1], [], 0
    while i < len(body):
        char = body[i]
        if char in '"\n':
            raise ValueError(f"unescaped {char!r} in {literal!r}")
        if char != "\\":
            out.append(char)
            i += 1
            continue
        kind = body[i + 1 : i + 2]
        if kind in _GO_ESCAPES or kind in ('"', "\\"):
            out.append(_GO_ESCAPES.get(kind, kind))
            i += 2
        elif kind in ("x", "u", "U"):
            digits = {"x": 2, "u": 4, "U": 8}[kind]
            out.append(chr(int(body[i + 2 : i + 2 + digits], 16)))
            i += 2 + digits
        elif re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
            out.append(chr(int(body[i + 1 : i + 4], 8)))
            i += 4
        else:
            raise ValueError(f"invalid escape \\{kind} in {literal!r}")
    return "".join(out)


EXPRESSIONS = [target["expr"] for target in _targets()]
IDENTIFIER_EXPRESSIONS = [e for e in EXPRESSIONS if ":uriencode}" in e]


HOSTILE = [
    'a"} |= "x',
    'a\\"} |= "x',
    "a`} |= `x",
    'x\n} or level="debug',
    "ends with a backslash\\",
    "${node_id}",
    "ünïcode ✓",
]

#: What other formats would make of a hostile or dotted value, and whether the grammar itself
#: sees the damage (else only Loki's lexer does: see :func:`go_unquote`).
BROKEN = [
    # `${allocation_id:raw}` (or the Loki datasource's default) with a hostile value:
    ('{layer="api"} | allocation_id="a"} |= "x"', True),
    # `${allocation_id:doublequote}` with a backslash before the quote:
    ('{layer="api"} | allocation_id="a\\\\"} |= \\"x"', True),
    # `"${node_id:regex}"`: lezer accepts it, Loki's lexer refuses `\.`:
    ('{layer="node"} | node_id="n-17\\.rack"', False),
    ('sum(count_over_time({a="b"}[1m]', True),
    ("", True),
]


def _attacked(hostile: str) -> list[str]:
    values = EMPTY | dict.fromkeys(IDENTIFIER_KEYS, hostile)
    return [substitute(expr, values) for expr in IDENTIFIER_EXPRESSIONS]


def _fixed_cases() -> list[str]:
    cases = [substitute(e, values) for values in (SAMPLE, EMPTY) for e in EXPRESSIONS]
    cases += [case for hostile in HOSTILE for case in _attacked(hostile)]
    return cases + [expr for expr, _ in BROKEN]


@pytest.fixture(scope="module")
def logql() -> Callable[[Sequence[str]], list[dict[str, Any]]]:
    """``logql(expressions)``: each expression's parse by Grafana's LogQL grammar.

    Node takes ~0.3 s to start, so every fixed case of this module is parsed in one run up
    front and remembered; later calls run node only for expressions not seen yet.
    """
    node = shutil.which("node")
    if node is None:
        missing("Node.js", "node is not on PATH: Grafana's LogQL grammar runs under node")
    if not (PACKAGE_DIR / "node_modules" / "@grafana" / "lezer-logql").is_dir():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm is missing: run `npm ci --prefix dashboards` to install the grammar")
        installed = subprocess.run(
            [npm, "ci", "--prefix", str(PACKAGE_DIR), "--no-audit", "--no-fund"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert installed.returncode == 0, f"npm ci --prefix dashboards failed:\n{installed.stderr}"
    parsed: dict[str, dict[str, Any]] = {}

    def parse(expressions: Sequence[str]) -> list[dict[str, Any]]:
        missing = [e for e in dict.fromkeys(expressions) if e not in parsed]
        if missing:
            done = subprocess.run(
                [node, str(PACKAGE_DIR / "logql_check.mjs")],
                input=json.dumps(missing), capture_output=True, text=True, timeout=60,
                check=False,
            )  # fmt: skip
            assert done.returncode in (0, 1), done.stderr
            results = json.loads(done.stdout)
            parsed.update(zip(missing, results, strict=True))
        return [parsed[e] for e in expressions]

    parse(_fixed_cases())
    return parse


@pytest.mark.integration
@pytest.mark.parametrize("values", [SAMPLE, EMPTY], ids=["identifiers-set", "identifiers-empty"])
def test_every_logql_expression_parses(
    logql: Callable[[Sequence[str]], list[dict[str, Any]]], values: dict[str, object]
) -> None:
    expressions = [substitute(expr, values) for expr in EXPRESSIONS]
    for expr, result in zip(expressions, logql(expressions), strict=True):
        assert result["errors"] == [], expr
        for literal in result["strings"]:
            go_unquote(literal)  # Loki's lexer accepts every literal, not just lezer's


@pytest.mark.integration
@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_identifier_stays_inside_its_string_literal(
    logql: Callable[[Sequence[str]], list[dict[str, Any]]], hostile: str
) -> None:
    benign = [substitute(e, SAMPLE) for e in IDENTIFIER_EXPRESSIONS]
    attacked = _attacked(hostile)
    assert len(attacked) == 13
    for before, after in zip(logql(benign), logql(attacked), strict=True):
        assert after["errors"] == []
        assert after["shape"] == before["shape"]  # same query, only literal contents differ
        assert uriencode(hostile) in [go_unquote(s) for s in after["strings"]]


@pytest.mark.integration
@settings(max_examples=4, deadline=None)
@given(values=st.lists(st.text(max_size=40), min_size=20, max_size=60))
def test_any_identifier_text_stays_inside_its_string_literal(
    logql: Callable[[Sequence[str]], list[dict[str, Any]]], values: list[str]
) -> None:
    template = dashboards.identifier_filter("allocation_id")
    benign, *attacked = logql(
        [substitute(f'{{layer="api"}} {template}', SAMPLE)]
        + [substitute(f'{{layer="api"}} {template}', SAMPLE | {"allocation_id": v}) for v in values]
    )
    for value, result in zip(values, attacked, strict=True):
        assert result["errors"] == [], value
        assert result["shape"] == benign["shape"], value
        assert [go_unquote(s) for s in result["strings"]] == [
            "api",
            uriencode(value),
            uriencode(value),
        ]


@pytest.mark.integration
@pytest.mark.parametrize(("expr", "grammar_error"), BROKEN)
def test_the_check_catches_what_the_other_formats_produce(
    logql: Callable[[Sequence[str]], list[dict[str, Any]]], expr: str, grammar_error: bool
) -> None:
    (result,) = logql([expr])
    if grammar_error:
        assert result["errors"] != []
    else:
        assert result["errors"] == []
        literal = result["strings"][-1]
        with pytest.raises(ValueError, match=r"invalid escape \\\."):
            go_unquote(literal)


@pytest.mark.parametrize(
    ("literal", "value"),
    [('"a\\"b\\\\c\\n"', 'a"b\\c\n'), ("`a\\.b`", "a\\.b"), ('"\\x41\\u00e9\\101"', "AéA")],
)
def test_go_unquote_reads_what_loki_reads(literal: str, value: str) -> None:
    assert go_unquote(literal) == value


@pytest.mark.parametrize(
    ("literal", "reason"),
    [
        ('"a\\.b"', "invalid escape"),
        ('"a\nb"', "unescaped"),
        ('"a"b"', "unescaped"),
        ("`a`b`", "backtick inside"),
        ("'a'", "not a string literal"),
    ],
)
def test_go_unquote_refuses_what_loki_refuses(literal: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        go_unquote(literal)


def test_the_substitution_emulates_grafana_formats() -> None:
    assert uriencode('a-7f3c.b_~:/@+ "`\\\n') == "a-7f3c.b_~:/@+%20%22%60%5C%0A"
    assert uriencode("!'()*#$") == "%21%27%28%29%2A#$"
    assert regex_format("n-17.rack/3+") == "n-17\\.rack\\/3\\+"
    assert regex_format(["a.b", "c"]) == "(a\\.b|c)"
    assert substitute("{env=~`${env:regex}`} [$__auto]", SAMPLE) == "{env=~`.+`} [1m]"


# -- every LogQL expression runs against a real Loki ------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    "target",
    [
        pytest.param(target, id=f"{name.removesuffix('.json')}-{panel['id']}{target['refId']}")
        for name, panel in _panels()
        for target in panel["targets"]
    ],
)
def test_every_expression_runs_against_loki(real_loki: str, target: dict[str, Any]) -> None:
    expr = substitute(target["expr"], SAMPLE)
    end_ns = time.time_ns()
    headers = {"X-Scope-OrgID": os.environ["LOKI_TENANT"]} if os.environ.get("LOKI_TENANT") else {}
    if target["queryType"] == "instant":
        url, params = f"{real_loki}/loki/api/v1/query", {"query": expr, "time": str(end_ns)}
    else:
        url = f"{real_loki}/loki/api/v1/query_range"
        params = {
            "query": expr,
            "start": str(end_ns - 300 * 10**9),
            "end": str(end_ns),
            "step": "60s",
            "limit": "10",
        }
    response = httpx.get(url, params=params, headers=headers, timeout=30.0)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "success"
