"""The four dashboards, panel by panel, and the LogQL they run (see ``dashboards``).

How an operator's text gets into LogQL (the identifier textboxes)
-----------------------------------------------------------------
A textbox value is spliced into the query text by Grafana, so the format chosen decides whether
a pasted value can change the query. ``${var:uriencode}`` ("percent encode as URI") inside a
double-quoted string is used for every identifier:

- it leaves every character the library allows in an identifier unchanged (ASCII letters,
  digits and ``. _ : / @ + ~ -``; see ``agent_logging`` identifier checks), so a real
  identifier is compared exactly, as itself;
- it percent-encodes everything else, including ``"``, a backtick, ``\\`` and newlines, so
  no value can end the string literal it sits in: ``a"} |= "x`` becomes ``a%22%7D%20%7C=%20%22x``,
  a value that matches nothing (no identifier can hold ``"``) instead of a different query.

The alternatives break (``BROKEN`` in ``tests/dashboards`` shows what they produce):
``:raw`` and the Loki datasource's default formatting leave ``"`` as is; ``:doublequote``
escapes ``"`` but not ``\\``; ``:json`` returns a string value unchanged in Grafana 11+
(scenes); ``:regex`` escapes regex syntax with backslashes (``\\.``), which Loki's lexer rejects
inside a double-quoted string (Go's ``strconv`` escapes only) and which a backtick string cannot
hold safely (a backtick in the value ends it). Grafana versions without ``uriencode`` fall back
to the raw value.

Empty means "any" with :data:`ANY_WHEN_EMPTY`: ``| allocation_id="$v" or _empty_means_any="$v"``.
Loki compares a label a line does not have as the empty string
(``pkg/logql/log/label_filter.go``, ``labelValue``), and no line has ``_empty_means_any``, so
the second comparison is true exactly when the textbox is empty; when it is set, only the
first one can hold.

Multi-value label variables (``env``, ``service``) are chosen from Loki's own label values and
used as ``=~`${var:regex}``` in backticks, where Grafana's backslash escapes are literal.
"""

from __future__ import annotations

from typing import Final

from agent_logging.schema import IDENTIFIER_KEYS, LAYERS
from dashboards.build import (
    Dashboard,
    DataLink,
    Query,
    datasource_variable,
    label_values_variable,
    logs,
    state_timeline,
    table,
    textbox_variable,
    timeseries,
)

__all__ = [
    "ANY_WHEN_EMPTY",
    "LAYER_ORDER",
    "identifier_filter",
    "incident_timeline",
    "lifecycle_findings",
    "node_evidence",
    "shipping_health",
]

#: A label no line carries: comparing it with an identifier variable is true only when the
#: variable is empty (see the module docstring).
ANY_WHEN_EMPTY: Final = "_empty_means_any"

#: The layers of DESIGN §3 in the order an incident travels through them.
LAYER_ORDER: Final = LAYERS

#: The ``env`` label as chosen in the ``env`` variable (``.+`` for All).
_ENV: Final = "env=~`${env:regex}`"

#: Line filters that pass the shipping-health and finding records (their ``event`` value, in
#: quotes) before the JSON parser runs: a cheap first cut; the label filter after ``| json``
#: decides.
_HEALTH_LINE: Final = '|= `"shipping health"`'
_FINDING_LINE: Final = '|= `"finding"`'

#: The correlator's base URL in links. ``:raw`` because Grafana 10+ percent-encodes variables
#: in data links by default, which would turn ``http://`` into ``http%3A%2F%2F``.
_CORRELATOR: Final = "${correlator_url:raw}"


def identifier_filter(key: str) -> str:
    """The pipeline stage keeping lines whose ``key`` equals the ``$key`` textbox (any line
    when it is empty).

    Args:
        key: an identifier name (``allocation_id``, ...), also the variable's name.

    Returns:
        e.g. ``| node_id="${node_id:uriencode}" or _empty_means_any="${node_id:uriencode}"``.
    """
    value = f'"${{{key}:uriencode}}"'
    return f"| {key}={value} or {ANY_WHEN_EMPTY}={value}"


def _ids() -> str:
    return " ".join(identifier_filter(key) for key in IDENTIFIER_KEYS)


_LOKI_VAR = datasource_variable()
_ENV_VAR = label_values_variable(
    "env", "env", description="The env label (AGENT_LOGGING_ENV); All matches every env."
)
_CORRELATOR_VAR = textbox_variable(
    "correlator_url",
    default="http://127.0.0.1:8080",
    description="Base URL of `correlator serve`, for the links to its timeline page. A "
    "service started with --loki-url pulls the incident from Loki before it answers.",
)


def _timeline_link(key: str, value: str) -> str:
    """The correlator's timeline page of one identifier. The same link serves either way the
    service runs: over its own database, or, started with ``--loki-url``, pulling the
    incident from Loki hop by hop first (``GET /v1/timeline``)."""
    return f"{_CORRELATOR}/?{key}={value}"


