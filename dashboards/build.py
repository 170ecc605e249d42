"""A small typed builder for Grafana dashboards (the classic JSON model) over Loki.

Only what the evidence-pipeline dashboards use: Loki queries, four panel kinds (logs, time
series, state timeline, table), datasource / query / textbox variables and links. Every panel
and every query points at the dashboard's datasource *variable* (:data:`LOKI`), never at a
datasource uid, so the JSON imports into any Grafana whatever its Loki is called.

Panels are laid out left to right in a 24-column grid (Grafana's width) and wrap to a new row
when the next panel does not fit; ids are given in that order. The output is deterministic, so
the committed JSON can be compared byte for byte with a fresh build.

Why not ``grafana-foundation-sdk``: its PyPI releases are versioned as
``<timestamp>!<grafana version>`` (a PEP 440 epoch per build), which makes a reproducible pin
awkward, and a dependency for four dashboards costs more than this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "GRID_WIDTH",
    "LOKI",
    "SCHEMA_VERSION",
    "Dashboard",
    "DataLink",
    "Panel",
    "Query",
    "Variable",
    "datasource_variable",
    "label_values_variable",
    "logs",
    "render",
    "state_timeline",
    "table",
    "textbox_variable",
    "timeseries",
]

#: The dashboard JSON schema version written. Grafana 11.3+ writes 41 (v41 removed
#: ``timepicker.time_options``); later migrations (42: ``hideFrom.tooltip`` on overrides, 43:
#: ``formatTime`` transformations) touch nothing these dashboards use, so newer Grafana loads
#: them unchanged, and Grafana 11 does not have to migrate them down (it cannot).
SCHEMA_VERSION: Final = 41

#: Grafana's grid is 24 columns wide.
GRID_WIDTH: Final = 24

#: The datasource reference every panel and query uses: the ``loki`` datasource variable.
LOKI: Final[Mapping[str, str]] = {"type": "loki", "uid": "${loki}"}

PanelKind = Literal["logs", "timeseries", "state-timeline", "table"]


@dataclass(frozen=True, slots=True)
class Query:
    """One Loki query of a panel.

    Attributes:
        expr: the LogQL expression, template variables unexpanded.
        legend: Grafana's legend format, e.g. ``{{service_name}}``.
        instant: an instant query (one value per series at the end of the range), for tables.
    """

    expr: str
    legend: str = ""
    instant: bool = False

    def as_json(self, ref_id: str) -> dict[str, Any]:
        """The target object of the panel JSON."""
        target: dict[str, Any] = {
            "refId": ref_id,
            "datasource": dict(LOKI),
            "editorMode": "code",
            "expr": self.expr,
            "queryType": "instant" if self.instant else "range",
        }
        if self.legend:
            target["legendFormat"] = self.legend
        return target


@dataclass(frozen=True, slots=True)
class DataLink:
    """A link shown on a panel's values (``fieldConfig.defaults.links``) or on the dashboard.

    Attributes:
        title: what the link says.
        url: the target; may use dashboard variables and data-link variables
            (``${__field.labels.NAME}``, ``${__data.fields.NAME}``, ``${__value.raw}``).
        tooltip: what a link at the top of the dashboard says on hover (panel links have
            no tooltip).
    """

    title: str
    url: str
    tooltip: str = ""

    def as_json(self) -> dict[str, Any]:
        """The data-link object (panel field config)."""
        return {"title": self.title, "url": self.url, "targetBlank": True}

    def as_dashboard_link(self) -> dict[str, Any]:
        """The dashboard-link object (top of the dashboard)."""
        return {
            "type": "link",
            "title": self.title,
            "url": self.url,
            "icon": "external link",
            "targetBlank": True,
            "asDropdown": False,
            "includeVars": False,
            "keepTime": False,
            "tags": [],
            "tooltip": self.tooltip,
        }


@dataclass(frozen=True, slots=True)
class Panel:
    """A panel of one of the four kinds; build it with :func:`logs`, :func:`timeseries`,
    :func:`state_timeline` or :func:`table` rather than directly."""

    kind: PanelKind
    title: str
    queries: tuple[Query, ...]
    description: str = ""
    width: int = 12
    height: int = 8
    options: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    links: tuple[DataLink, ...] = ()
    transformations: tuple[Mapping[str, Any], ...] = ()
    min_interval: str = ""

    def as_json(self, panel_id: int, x: int, y: int) -> dict[str, Any]:
        """The panel object, placed at column ``x``, row ``y``."""
        defaults = dict(self.defaults)
        if self.links:
            defaults["links"] = [link.as_json() for link in self.links]
        panel: dict[str, Any] = {
            "id": panel_id,
            "type": self.kind,
            "title": self.title,
            "description": self.description,
            "datasource": dict(LOKI),
            "gridPos": {"h": self.height, "w": self.width, "x": x, "y": y},
            "targets": [
                query.as_json(chr(ord("A") + index)) for index, query in enumerate(self.queries)
            ],
            "options": dict(self.options),
            "fieldConfig": {"defaults": defaults, "overrides": []},
        }
        if self.transformations:
            panel["transformations"] = [dict(t) for t in self.transformations]
        if self.min_interval:
            panel["interval"] = self.min_interval
        return panel


def logs(
    title: str, expr: str, *, description: str = "", width: int = 12, height: int = 9
) -> Panel:
    """A logs panel: newest first, wrapped lines, log details (where the Loki datasource's
    derived fields put their links) enabled."""
    return Panel(
        "logs",
        title,
        (Query(expr),),
        description=description,
        width=width,
        height=height,
        options={
            "showTime": True,
            "showLabels": False,
            "showCommonLabels": False,
            "wrapLogMessage": True,
            "prettifyLogMessage": False,
            "enableLogDetails": True,
            "dedupStrategy": "none",
            "sortOrder": "Descending",
        },
    )


def timeseries(
    title: str,
    *queries: Query,
    description: str = "",
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    links: Sequence[DataLink] = (),
    min_interval: str = "",
) -> Panel:
    """A time-series panel, one line per series, legend as a table of last values."""
    return Panel(
        "timeseries",
        title,
        queries,
        description=description,
        width=width,
        height=height,
        options={
            "legend": {
                "showLegend": True,
                "displayMode": "table",
                "placement": "right",
                "calcs": ["lastNotNull", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        defaults={"unit": unit, "custom": {"drawStyle": "line", "spanNulls": False}},
        links=tuple(links),
        min_interval=min_interval,
    )


def state_timeline(
    title: str,
    query: Query,
    *,
    description: str = "",
    width: int = 12,
    height: int = 8,
    links: Sequence[DataLink] = (),
) -> Panel:
    """A state timeline of counts: one row per series, coloured where the count is at least one.

    Loki emits no sample for an empty interval, so a row is blank where nothing happened and
    coloured where its series has records: a lifecycle state entered, an instance alive.
    """
    return Panel(
        "state-timeline",
        title,
        (query,),
        description=description,
        width=width,
        height=height,
        options={
            "mergeValues": True,
            "showValue": "never",
            "alignValue": "left",
            "rowHeight": 0.8,
            "legend": {"showLegend": False, "displayMode": "list", "placement": "bottom"},
            "tooltip": {"mode": "single", "sort": "none"},
        },
        defaults={
            "color": {"mode": "thresholds"},
            "thresholds": {
                "mode": "absolute",
                "steps": [{"color": "transparent", "value": None}, {"color": "blue", "value": 1}],
            },
            "custom": {"fillOpacity": 80, "lineWidth": 0},
        },
        links=tuple(links),
    )


def table(
    title: str,
    query: Query,
    *,
    description: str = "",
    width: int = 24,
    height: int = 8,
    links: Sequence[DataLink] = (),
) -> Panel:
    """A table of an instant metric query: one row per series, its labels as columns.

    ``labelsToFields`` turns each series' labels into columns and ``merge`` joins the series
    into one table, so data links can use ``${__data.fields.LABEL}``.
    """
    return Panel(
        "table",
        title,
        (query,),
        description=description,
        width=width,
        height=height,
        options={"showHeader": True, "cellHeight": "sm", "footer": {"show": False}},
        defaults={"custom": {"filterable": True}},
        links=tuple(links),
        transformations=(
            {"id": "labelsToFields", "options": {"mode": "columns"}},
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {"Time": True}}},
        ),
    )


@dataclass(frozen=True, slots=True)
class Variable:
    """A template variable; build it with the ``*_variable`` functions."""

    body: Mapping[str, Any]

    @property
    def name(self) -> str:
        """The variable's name (``$name`` in queries)."""
        return str(self.body["name"])


