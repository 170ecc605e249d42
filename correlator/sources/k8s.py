"""The ``k8s`` adapter: custom-resource status snapshots from ``kubectl get <kind> -o json``.

Input: a ``List`` (``{"kind": "List", "items": [...]}``, or ``<Kind>List``), a single object,
watch events (``kubectl get -w --output-watch-events -o json``: ``{"type": "MODIFIED",
"object": {...}}``), several of these concatenated or one per line (NDJSON), pretty-printed
or compact (``_documents`` frames them, for every document source, and says what a document
may hold: 64 MiB, 512 levels of nesting).

Each item becomes one ``projection`` event: ``entity_kind`` is the resource kind (e.g.
``ProvisionRequest``), ``entity_id`` its ``metadata.name`` (the namespace goes to attrs),
``state_to`` the first of ``status.provisionJob.state``, ``status.phase``, ``status.state``,
the message the state with ``status.provisionJob.message`` (or ``status.message``). The time
is the most specific one the object carries: ``status.provisionJob.lastTransitionTime``, then
``status.lastUpdated``, then the newest condition's ``lastTransitionTime``, then
``metadata.creationTimestamp``.

Identifiers come from labels, then annotations, then ``spec``: a label or annotation key whose
name ends in an identifier key, with ``-`` or ``_`` (``provisioning.example.com/allocation-id``,
``example.com/node_id``, ``workflow-id``); a ``spec`` field ``allocationId``/``allocation_id``
and so on. The provider job's id (``status.provisionJob.id`` or ``jobId``) goes to
``attrs["job_id"]``; with ``status.provisionJob.provider`` ``aap``/``eda`` and a bare id it is
also written the way the ``aap`` adapter names the job (``attrs["provider_job"] = "aap:4711"``),
which becomes the ``workflow_id`` when nothing else names one (a provider job is one workflow
run, DESIGN §3), so a CR's events and its job's events link.

An object with ``metadata.deletionTimestamp`` yields a second event at that time with
``state_to`` ``Deleting`` and ``attrs["deleted"]``. ``raw`` is the item's canonical JSON
(sorted keys, without ``metadata.managedFields`` and the last-applied annotation, which are
bulky bookkeeping); the hash covers it, ``resourceVersion`` included, so the same snapshot
ingested twice adds nothing and every change of the object is new evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

import orjson

from correlator.model import IDENTIFIER_KEYS, Event, Reject, content_hash
from correlator.sources._documents import item_excerpt, iter_documents
from correlator.sources._fields import take_id
from correlator.sources._record import MAX_DEPTH
from correlator.sources._source import Source
from correlator.sources._time import parse_rfc3339_ns

__all__ = ["K8S", "parse"]

_SOURCE: Final = "k8s"
_DELETING: Final = "Deleting"
_LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
# spec field names (camelCase as CRDs spell them, or snake_case) per identifier key.
_SPEC_IDS: Final = {
    key: (key, key.split("_")[0] + "".join(p.title() for p in key.split("_")[1:]))
    for key in IDENTIFIER_KEYS
}
_FAILED_STATES: Final = frozenset({"failed", "error", "errored"})
_WARNING_STATES: Final = frozenset({"canceled", "cancelled", "deleting", "unknown"})
# States after which deleting the resource is routine, not an interrupted provisioning.
_DONE_STATES: Final = frozenset({"succeeded", "successful", "completed", "ready", "released"})


def parse(lines: Iterable[bytes], origin: str) -> Iterator[Event | Reject]:
    """Read ``kubectl get -o json`` snapshots of custom resources into projection events.

    Args:
        lines: raw lines without their ``\\n``.
        origin: the file path (or ``http``).

    Yields:
        One or two events per item (see the module docstring), a :class:`Reject` per
        unreadable line, document or item.
    """
    for item in iter_documents(lines, _SOURCE, origin):
        if isinstance(item, Reject):
            yield item
            continue
        line_no, document = item
        for position, obj in _items(document):
            where = f"line {line_no}" + (f" item {position}" if position else "")
            yield from _item_events(obj, where, line_no, origin)


def _items(document: Any) -> Iterator[tuple[int, Any]]:
    """(1-based position in a list, or 0 for a lone object; the object)."""
    if isinstance(document, dict) and isinstance(document.get("items"), list):
        for position, obj in enumerate(document["items"], 1):
            yield position, obj
    elif isinstance(document, list):
        for position, obj in enumerate(document, 1):
            yield position, obj
    else:
        yield 0, document


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if type(value) is int:
        return str(value)
    return None


def _item_events(obj: Any, where: str, line_no: int, origin: str) -> Iterator[Event | Reject]:
    if isinstance(obj, dict) and isinstance(obj.get("object"), dict) and "type" in obj:
        obj = obj["object"]  # a watch event: the object is the evidence
    if not isinstance(obj, dict):
        yield Reject(_SOURCE, origin, line_no, f"{where} is not a JSON object", item_excerpt(obj))
        return
    kind = _str(obj.get("kind"))
    metadata = _dict(obj.get("metadata"))
    name = _str(metadata.get("name"))
    if kind is None or name is None:
        missing = "kind" if kind is None else "metadata.name"
        reason = f"{where} is not a Kubernetes object: it lacks field '{missing}'"
        yield Reject(_SOURCE, origin, line_no, reason, item_excerpt(obj))
        return
    status = _dict(obj.get("status"))
    job = _dict(status.get("provisionJob"))
    times, unreadable = _times(status, job, metadata)
    if not times:
        reason = (
            f"{where} ({kind} {name}) has no readable time: none of "
            "status.provisionJob.lastTransitionTime, status.lastUpdated, "
            "status.conditions[].lastTransitionTime, metadata.creationTimestamp"
        )
        yield Reject(_SOURCE, origin, line_no, reason, item_excerpt(obj))
        return

    deletion = metadata.get("deletionTimestamp")
    deleted_ns = _parse(deletion) if deletion is not None else None
    if deletion is not None and deleted_ns is None:
        unreadable["metadata.deletionTimestamp"] = deletion

    try:
        raw_bytes = _canonical(obj)
    except orjson.JSONEncodeError:  # what orjson cannot write, the store cannot hold
        reason = (
            f"{where} ({kind} {name}) is nested deeper than the {MAX_DEPTH} levels of objects "
            "and arrays an item may have"
        )
        yield Reject(_SOURCE, origin, line_no, reason, item_excerpt(obj))
        return
    raw = raw_bytes.decode()
    state = _str(job.get("state")) or _str(status.get("phase")) or _str(status.get("state"))
    detail = _str(job.get("message")) or _str(status.get("message"))
    attrs: dict[str, Any] = {}
    for key, value in (
        ("namespace", _str(metadata.get("namespace"))),
        ("resource_version", _str(metadata.get("resourceVersion"))),
        ("uid", _str(metadata.get("uid"))),
        ("generation", metadata.get("generation")),
        ("observed_generation", status.get("observedGeneration")),
        ("provider", _str(job.get("provider"))),
        ("job_id", _str(job.get("id")) or _str(job.get("jobId"))),
    ):
        if value is not None:
            attrs[key] = value
    if "job_id" in attrs:
        attrs["provider_job"] = _provider_job(attrs["job_id"], attrs.get("provider"))
    if unreadable:
        attrs["unreadable_times"] = unreadable
    ids = _identifiers(obj, metadata, attrs)
    shown = f"{attrs['namespace']}/{name}" if "namespace" in attrs else name
    current = state or "no status"

    def event(ts_ns: int, message: str, digest: int, level: str, **lifecycle: Any) -> Event:
        return Event(
            ts_ns=ts_ns,
            layer="projection",
            source=_SOURCE,
            origin=origin,
            message=message,
            raw=raw,
            hash=digest,
            level=level,
            entity_kind=kind,
            entity_id=name,
            **ids,
            **lifecycle,
        )

    yield event(
        times[0],
        f"{kind} {shown}: {current}" + (f": {detail}" if detail else ""),
        content_hash(_SOURCE, raw_bytes),
        _level(state),
        state_to=state,
        attrs=attrs,
    )
    if deleted_ns is not None:
        yield event(
            deleted_ns,
            f"{kind} {shown}: deletion requested while {current}",
            # The same item, but another fact about it: a hash of its own.
            content_hash(_SOURCE, raw_bytes + b"\n" + _DELETING.encode()),
            "info" if (state or "").lower() in _DONE_STATES else "warning",
            state_from=state,
            state_to=_DELETING,
            attrs={**attrs, "deleted": True},
        )


def _times(
    status: dict[str, Any], job: dict[str, Any], metadata: dict[str, Any]
) -> tuple[list[int], dict[str, Any]]:
    """Readable times, most specific first, and the unreadable ones by field."""
    candidates: list[tuple[str, Any]] = [
        ("status.provisionJob.lastTransitionTime", job.get("lastTransitionTime")),
        ("status.lastUpdated", status.get("lastUpdated")),
    ]
    conditions = status.get("conditions")
    newest: tuple[int, Any] | None = None
    unreadable: dict[str, Any] = {}
    if isinstance(conditions, list):
        for condition in conditions:
            value = _dict(condition).get("lastTransitionTime")
            if value is None:
                continue
            parsed = _parse(value)
            if parsed is None:
                unreadable["status.conditions[].lastTransitionTime"] = value
            elif newest is None or parsed > newest[0]:
                newest = (parsed, value)
    if newest is not None:
        candidates.append(("status.conditions[].lastTransitionTime", newest[1]))
    candidates.append(("metadata.creationTimestamp", metadata.get("creationTimestamp")))
    times = []
    for field_name, value in candidates:
        if value is None:
            continue
        parsed = _parse(value)
        if parsed is None:
            unreadable[field_name] = value
        else:
            times.append(parsed)
    return times, unreadable


def _parse(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_rfc3339_ns(value)
    except ValueError:
        return None


def _identifiers(
    obj: dict[str, Any], metadata: dict[str, Any], attrs: dict[str, Any]
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for source in (metadata.get("labels"), metadata.get("annotations")):
        for key, value in _dict(source).items():
            ident = _key_of(key)
            if ident is not None and ident not in found:
                found[ident] = value
    spec = _dict(obj.get("spec"))
    for ident, names in _SPEC_IDS.items():
        if ident not in found:
            value = next((spec[n] for n in names if spec.get(n) is not None), None)
            if value is not None:
                found[ident] = value
    if "workflow_id" not in found and "provider_job" in attrs:
        found["workflow_id"] = attrs["provider_job"]
    rejected: dict[str, str] = {}
    ids = {key: take_id(key, found.get(key), rejected) for key in IDENTIFIER_KEYS}
    if rejected:
        attrs["rejected_ids"] = rejected
    return ids


def _provider_job(job_id: str, provider: Any) -> str:
    """The job's entity id as the ``aap`` adapter names it (``aap:4711``), when it can tell."""
    if ":" not in job_id and isinstance(provider, str) and provider.lower() in ("aap", "eda"):
        return f"{provider.lower()}:{job_id}"
    return job_id


