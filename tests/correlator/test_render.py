"""Showing a timeline: the terminal table marks each gap and reimage once; the HTML page
carries the timeline as JSON that reads back unchanged, whatever the evidence says."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import pytest

from correlator.render import html_page, print_timeline

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
