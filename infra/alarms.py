"""The alarm shapes Vigil uses: something that should be zero is not (lost or delayed work), or a
gauge passed its limit (a queue's oldest message waited too long).

Every alarm is declared here from its identity in ``vigil.contract.alarms``: its periods and
missing-data rule come from its ``AlarmSpec``, and its description ends with the link to its
runbook entry, within CloudWatch's length limit (checked at synth, not at deploy).
"""

from __future__ import annotations

import re

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.errors import ConfigurationError
from infra.stage import stage_of
from vigil.contract.alarms import ALARMS, DESCRIPTION_LIMIT, Alarm, runbook_link
from vigil.contract.metrics import NAMESPACE, dimensions

TOKEN = re.compile(r"\$\{Token\[[^\]]*\]\}")
TOKEN_WORST_LENGTH = 64
"""What an unresolved name in a description (a function's, a queue's) may grow to at deploy:
64, the longest Lambda function name, the only token a description carries today."""


def alarm_above_zero(
    scope: Construct,
    construct_id: str,
    *,
    alarm: Alarm,
    metric: cloudwatch.IMetric,
    description: str,
) -> cloudwatch.Alarm:
    """ALARM when every one of the spec's consecutive periods is above zero; no data is fine,
    except for a gauge (a state only some passes report, like the fleet's counts), which keeps
    its last state through a period without data instead of reading the gap as zero."""
    return alarm_above(
        scope, construct_id, alarm=alarm, metric=metric, threshold=0, description=description
    )


def alarm_above(
    scope: Construct,
    construct_id: str,
    *,
    alarm: Alarm,
    metric: cloudwatch.IMetric,
    threshold: float,
    description: str,
) -> cloudwatch.Alarm:
    """ALARM when every one of the spec's consecutive periods is above ``threshold``."""
    spec = ALARMS[alarm]
    return cloudwatch.Alarm(
        scope,
        construct_id,
        metric=metric,
        threshold=threshold,
        evaluation_periods=spec.periods,
        datapoints_to_alarm=spec.periods,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=_missing_data(spec.gauge, spec.missing_breaches),
        alarm_description=with_runbook(construct_id, alarm, description),
    )


def insights_query(
    metric: str,
    group_by: str,
    stage: str | None,
    *,
    statistic: str = "SUM",
    limit: int | None = None,
    grouped: bool = True,
) -> str:
    """A Metrics Insights query over one Vigil metric of every job (or task, ``group_by``), one
    series each (``grouped=False``: one series, their total): ``SCHEMA`` holds exactly the
    dimensions the runtime emits it with (``vigil.contract.metrics.dimensions``), so the
    stage's own series, and only those."""
    keys = sorted(dimensions(stage, **{group_by: "x"}))
    where = [f"service = '{dimensions(None)['service']}'"]
    if stage:
        where.append(f"stage = '{stage}'")
    query = (
        f'SELECT {statistic}("{metric}") FROM SCHEMA("{NAMESPACE}", {", ".join(keys)}) '
        f"WHERE {' AND '.join(where)}"
    )
    if not grouped:
        return query
    query += f" GROUP BY {group_by} ORDER BY {statistic}() DESC"
    return query + (f" LIMIT {limit}" if limit else "")


def insights_alarm(
    scope: Construct, construct_id: str, *, alarm: Alarm, description: str
) -> cloudwatch.Alarm:
    """One alarm over a metric of every job (or task): a Metrics Insights query grouped by the
    entity, each a contributor CloudWatch keeps a state for and notifies about, with its
    dimensions (the job's name). Billed by the series the query reads: those emitted in the last
    three hours, and the runtime emits them only on what is not a success."""
    spec = ALARMS[alarm]
    query = insights_query(str(spec.watches), spec.grouped_by, stage_of(scope))
    return alarm_above_zero(
        scope,
        construct_id,
        alarm=alarm,
        metric=cloudwatch.MathExpression(
            expression=query,
            using_metrics={},
            period=Duration.minutes(spec.period_minutes),
            label=f"{spec.watches} per {spec.grouped_by}",
        ),
        description=description,
    )


def _missing_data(gauge: bool, breaches: bool) -> cloudwatch.TreatMissingData:
    if breaches:
        return cloudwatch.TreatMissingData.BREACHING
    return (
        cloudwatch.TreatMissingData.IGNORE if gauge else cloudwatch.TreatMissingData.NOT_BREACHING
    )


def with_runbook(construct_id: str, alarm: Alarm, description: str) -> str:
    """``description`` and its runbook link; too long for CloudWatch (a name counted at its
    longest) is a synth error naming the alarm, not a failed deploy."""
    full = f"{description} Runbook: {runbook_link(alarm)}"
    length = len(TOKEN.sub("x" * TOKEN_WORST_LENGTH, full))
    if length > DESCRIPTION_LIMIT:
        raise ConfigurationError(
            f"alarm {construct_id!r}",
            "description",
            f"{length} characters with its runbook link, CloudWatch takes {DESCRIPTION_LIMIT}",
        )
    return full
