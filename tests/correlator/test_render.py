"""Showing a timeline: the terminal table marks each day, gap and reimage once, folds long
cells inside the terminal and shows evidence as text; the HTML page carries the timeline as
JSON that reads back unchanged, whatever the evidence says."""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

from correlator import render
from correlator.render import html_page, print_findings, print_latency, print_timeline

T = 1_795_367_175_000_000_000
S = 1_000_000_000


def _event(ts_ns: int, layer: str, message: str, **fields: Any) -> dict[str, Any]:
    return {"ts": "", "ts_ns": ts_ns, "layer": layer, "message": message, **fields}


def test_markers_appear_once_before_the_first_event_at_their_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Two events share the gap's end (an API record corrected onto the ingress clock lands on
    # the ingress record's nanosecond), and two the reimage's first sighting.
    data = {
        "verdict": {"owner_layer": None, "confidence": 0.0, "explains": []},
        "ids": {"allocation_id": ["a-1"]},
        "clock_offsets": {},
        "events": [
            _event(T, "node", "agent started", node_id="n-1", node_instance_id="ni-1"),
            _event(T + 600 * S, "api", "request", corrected_ts_ns=T + 601 * S),
            _event(T + 601 * S, "ingress", "POST /v1/allocations"),
            _event(T + 700 * S, "node", "task claimed", node_id="n-1", node_instance_id="ni-2"),
            _event(T + 700 * S, "node", "heartbeat", node_id="n-1", node_instance_id="ni-2"),
        ],
        "gaps": [{"from_ns": T, "to_ns": T + 601 * S, "seconds": 601.0}],
        "reimages": [
            {
                "node_id": "n-1",
                "from_instance": "ni-1",
                "to_instance": "ni-2",
                "first_seen_new_ns": T + 700 * S,
            }
        ],
        "truncated": False,
    }
    print_timeline(data)
    out = capsys.readouterr().out
    assert out.count("gap of 601.0 s") == 1
    assert out.count("reimage: n-1 ni-1 → ni-2") == 1
    assert out.index("gap of 601.0 s") < out.index("request") < out.index("POST /v1/allocations")
    assert out.index("reimage: n-1") < out.index("task claimed") < out.index("heartbeat")


def _timeline(*events: dict[str, Any], reason: str = "") -> dict[str, Any]:
    return {
        "verdict": {"owner_layer": "api", "confidence": 0.5, "reason": reason},
        "ids": {"allocation_id": ["a-1"]},
        "clock_offsets": {},
        "events": list(events),
        "gaps": [],
        "reimages": [],
        "truncated": False,
    }


def _at(ts: str, message: str, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "ts_ns": T, "layer": "api", "message": message, **fields}


def test_evidence_is_shown_as_text_never_as_markup_or_terminal_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hostile = "[red]x[/] and [/bold] \x1b[2Jcleared \x9b31m"
    print_timeline(_timeline(_at("2026-11-22T10:00:00.000000000Z", hostile), reason=hostile))
    print_findings([{"severity": "critical", "rule": "stuck", "summary": hostile}])
    print_latency([{"phase": "provision", "provider": hostile, "count": 1}])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out  # nothing reached the terminal as a code
    # The verdict, the timeline's row, the finding's summary and the provider, as written.
    assert out.count("[red]x[/] and [/bold] \\x1b[2Jcleared \\x9b31m") == 4


def test_each_day_is_marked_once_before_its_first_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_timeline(
        _timeline(
            _at("2026-11-22T23:59:58.000000000Z", "first"),
            _at("2026-11-22T23:59:59.000000000Z", "second"),
            _at("2026-11-23T00:00:01.000000000Z", "third"),
        )
    )
    out = capsys.readouterr().out
    assert out.count("── 2026-11-22 ──") == 1 and out.count("── 2026-11-23 ──") == 1
    assert out.index("2026-11-22 ──") < out.index("first") < out.index("second")
    assert out.index("second") < out.index("2026-11-23 ──") < out.index("third")
    assert "23:59:58.000000000Z" in out  # the time of day in the rows