def datasource_variable(name: str = "loki", label: str = "Loki") -> Variable:
    """The datasource variable every panel uses: any datasource of type ``loki``."""
    return Variable(
        {
            "type": "datasource",
            "name": name,
            "label": label,
            "query": "loki",
            "regex": "",
            "current": {},
            "options": [],
            "hide": 0,
            "refresh": 1,
            "includeAll": False,
            "multi": False,
        }
    )


def label_values_variable(name: str, label_name: str, *, description: str = "") -> Variable:
    """A multi-value variable listing a Loki label's values, with *All* meaning ``.+``.

    Typed custom values are off: the values come from Loki itself, and queries use them as
    ``=~`${name:regex}``` (Grafana regex-escapes each value and joins them with ``|``; the
    custom all value ``.+`` is inserted unescaped, and matches every stream that has the label).
    """
    return Variable(
        {
            "type": "query",
            "name": name,
            "label": name,
            "description": description,
            "datasource": dict(LOKI),
            "query": f"label_values({label_name})",
            "definition": f"label_values({label_name})",
            "regex": "",
            "sort": 1,
            "refresh": 2,
            "includeAll": True,
            "allValue": ".+",
            "multi": True,
            "allowCustomValue": False,
            "current": {"text": ["All"], "value": ["$__all"]},
            "options": [],
            "hide": 0,
        }
    )