def incident_timeline() -> Dashboard:
    """Everything about the identifiers typed in, layer by layer (DESIGN §6 by hand)."""
    ids = _ids()
    id_vars = tuple(
        textbox_variable(key, description=f"Only records with this {key}; empty: any.")
        for key in IDENTIFIER_KEYS
    )
    layer_panels = tuple(
        logs(
            f"{layer} layer",
            f'{{layer="{layer}", {_ENV}}} {ids}',
            description=f"Records of the {layer} layer matching the identifiers set above. "
            "Open a line's details for links to the correlator timeline of its identifiers.",
            width=24 if layer == LAYER_ORDER[-1] else 12,
        )
        for layer in LAYER_ORDER
    )
    owners = Query(
        "sum by (owner_layer) (count_over_time("
        f'{{{_ENV}}} |= `"owner_layer"` {ids}'
        ' | json owner_layer="error.owner_layer" | __error__="" | owner_layer!=""'
        " [$__auto]))",
        legend="{{owner_layer}}",
    )
    states = Query(
        "sum by (allocation_id, state_to) (count_over_time("
        f'{{layer="workflow", {_ENV}}} |= `"state_to"` {ids}'
        ' | json entity_kind="entity_kind", state_to="state_to" | __error__=""'
        ' | entity_kind="allocation" | state_to!=""'
        " [$__auto]))",
        legend="{{allocation_id}} → {{state_to}}",
    )
    return Dashboard(
        uid="ep-incident-timeline",
        title="Incident timeline",
        description="Every layer's records for the identifiers typed in, side by side; the "
        "links open the correlator's timeline, pulled from Loki when the correlator was "
        "started with --loki-url.",
        variables=(_LOKI_VAR, _ENV_VAR, *id_vars, _CORRELATOR_VAR),
        panels=(
            timeseries(
                "Failures by owner layer",
                owners,
                description="Records with error.owner_layer, by owner: who owns the failure.",
            ),
            state_timeline(
                "Allocation lifecycle states",
                states,
                description="Transitions into each state (workflow records with entity_kind="
                "allocation and state_to), per allocation. A state's link opens the "
                "allocation's correlator timeline: a correlator started with --loki-url "
                "pulls that incident from this Loki, hop by hop, before it answers.",
                links=(
                    DataLink(
                        "Correlator timeline of allocation ${__field.labels.allocation_id}",
                        _timeline_link(
                            "allocation_id", "${__field.labels.allocation_id:percentencode}"
                        ),
                    ),
                ),
            ),
            *layer_panels,
        ),
        links=tuple(
            DataLink(
                f"Correlator timeline: {key}",
                _timeline_link(key, f"${{{key}:percentencode}}"),
                tooltip=f"The correlator's timeline of the {key} typed in; pulled from Loki "
                "first when correlator serve runs with --loki-url",
            )
            for key in IDENTIFIER_KEYS
        ),
    )


def node_evidence() -> Dashboard:
    """One node across reimages: its instances, its records, its agent's tasks."""
    selector = f'{{layer="node", {_ENV}}}'
    node_filter = identifier_filter("node_id")
    node = f"{selector} {node_filter}"
    tasks = (
        f'{selector} |= `"task"` {node_filter}'
        ' | json task="task", event="event" | __error__="" | task!=""'
    )
    return Dashboard(
        uid="ep-node-evidence",
        title="Node evidence",
        description="One node (node_id) across reimages: each installation (node_instance_id) "
        "and what its node agent claimed and reported.",
        variables=(
            _LOKI_VAR,
            _ENV_VAR,
            textbox_variable("node_id", description="The node to show; empty: every node."),
            _CORRELATOR_VAR,
        ),
        panels=(
            state_timeline(
                "Installations (node_instance_id) over time",
                Query(
                    f"sum by (node_id, node_instance_id) (count_over_time({node} [$__auto]))",
                    legend="{{node_id}} {{node_instance_id}}",
                ),
                description="A row per installation, coloured while it logs: a new row is a "
                "reimage or reinstall boundary.",
                width=24,
                links=(
                    DataLink(
                        "Correlator timeline of ${__field.labels.node_instance_id}",
                        _timeline_link(
                            "node_instance_id",
                            "${__field.labels.node_instance_id:percentencode}",
                        ),
                    ),
                ),
            ),
            table(
                "Installations seen in the time range",
                Query(
                    f"sum by (node_id, node_instance_id) (count_over_time({node} [$__range]))",
                    instant=True,
                ),
                description="Records per installation over the whole range.",
                width=12,
                links=(
                    DataLink(
                        "Correlator timeline of this installation",
                        _timeline_link(
                            "node_instance_id",
                            "${__data.fields.node_instance_id:percentencode}",
                        ),
                    ),
                ),
            ),
            timeseries(
                "Task records by event",
                Query(
                    f"sum by (event, task) (count_over_time({tasks} [$__auto]))",
                    legend="{{task}}: {{event}}",
                ),
                description="The node agent's task claims and results (records with a task).",
            ),
            logs(
                "Task claims and results",
                tasks,
                description="Records of the node agent that carry a task field.",
            ),
            logs(
                "Node errors",
                f'{node} | level=~"error|critical"',
                description="Error records of the node (level is structured metadata).",
            ),
            logs("All node records", node, width=24, height=10),
        ),
        links=(
            DataLink(
                "Correlator timeline: node_id",
                _timeline_link("node_id", "${node_id:percentencode}"),
            ),
        ),
    )