def test_long_cells_fold_at_words_inside_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    words = [f"word{i:02d}" for i in range(40)]
    wide = "供应失败" * 30  # two cells a character, no spaces: cut by cells
    print_timeline(
        _timeline(
            _at("2026-11-22T10:00:00.000000000Z", " ".join(words), correlation_id="c" * 70),
            _at("2026-11-22T10:00:01.000000000Z", "state → " + " ".join(words)),
            _at("2026-11-22T10:00:02.000000000Z", wide),
        )
    )
    lines = capsys.readouterr().out.splitlines()
    assert max(cell_len(line) for line in lines) <= 120
    shown = " ".join(lines)
    for word in words:  # every word whole: folded between words, never inside one
        assert shown.count(f" {word} ") == 2 or shown.count(f" {word}") == 2
    assert "".join(line.split()[-1] for line in lines if "供" in line) == wide
    ids = (line.split()[-1] for line in lines if line.strip())
    assert "corr=" + "c" * 70 in "".join(last for last in ids if set(last) <= set("corr="))


def test_rows_leave_out_the_seed_identifier_the_header_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _timeline(
        _at("2026-11-22T10:00:00.000000000Z", "claimed", node_id="n-1", allocation_id="a-1"),
        _at("2026-11-22T10:00:01.000000000Z", "routed", correlation_id="c-1"),
    )
    data["seed"] = {"allocation_id": "a-1"}
    print_timeline(data)
    out = capsys.readouterr().out
    assert "identifiers: allocation_id=a-1" in out
    assert "alloc=a-1" not in out  # not on the rows
    assert "node=n-1" in out and "corr=c-1" in out


def test_rows_are_styled_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, color_system="standard", width=120)
    monkeypatch.setattr(render, "_console", lambda: console)
    print_timeline(
        _timeline(
            _at("2026-11-22T10:00:00.000000000Z", "fine", level="info"),
            _at("2026-11-22T10:00:01.000000000Z", "broke", level="error", first_failure=True),
            _at("2026-11-22T10:00:02.000000000Z", "after", level="error", symptom=True),
        )
    )
    rows = {line.split("  ")[0][-24:]: line for line in screen.getvalue().splitlines()}
    first = next(line for line in rows.values() if "FIRST FAILURE broke" in line)
    symptom = next(line for line in rows.values() if "symptom: after" in line)
    plain = next(line for line in rows.values() if "fine" in line)
    assert first.startswith("\x1b[1;7;31m") and first.endswith("\x1b[0m")
    assert symptom.startswith("\x1b[1;31m")
    assert "\x1b[" not in plain


HOSTILE = '</script><script>alert(1)</script> & "quotes" <!-- \u2028\u2029'


class _ScriptText(HTMLParser):
    """The text of ``<script id="timeline-data">``, cut where an HTML tokenizer cuts it.

    Script content is raw text: the parser hands it over undecoded and ends it at the first
    ``</script``, as a browser does.
    """

    def __init__(self) -> None:
        super().__init__()
        self.scripts = 0
        self.text: str | None = None
        self._inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts += 1
            self._inside = ("id", "timeline-data") in attrs
            if self._inside:
                self.text = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._inside and self.text is not None:
            self.text += data


def test_the_page_carries_the_timeline_as_json_that_reads_back_unchanged() -> None:
    data = {
        "seed": {"allocation_id": "a-1"},
        "verdict": {"owner_layer": "deploy", "confidence": 0.9, "reason": "<b>why</b> & how"},
        "ids": {"allocation_id": ["a-1"]},
        "clock_offsets": {},
        "events": [
            {
                "ts": "2026-11-22T13:11:20.000000000Z",
                "ts_ns": T,
                "layer": "node",
                "service": "node-agent",
                "level": "error",
                "message": HOSTILE,
                "allocation_id": "a-1",
                "first_failure": True,
            }
        ],
        "gaps": [],
        "reimages": [],
        "truncated": False,
    }
    page = html_page(data)
    parser = _ScriptText()
    parser.feed(page)
    parser.close()
    assert parser.scripts == 1
    assert parser.text is not None
    assert json.loads(parser.text) == data
    assert '"message":"\\u003c/script\\u003e\\u003cscript\\u003ealert(1)' in parser.text
    assert not {"<", ">", "&", "\u2028", "\u2029"} & set(parser.text)
    # The table shows the same text, escaped as markup.
    shown = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;"
    assert f"<td>{shown} &lt;!-- \u2028\u2029</td>" in page
