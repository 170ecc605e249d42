"""The ``aap`` adapter: provider job objects from the AAP controller and EDA server APIs.

Input: job objects as ``GET /api/v2/jobs/N/`` returns them, list pages
(``{"count", "next", "previous", "results": [...]}``), EDA activation instances, in any mix,
pretty-printed, concatenated or one per line (framing as for ``k8s``).

Telling them apart, by shape:

- AAP (automation controller) unified jobs carry ``type`` (``job``, ``workflow_job``,
  ``project_update``, ``inventory_update``, ``ad_hoc_command``, ``system_job``) and the times
  ``created``/``started``/``finished``;
- EDA activation instances (rulebook processes) have no ``type`` but ``activation_id`` and/or
  ``started_at``/``ended_at``; their statuses are ``running``, ``completed``, ``failed``,
  ``stopped`` and friends.

Anything else is rejected. Each job yields one ``provider`` event per phase whose time it
knows: ``created`` → ``pending``, ``started`` (``started_at``) → ``running``, ``finished``
(``ended_at``) → the final status; ``entity_kind`` is ``provider_job``, ``entity_id``
``aap:<id>`` or ``eda:<id>``. The final event carries the run time in ``duration_s``
(``elapsed``, or ``ended_at - started_at``). ``failed``/``error`` is level ``error`` with
``owner_hint`` ``provider``; ``canceled`` (and EDA's ``stopped``) is level ``warning`` with no
owner, since a cancellation is usually the consequence of a failure elsewhere.

Identifiers come from the job's ``extra_vars`` (EDA: ``extra_var``), a JSON *string* in the
API (a JSON object is accepted too; of YAML text only flat ``key: value`` lines of the
identifier keys are read): the keys ``allocation_id``, ``workflow_id``,
``correlation_id``, ``node_id``, ``node_instance_id`` at the top level, else inside an
``evidence`` or ``ids`` object (DESIGN §3 puts the identifiers in job payloads as a plain
dict). With no ``workflow_id`` there, the job itself is the workflow run: ``workflow_id`` is
its entity id, which the ``k8s`` adapter also derives from ``status.provisionJob``, so a CR and
its job link.

``raw`` is the job's canonical JSON. A phase event's hash covers only (entity id, phase, its
time): the same phase seen in two polls of the same job is one fact, while the job object
itself changes (``elapsed``, ``status``) between polls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, Final

import orjson

from correlator.model import IDENTIFIER_KEYS, Event, Reject, content_hash
from correlator.sources._documents import item_excerpt, iter_documents
from correlator.sources._fields import take_id
from correlator.sources._record import MAX_DEPTH
from correlator.sources._source import Source
from correlator.sources._time import parse_rfc3339_ns

__all__ = ["AAP", "AAP_JOB_TYPES", "parse"]

_SOURCE: Final = "aap"

#: Unified job types of the automation controller API (``type`` field).
AAP_JOB_TYPES: Final = frozenset(
    {"job", "workflow_job", "project_update", "inventory_update", "ad_hoc_command", "system_job"}
)
_EDA_KEYS: Final = ("activation_id", "started_at", "ended_at")
_FAILED: Final = frozenset({"failed", "error"})
_STOPPED: Final = frozenset({"canceled", "cancelled", "stopped"})
_NESTED_IDS: Final = ("evidence", "ids")
_YAML_ID: Final = re.compile(
    rf"^(?P<key>{'|'.join(IDENTIFIER_KEYS)}):[ \t]*(?P<q>[\"']?)(?P<value>[^\s\"'#]+)(?P=q)[ \t]*$",
    re.MULTILINE,
)


def parse(lines: Iterable[bytes], origin: str) -> Iterator[Event | Reject]:
    """Read AAP/EDA job API JSON into provider events.

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``).

    Yields:
        One event per known phase of each job, a :class:`Reject` per unreadable line,
        document or object.
    """
    for item in iter_documents(lines, _SOURCE, origin):
        if isinstance(item, Reject):
            yield item
            continue
        line_no, document = item
        for position, obj in _jobs(document):
            where = f"line {line_no}" + (f" result {position}" if position else "")
            yield from _job_events(obj, where, line_no, origin)


def _jobs(document: Any) -> Iterator[tuple[int, Any]]:
    if isinstance(document, dict) and isinstance(document.get("results"), list):
        yield from enumerate(document["results"], 1)
    elif isinstance(document, list):
        yield from enumerate(document, 1)
    else:
        yield 0, document


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if type(value) is int:
        return str(value)
    return None


def _reject(origin: str, line_no: int, reason: str, obj: Any) -> Reject:
    return Reject(_SOURCE, origin, line_no, reason, item_excerpt(obj))


def _job_events(obj: Any, where: str, line_no: int, origin: str) -> Iterator[Event | Reject]:
    if not isinstance(obj, dict):
        yield _reject(origin, line_no, f"{where} is not a JSON object", obj)
        return
    job_id = _text(obj.get("id"))
    job_type = obj.get("type")
    if isinstance(job_type, str) and job_type in AAP_JOB_TYPES:
        provider = "aap"
        phases = (("created", "pending"), ("started", "running"), ("finished", None))
    elif "type" not in obj and any(key in obj for key in _EDA_KEYS):
        provider = "eda"
        phases = (("created_at", "pending"), ("started_at", "running"), ("ended_at", None))
    else:
        reason = (
            f"{where} is neither an AAP job (a 'type' of {', '.join(sorted(AAP_JOB_TYPES))}) "
            "nor an EDA activation instance (activation_id, started_at, ended_at)"
        )
        yield _reject(origin, line_no, reason, obj)
        return
    status = _text(obj.get("status"))
    if job_id is None or status is None:
        field = "id" if job_id is None else "status"
        given = obj.get(field)
        if given is None:
            problem = f"lacks field '{field}'"
        else:  # orjson reads an integer past 64 bits as a float: the id is then not exact
            shown = item_excerpt(given)[:80]
            problem = f"has a field '{field}' that is neither text nor an integer: {shown}"
        yield _reject(origin, line_no, f"{where} ({provider} job) {problem}", obj)
        return

    entity_id = f"{provider}:{job_id}"
    times: list[tuple[str, int, bool]] = []
    attrs: dict[str, Any] = {"provider": provider}
    for key, state in phases:
        value = obj.get(key)
        if value is None:
            continue
        try:
            ts_ns = parse_rfc3339_ns(value) if isinstance(value, str) else None
        except ValueError:
            ts_ns = None
        if ts_ns is None:
            attrs.setdefault("unreadable_times", {})[key] = value
        else:
            times.append((state or status, ts_ns, state is None))
    if not times:
        keys = ", ".join(key for key, _ in phases)
        yield _reject(origin, line_no, f"{where} ({entity_id}) has no readable time: {keys}", obj)
        return

    _describe(obj, provider, attrs)
    ids = _identifiers(obj, attrs)
    if ids["workflow_id"] is None and "workflow_id" not in attrs.get("rejected_ids", {}):
        ids["workflow_id"] = take_id("workflow_id", entity_id, {})
    try:
        raw_bytes = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
        # attrs hold a job's fields one level deeper than the job (unreadable_times).
        orjson.dumps(attrs)
    except orjson.JSONEncodeError:  # what orjson cannot write, the store cannot hold
        reason = (
            f"{where} ({entity_id}) is nested deeper than the {MAX_DEPTH} levels of objects "
            "and arrays a job may have"
        )
        yield _reject(origin, line_no, reason, obj)
        return
    raw = raw_bytes.decode()
    name = _text(obj.get("name"))
    label = f"{'AAP' if provider == 'aap' else 'EDA'} job {job_id}" + (f" {name}" if name else "")
    previous = None
    for state, ts_ns, final in times:
        level, owner = _severity(state if final else "")
        message = f"{label}: {state}"
        explanation = attrs.get("explanation")
        if final and explanation:
            message += f": {explanation}"
        yield Event(
            ts_ns=ts_ns,
            layer="provider",
            source=_SOURCE,
            origin=origin,
            message=message,
            raw=raw,
            hash=content_hash(_SOURCE, orjson.dumps([entity_id, state, ts_ns])),
            service=provider,
            level=level,
            owner_hint=owner,
            duration_s=_duration(obj, provider) if final else None,
            entity_kind="provider_job",
            entity_id=entity_id,
            state_from=previous,
            state_to=state,
            attrs=dict(attrs),
            **ids,
        )
        previous = state


def _severity(state: str) -> tuple[str, str | None]:
    lowered = state.lower()
    if lowered in _FAILED:
        return "error", "provider"
    if lowered in _STOPPED:
        return "warning", None
    return "info", None


def _duration(obj: dict[str, Any], provider: str) -> float | None:
    if provider == "aap":
        elapsed = obj.get("elapsed")
        if isinstance(elapsed, int | float) and not isinstance(elapsed, bool):
            return float(elapsed)
        return None
    try:
        started = parse_rfc3339_ns(obj["started_at"])
        ended = parse_rfc3339_ns(obj["ended_at"])
    except (KeyError, TypeError, ValueError):
        return None
    return (ended - started) / 1e9


def _describe(obj: dict[str, Any], provider: str, attrs: dict[str, Any]) -> None:
    """The few job fields worth keeping beside the events (the rest stays in raw)."""
    summary = obj.get("summary_fields")
    template = summary.get("job_template") if isinstance(summary, dict) else None
    for key, value in (
        ("type", obj.get("type")),
        ("name", obj.get("name")),
        ("status", obj.get("status")),
        ("job_template", obj.get("job_template")),
        ("job_template_name", template.get("name") if isinstance(template, dict) else None),
        ("launch_type", obj.get("launch_type")),
        ("elapsed_s", obj.get("elapsed")),
        ("explanation", obj.get("job_explanation") or obj.get("status_message")),
        ("failed", obj.get("failed")),
        ("activation_id", obj.get("activation_id") if provider == "eda" else None),
    ):
        if value not in (None, ""):
            attrs[key] = value


def _extra_vars(obj: dict[str, Any], attrs: dict[str, Any]) -> dict[str, Any]:
    value = obj.get("extra_vars", obj.get("extra_var"))
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value.strip():
        return {}
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        # AAP keeps extra_vars as given at launch, and YAML is allowed there. Without a YAML
        # parser, only flat top-level "key: value" lines of the identifier keys are read.
        found = {m["key"]: m["value"] for m in _YAML_ID.finditer(value)}
        if not found:
            attrs["extra_vars_unreadable"] = True
        return found
    return parsed if isinstance(parsed, dict) else {}


def _identifiers(obj: dict[str, Any], attrs: dict[str, Any]) -> dict[str, Any]:
    variables = _extra_vars(obj, attrs)
    scopes = [variables, *(variables.get(k) for k in _NESTED_IDS)]
    found: dict[str, Any] = {}
    for scope in scopes:
        if isinstance(scope, dict):
            for key in IDENTIFIER_KEYS:
                if key not in found and scope.get(key) is not None:
                    found[key] = scope[key]
    rejected: dict[str, str] = {}
    ids = {key: take_id(key, found.get(key), rejected) for key in IDENTIFIER_KEYS}
    if rejected:
        attrs["rejected_ids"] = rejected
    return ids


AAP: Final = Source(
    _SOURCE,
    "AAP/AWX/EDA job objects from the controller's API (GET /api/v2/jobs/), one per line or a page",
    parse=parse,
)