def lifecycle_findings() -> Dashboard:
    """The correlator's findings as logged to Loki, and ``release_failed`` over time."""
    finding_fields = (
        'json event="event", rule="rule", severity="severity", '
        'entity_kind="entity_kind", entity_id="entity_id"'
    )
    findings = f'{{{_ENV}}} {_FINDING_LINE} | {finding_fields} | __error__="" | event="finding"'
    return Dashboard(
        uid="ep-lifecycle-findings",
        title="Lifecycle findings",
        description="Stuck lifecycles and drift found by the correlator (event=finding "
        "records), and release_failed transitions by provider.",
        variables=(_LOKI_VAR, _ENV_VAR, _CORRELATOR_VAR),
        panels=(
            timeseries(
                "Open findings by rule and severity",
                Query(
                    "count by (rule, severity) (sum by (rule, severity, entity_kind, entity_id)"
                    f" (count_over_time({findings} [$__auto])))",
                    legend="{{rule}} ({{severity}})",
                ),
                description="Distinct entities with a finding in each interval. The "
                "correlator logs open findings every CORRELATOR_FINDINGS_INTERVAL_S (300 s by "
                "default), hence the 5m minimum interval.",
                min_interval="5m",
            ),
            timeseries(
                "release_failed transitions by provider",
                Query(
                    "sum by (provider) (count_over_time("
                    f'{{layer="workflow", {_ENV}}} |= `"release_failed"`'
                    ' | json state_to="state_to", provider="provider" | __error__=""'
                    ' | state_to="release_failed" [$__auto]))',
                    legend="{{provider}}",
                ),
                description="Allocations entering release_failed: each leaves a node fenced "
                "until someone cleans up.",
            ),
            table(
                "Findings seen in the time range",
                Query(
                    "sum by (rule, severity, entity_kind, entity_id, allocation_id)"
                    f" (count_over_time({findings} [$__range]))",
                    instant=True,
                ),
                description="One row per finding (the value is how many times it was logged).",
                links=(
                    DataLink(
                        "Correlator timeline of allocation ${__data.fields.allocation_id}",
                        _timeline_link(
                            "allocation_id", "${__data.fields.allocation_id:percentencode}"
                        ),
                    ),
                ),
            ),
            logs(
                "Finding records",
                f'{{{_ENV}}} {_FINDING_LINE} | json event="event" | event="finding"',
                description="The records themselves: summary, age_s, threshold_s, the ids.",
                width=24,
                height=10,
            ),
        ),
        links=(DataLink("Correlator findings (JSON)", f"{_CORRELATOR}/v1/findings"),),
    )


#: Shipping-health fields charted, with their Grafana unit and a title.
_HEALTH_FIELDS: Final = (
    ("spool_records", "short", "Spool depth (records not yet acknowledged)"),
    ("oldest_unsent_age_s", "s", "Oldest unsent record age"),
    ("spool_bytes", "bytes", "Spool size"),
    ("retried", "short", "Retried pushes (cumulative)"),
    ("dropped", "short", "Dropped records (cumulative)"),
    ("dead_lettered", "short", "Dead-lettered records (cumulative)"),
    ("write_errors", "short", "Spool write errors: records lost, a full disk (cumulative)"),
)


def _health(field_name: str) -> Query:
    return Query(
        "max by (service_name) (max_over_time("
        f"{{{_ENV}, service_name=~`${{service:regex}}`}} {_HEALTH_LINE}"
        f' | json event="event", {field_name}="{field_name}" | event="shipping health"'
        f' | unwrap {field_name} | __error__="" [$__auto]))',
        legend="{{service_name}}",
    )


def shipping_health() -> Dashboard:
    """The library's periodic ``shipping health`` records, worst instance per service."""
    return Dashboard(
        uid="ep-shipping-health",
        title="Shipping health",
        description="Spool depth, oldest unsent age, retries, drops and dead letters of every "
        "service shipping with agent_logging (its periodic shipping-health records).",
        variables=(
            _LOKI_VAR,
            _ENV_VAR,
            label_values_variable(
                "service", "service_name", description="The service_name label; All: every one."
            ),
        ),
        panels=(
            *(
                timeseries(
                    title,
                    _health(name),
                    description=f"max of {name} over the interval, worst instance per service.",
                    unit=unit,
                )
                for name, unit, title in _HEALTH_FIELDS
            ),
            logs(
                "Health records with an error",
                f"{{{_ENV}, service_name=~`${{service:regex}}`}} {_HEALTH_LINE}"
                ' | json event="event", last_error="last_error", spool_error="spool_error"'
                ' | event="shipping health" | last_error!="" or spool_error!=""',
                description="What the shipper last failed on (Loki's answer, a timeout, ...), "
                "and why the spool last could not store a record (a full disk, ...).",
                width=24,
            ),
        ),
    )
