"""One incident as the devstack's real processes wrote it, moved to a new time and ``env``.

``devstack_capture/`` holds what one run of the ``db-lock-timeout`` scenario wrote (its
README says how it was captured): nginx's JSON access lines and error lines, PostgreSQL's
``jsonlog`` lines that carry a sqlcommenter comment, and the records the processes logged
(their ledgers: the lines agent_logging spooled for Loki). A real Loki refuses entries older
than a week, so :func:`incident` moves every timestamp in them by whole seconds, each in its
own format, and gives the records a new ``env``; nothing else in a line changes.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson

from agent_logging.schema import rfc3339_ns
from correlator.sources._time import parse_rfc3339_ns

__all__ = ["ALLOCATION", "CAPTURE", "Incident", "incident"]

CAPTURE: Final = Path(__file__).resolve().parent / "devstack_capture"
#: The scenario's seed: the allocation whose release met the lock timeout.
ALLOCATION: Final = "a-a913dd8b"

_NS: Final = 1_000_000_000
_PG_TIME: Final = re.compile(r'"(timestamp|session_start)":"([^"]+) UTC"')
_NGINX_ERROR_TIME: Final = re.compile(r"^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")
_ISO_TIME: Final = re.compile(r'"time_iso8601":"([^"]+)"')
_MSEC: Final = re.compile(r'"msec":"([0-9]+)\.([0-9]{3})"')


@dataclass(frozen=True)
class Incident:
    """The captured lines, moved.

    Attributes:
        records: the processes' records (dicts, as agent_logging wrote them).
        access: nginx access lines.
        errors: nginx error lines.
        postgres: PostgreSQL ``jsonlog`` lines.
        start_ns: the first access line's time, moved.
    """

    records: list[dict[str, object]]
    access: list[str]
    errors: list[str]
    postgres: list[str]
    start_ns: int


def _moved(text: str, fmt: str, seconds: int) -> str:
    moment = datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.UTC)
    return (moment + datetime.timedelta(seconds=seconds)).strftime(fmt)


def _lines(name: str, move: Callable[[str], str]) -> list[str]:
    return [move(line) for line in (CAPTURE / name).read_text().splitlines()]


def incident(start_ns: int, env: str) -> Incident:
    """The capture with its first access line at about ``start_ns`` and ``env`` as the
    records' ``env`` (the collectors' comes from their environment).

    Whole seconds keep nginx's error lines (second resolution) in step with the rest.
    """
    first = orjson.loads((CAPTURE / "access.log").read_text().splitlines()[0])
    seconds = (start_ns - int(first["msec"].replace(".", "")) * 1_000_000) // _NS

    def access(line: str) -> str:
        line = _MSEC.sub(lambda m: f'"msec":"{int(m[1]) + seconds}.{m[2]}"', line)
        return _ISO_TIME.sub(
            lambda m: f'"time_iso8601":"{_moved(m[1], "%Y-%m-%dT%H:%M:%S+00:00", seconds)}"', line
        )

    def error(line: str) -> str:
        return _NGINX_ERROR_TIME.sub(lambda m: _moved(m[0], "%Y/%m/%d %H:%M:%S", seconds), line)

    def postgres(line: str) -> str:
        def one(m: re.Match[str]) -> str:
            fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in m[2] else "%Y-%m-%d %H:%M:%S"
            moved = _moved(m[2], fmt, seconds)
            return f'"{m[1]}":"{moved[:-3] if "." in m[2] else moved} UTC"'

        return _PG_TIME.sub(one, line)

    records = []
    for line in (CAPTURE / "records.jsonl").read_text().splitlines():
        record = orjson.loads(line)
        record["ts"] = rfc3339_ns(parse_rfc3339_ns(record["ts"]) + seconds * _NS)
        record["env"] = env
        records.append(record)
    return Incident(
        records=records,
        access=_lines("access.log", access),
        errors=_lines("error.log", error),
        postgres=_lines("postgresql.json", postgres),
        start_ns=int(first["msec"].replace(".", "")) * 1_000_000 + seconds * _NS,
    )