def textbox_variable(name: str, *, default: str = "", description: str = "") -> Variable:
    """A free-text variable (an identifier to follow, a URL)."""
    return Variable(
        {
            "type": "textbox",
            "name": name,
            "label": name,
            "description": description,
            "query": default,
            "current": {"text": default, "value": default},
            "options": [{"selected": True, "text": default, "value": default}],
            "hide": 0,
        }
    )


@dataclass(frozen=True, slots=True)
class Dashboard:
    """One dashboard: a stable uid, variables, panels in reading order, links.

    Attributes:
        uid: the stable uid (Grafana allows at most 40 characters: ``[a-zA-Z0-9_-]``).
        title: the title.
        description: one line on what the dashboard answers.
        variables: template variables, in the order Grafana shows them.
        panels: panels in reading order; laid out by :meth:`as_json`.
        links: links at the top of the dashboard.
        time_from: the default time range start (``now-6h``, ...).
    """

    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    panels: tuple[Panel, ...]
    links: tuple[DataLink, ...] = ()
    time_from: str = "now-6h"

    def as_json(self) -> dict[str, Any]:
        """The dashboard JSON model, panels laid out and numbered.

        Raises:
            ValueError: a panel is wider than the grid or narrower than one column.
        """
        panels = []
        x = y = row_height = 0
        for panel_id, panel in enumerate(self.panels, start=1):
            if not 1 <= panel.width <= GRID_WIDTH:
                raise ValueError(f"panel {panel.title!r}: width {panel.width} not in 1..24")
            if x + panel.width > GRID_WIDTH:
                x, y, row_height = 0, y + row_height, 0
            panels.append(panel.as_json(panel_id, x, y))
            x += panel.width
            row_height = max(row_height, panel.height)
        return {
            "id": None,
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["evidence-pipeline"],
            "timezone": "utc",
            "editable": True,
            "graphTooltip": 1,
            "fiscalYearStartMonth": 0,
            "liveNow": False,
            "refresh": "",
            "time": {"from": self.time_from, "to": "now"},
            "timepicker": {},
            "schemaVersion": SCHEMA_VERSION,
            "version": 1,
            "links": [link.as_dashboard_link() for link in self.links],
            "annotations": {"list": []},
            "templating": {"list": [dict(variable.body) for variable in self.variables]},
            "panels": panels,
        }


def render(dashboard: Dashboard) -> str:
    """The dashboard as the text committed under ``dashboards/json/``: two-space indented
    JSON, non-ASCII kept as UTF-8, one trailing newline."""
    return json.dumps(dashboard.as_json(), indent=2, ensure_ascii=False) + "\n"
