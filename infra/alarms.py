"""The alarm shapes Vigil uses: something that should be zero is not (lost or delayed work), or a
gauge passed its limit (a queue's oldest message waited too long)."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct


def alarm_above_zero(
    scope: Construct,
    construct_id: str,
    *,
    metric: cloudwatch.IMetric,
    description: str,
    periods: int = 1,
    gauge: bool = False,
) -> cloudwatch.Alarm:
    """ALARM when every one of ``periods`` consecutive periods is above zero; no data is fine.

    A ``gauge`` (a state only some passes report, like the fleet's counts) keeps its last state
    through a period without data instead of reading the gap as zero and sending a false OK.
    """
    return alarm_above(
        scope,
        construct_id,
        metric=metric,
        threshold=0,
        description=description,
        periods=periods,
        gauge=gauge,
    )


def alarm_above(
    scope: Construct,
    construct_id: str,
    *,
    metric: cloudwatch.IMetric,
    threshold: float,
    description: str,
    periods: int = 1,
    gauge: bool = False,
) -> cloudwatch.Alarm:
    """ALARM when every one of ``periods`` consecutive periods is above ``threshold``."""
    return cloudwatch.Alarm(
        scope,
        construct_id,
        metric=metric,
        threshold=threshold,
        evaluation_periods=periods,
        datapoints_to_alarm=periods,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.IGNORE
        if gauge
        else cloudwatch.TreatMissingData.NOT_BREACHING,
        alarm_description=description,
    )
