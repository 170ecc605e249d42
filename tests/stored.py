"""The events a store holds, read as the store reads them (raw texts from their blocks), for
tests that check what an ingest or a pull stored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from correlator._rows import fetch_events
from correlator._schema import COLUMN_LIST
from correlator.model import Event
from correlator.store import Store


def stored_events(store: Store, where: str = "", params: Sequence[Any] = ()) -> list[Event]:
    """Every event of ``store`` (those matching ``where``, a fixed SQL condition), by hash."""
    condition = f"WHERE {where} " if where else ""
    sql = f"SELECT {COLUMN_LIST} FROM events {condition}ORDER BY hash"  # noqa: S608 - test text
    return fetch_events(store.cursor(), sql, params)
