"""The owner table against the words real programs print when a layer fails.

``wording.jsonl`` holds one failure per line, captured on 127.0.0.1 from the program itself
(Python's ssl, httpx, requests, urllib3 and psycopg; Go's net/http, crypto/tls and os/exec;
Java's JSSE; curl, openssl, psql, ssh, ipmitool, shells; Ansible), or, for programs that
cannot run here (systemd, Kubernetes, AAP), quoted from their documentation or issue
trackers. ``programs/`` holds what produced each entry and how to run it again.

``owner`` is the true owner layer; ``null`` marks a failure that names no owner by design
(a TLS handshake with a plaintext port: a misconfiguration on either side).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_logging import OWNER_LAYERS
from agent_logging.owner import Evidence, classify_evidence

_FIXTURE = Path(__file__).with_name("wording.jsonl")
_FIELDS = ("type", "message", "stack", "status", "exit_code", "layer")


def _entries() -> list[dict[str, Any]]:
    lines = _FIXTURE.read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


_ENTRIES = _entries()


def _evidence(entry: dict[str, Any]) -> Evidence:
    return Evidence(**{name: entry[name] for name in _FIELDS})


@pytest.mark.parametrize("entry", _ENTRIES, ids=[entry["id"] for entry in _ENTRIES])
def test_owner_of_real_wording(entry: dict[str, Any]) -> None:
    match = classify_evidence(_evidence(entry))
    if entry["owner"] is None:
        assert match is None, f"{entry['id']}: expected no owner, got {match}"
    else:
        assert match is not None, f"{entry['id']}: no rule matched"
        assert match.owner_layer == entry["owner"], f"{entry['id']}: {match}"


def test_every_entry_says_how_it_was_produced() -> None:
    ids = [entry["id"] for entry in _ENTRIES]
    assert len(ids) == len(set(ids)), "duplicate ids"
    assert len(_ENTRIES) >= 60
    for entry in _ENTRIES:
        assert set(entry) == {"id", "owner", "program", "how", *_FIELDS}, entry["id"]
        assert entry["owner"] is None or entry["owner"] in OWNER_LAYERS - {"unknown"}
        assert entry["program"].strip(), entry["id"]
        assert entry["how"].strip(), entry["id"]
        assert entry["message"] or entry["type"] or entry["stack"], entry["id"]
        documented = entry["how"].startswith("documented wording, not captured here: ")
        if documented:
            assert "http" in entry["how"], f"{entry['id']}: a documented entry names its source"
        else:
            assert "programs/" in entry["how"] or "`" in entry["how"], (
                f"{entry['id']}: a captured entry names the program or command that produced it"
            )
