"""``reference/metrics-and-alarms.md``: every metric of ``vigil.contract.metrics`` and every alarm
of ``vigil.contract.alarms``, with what each means, its threshold and its periods."""

from __future__ import annotations

from enum import StrEnum

from docsgen import source
from docsgen.markdown import anchor, code, page, prose, table, target
from vigil.contract.alarms import ALARMS, AlarmSpec, runbook_link
from vigil.contract.metrics import (
    METRIC_UNITS,
    NAMESPACE,
    SERVICE,
    STAGE_DIMENSION,
    JobMetric,
    ObserverMetric,
    TaskMetric,
)

METRIC_ENUMS: tuple[type[StrEnum], ...] = (JobMetric, TaskMetric, ObserverMetric)


def metric_names() -> list[str]:
    """Every metric the contract names: what the page must list."""
    return [metric.value for enum in METRIC_ENUMS for metric in enum]


def render() -> str:
    return page(
        "Metrics and alarms",
        f"Every metric Vigil emits, in the CloudWatch namespace {code(NAMESPACE)} with the "
        f"dimension {code('service')} = {code(SERVICE)} (and {code(STAGE_DIMENSION)} for a named "
        "stage), and every alarm it declares. The names live once in "
        "`functions/vigil/contract/`; what to do when an alarm fires is in the "
        "[runbooks](../runbooks.md).",
        *(_metrics(enum) for enum in METRIC_ENUMS),
        _alarms(),
    )


def _metrics(enum: type[StrEnum]) -> str:
    declared = source.module("vigil.contract.metrics")[enum.__name__]
    rows = []
    for metric in enum:
        member = declared.members[metric.name]
        rows.append(
            (
                target(anchor("metric", metric.value)) + code(metric.value),
                code(f"{enum.__name__}.{metric.name}"),
                METRIC_UNITS.get(metric, "Count"),
                prose(source.docstring(member)),
            )
        )
    return f"## {enum.__name__}\n\n{prose(source.docstring(declared))}\n\n" + table(
        ("Metric", "Contract name", "Unit", "Meaning"), rows
    )


def _alarms() -> str:
    rows = [
        (
            target(anchor("alarm", alarm.value))
            + f"[{code(alarm.value)}](../{runbook_link(alarm).removeprefix('docs/')})",
            spec.scope.value + (f" (when {spec.declared_when})" if spec.declared_when else ""),
            _watches(spec),
            _fires(spec),
            spec.meaning,
        )
        for alarm, spec in ALARMS.items()
    ]
    return (
        "## Alarms\n\nEach alarm exists once per member of its scope (a job's alarms once per "
        "job, a pooled kind's once per pooled kind). Every one notifies the stack's "
        "`AlarmTopicArn` on ALARM and on OK, and its description ends with the link to its "
        "runbook entry.\n\n"
        + table(("Alarm (runbook)", "Scope", "Watches", "Fires when", "Means"), rows)
    )


def _watches(spec: AlarmSpec) -> str:
    name = spec.watches.value if isinstance(spec.watches, StrEnum) else spec.watches
    shown = code(name) if isinstance(spec.watches, StrEnum) else name
    return f"{shown} ({spec.statistic}, {spec.period_minutes} min periods)"


def _fires(spec: AlarmSpec) -> str:
    periods = "one period" if spec.periods == 1 else f"{spec.periods} periods in a row"
    gap = "a period without data keeps the last state" if spec.gauge else "no data is OK"
    return f"above {spec.threshold} for {periods}; {gap}"