def _key_of(label: str) -> str | None:
    """The identifier key a label/annotation key names, by its ending, or None."""
    tail = label.lower().replace("-", "_")
    for key in IDENTIFIER_KEYS:
        if tail == key or (tail.endswith(key) and tail[-len(key) - 1] in "/._"):
            return key
    return None


def _level(state: str | None) -> str:
    lowered = (state or "").lower()
    if lowered in _FAILED_STATES or lowered.endswith("failed"):
        return "error"
    if lowered in _WARNING_STATES:
        return "warning"
    return "info"


def _canonical(obj: dict[str, Any]) -> bytes:
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and ("managedFields" in metadata or _has_last_applied(metadata)):
        metadata = {k: v for k, v in metadata.items() if k != "managedFields"}
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
            metadata["annotations"] = {k: v for k, v in annotations.items() if k != _LAST_APPLIED}
        obj = {**obj, "metadata": metadata}
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)  # documents come from orjson.loads


def _has_last_applied(metadata: dict[str, Any]) -> bool:
    annotations = metadata.get("annotations")
    return isinstance(annotations, dict) and _LAST_APPLIED in annotations


K8S: Final = Source(
    _SOURCE,
    "custom resources as `kubectl get -o json` prints them (a List, one object, or "
    "`--watch -o json` lines)",
    parse=parse,
)
