"""The dead-letter file: one JSON line per refused entry, rotated to ``.1`` at its cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_logging.loki._entries import PushEntry
from agent_logging.shipping._dead_letter import append_dead_letter

NOW_UNIX_S = 1_795_000_000.5  # 2026-11-18T11:06:40.5Z
LINE_A = (
    b'{"ts_ns":1,"labels":{"service_name":"svc"},"line":"a","status":400,"reason":"refused",'
    b'"dead_lettered_at":"2026-11-18T11:06:40.500000Z"}\n'
)
LINE_B = LINE_A.replace(b'"line":"a"', b'"line":"b"')


def append(path: Path, line: str, max_bytes: int) -> None:
    entry = PushEntry((("service_name", "svc"),), 1, line)
    append_dead_letter(path, entry, 400, "refused", now_unix_s=NOW_UNIX_S, max_bytes=max_bytes)


def test_an_entry_is_one_json_line_with_lokis_reason(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "dl.ndjson"

    append(path, "a", max_bytes=1 << 20)

    assert path.read_bytes() == LINE_A
    assert len(LINE_A) == 136  # the caps below are counted in these lines


@pytest.mark.parametrize(
    ("max_bytes", "current", "rotated"),
    [
        (272, LINE_A + LINE_B, None),  # exactly at the cap: kept
        (271, LINE_B, LINE_A),  # one byte over: the file moves to .1 first
        (10, LINE_B, LINE_A),  # a first line over the cap is still written
    ],
)
def test_the_file_rotates_when_the_next_line_would_pass_the_cap(
    tmp_path: Path, max_bytes: int, current: bytes, rotated: bytes | None
) -> None:
    path = tmp_path / "dl.ndjson"

    append(path, "a", max_bytes)
    append(path, "b", max_bytes)

    assert path.read_bytes() == current
    old = tmp_path / "dl.ndjson.1"
    assert (old.read_bytes() if old.exists() else None) == rotated
