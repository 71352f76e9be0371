"""What the synthesized dashboard and alarms read, parsed out of the template for assertions."""

from __future__ import annotations

import json
from typing import Any

from vigil_tools.emulator.template import Synthesized

Series = tuple[str, str, frozenset[tuple[str, str]]]
"""(namespace, metric name, dimensions) of one metric a widget or alarm reads."""


def _text(value: Any) -> str:
    """A Fn::Join'ed dashboard body as text, each reference replaced by a marker."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_text(part) for part in parts)
    return "<" + json.dumps(value, separators=(",", ":")).replace('"', "") + ">"


def stack_dashboard(synthesized: Synthesized, *, console: bool = False) -> dict[str, Any]:
    """The stack's own dashboard, or (``console``) the console's (``infra.console``)."""
    (dashboard,) = [
        d
        for d in synthesized.resources("AWS::CloudWatch::Dashboard").values()
        if ("-console-" in _text(d["Properties"].get("DashboardName", ""))) == console
    ]
    return dict(dashboard)


def dashboard_widgets(synthesized: Synthesized, *, console: bool = False) -> list[dict[str, Any]]:
    dashboard = stack_dashboard(synthesized, console=console)
    widgets: list[dict[str, Any]] = json.loads(_text(dashboard["Properties"]["DashboardBody"]))[
        "widgets"
    ]
    return widgets


def shard_dashboards(synthesized: Synthesized) -> dict[str, list[dict[str, Any]]]:
    """Each shard's dashboard (by its name), its widgets parsed."""
    found = {}
    for path, stack in synthesized.stacks():
        if not path:
            continue
        for dashboard in stack.resources("AWS::CloudWatch::Dashboard").values():
            body = json.loads(_text(dashboard["Properties"]["DashboardBody"]))
            found[_text(dashboard["Properties"]["DashboardName"])] = body["widgets"]
    return found


def widget_series(widget: dict[str, Any]) -> list[Series]:
    found = []
    for row in widget.get("properties", {}).get("metrics", []):
        values = [v for v in row if isinstance(v, str)]
        if len(values) >= 2:
            dims = frozenset(zip(values[2::2], values[3::2], strict=True))
            found.append((values[0], values[1], dims))
    return found


def alarm_series(alarm: dict[str, Any]) -> list[Series]:
    props = alarm["Properties"]
    stats = [props] if "MetricName" in props else []
    stats += [q["MetricStat"]["Metric"] for q in props.get("Metrics", []) if "MetricStat" in q]
    return [
        (
            stat["Namespace"],
            stat["MetricName"],
            frozenset((d["Name"], _text(d["Value"])) for d in stat.get("Dimensions", [])),
        )
        for stat in stats
    ]


def series_read(synthesized: Synthesized, namespace: str) -> set[Series]:
    """Every series of a namespace a dashboard or an alarm reads (the shards' too)."""
    widgets = dashboard_widgets(synthesized)
    widgets += [w for found in shard_dashboards(synthesized).values() for w in found]
    read = {s for w in widgets for s in widget_series(w)}
    for _, stack in synthesized.stacks():
        for alarm in stack.resources("AWS::CloudWatch::Alarm").values():
            read.update(alarm_series(alarm))
    return {s for s in read if s[0] == namespace}


def insights_queries(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """Each Metrics Insights query an alarm of the stack runs -> the alarm's properties."""
    return {
        query["Expression"]: alarm["Properties"]
        for alarm in synthesized.resources("AWS::CloudWatch::Alarm").values()
        for query in alarm["Properties"].get("Metrics", [])
        if str(query.get("Expression", "")).startswith("SELECT")
    }


def emitted(output: str) -> dict[Series, set[str]]:
    """Series -> units, from the EMF lines Powertools printed (dimension values kept)."""
    found: dict[Series, set[str]] = {}
    for line in output.splitlines():
        if '"_aws"' not in line:
            continue
        document = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            for dimensions in directive["Dimensions"]:
                dims = frozenset((name, str(document[name])) for name in dimensions)
                for metric in directive["Metrics"]:
                    series = (directive["Namespace"], metric["Name"], dims)
                    found.setdefault(series, set()).add(metric.get("Unit", "None"))
    return found
