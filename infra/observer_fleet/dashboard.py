"""The fleet's rows of the stack's dashboard: desired against running, status, heartbeats,
lifecycle, dead letters, the states that can stick, the stream's lag, pooled hosts, then each
kind's CPU and memory. ``Monitoring`` adds them in this order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from infra.dashboard_rows import kind_row, queue_depth
from infra.observer_fleet.alarms import STREAM_BEHIND, STUCK_METRICS
from vigil.contract.metrics import ObserverMetric

if TYPE_CHECKING:
    from infra.observer_fleet.fleet import ObserverFleet

MINUTE = Duration.minutes(1)
FLEET_STATUS_GAUGES = (
    ObserverMetric.FLEET_PENDING,
    ObserverMetric.FLEET_STARTING,
    ObserverMetric.FLEET_RUNNING,
    ObserverMetric.FLEET_STOPPING,
    ObserverMetric.FLEET_STOPPED,
    ObserverMetric.FLEET_FAILED,
)


def fleet_rows(fleet: ObserverFleet) -> list[list[cloudwatch.IWidget]]:
    """The rows, top to bottom; each is one ``Dashboard.add_widgets`` call."""
    rows: list[list[cloudwatch.IWidget]] = []
    stale_after = 3 * fleet.heartbeat_seconds
    rows.append(
        [
            cloudwatch.GraphWidget(
                title="observers: desired against running",
                left=[
                    fleet.metric(ObserverMetric.FLEET_DESIRED, "Maximum", MINUTE),
                    fleet.metric(ObserverMetric.FLEET_RUNNING, "Maximum", MINUTE),
                    fleet.metric(ObserverMetric.FLEET_HANDING_OVER, "Maximum", MINUTE),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="observers by status",
                left=[fleet.metric(name, "Maximum", MINUTE) for name in FLEET_STATUS_GAUGES],
                stacked=True,
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="observers: oldest heartbeat of a RUNNING one (s)",
                left=[fleet.metric(ObserverMetric.FLEET_OLDEST_HEARTBEAT_AGE, "Maximum", MINUTE)],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(value=stale_after, label="restarted after")
                ],
                width=8,
            ),
        ]
    )
    rows.append(
        [
            cloudwatch.GraphWidget(
                title="observers: stopped UNCERTAIN (ctx.once), per kind",
                left=[fleet.kind_metric(ObserverMetric.UNCERTAIN, kind) for kind in fleet.kinds],
                width=8,
            ),
        ]
    )
    rows.append(
        [
            cloudwatch.GraphWidget(
                title="observers: lifecycle",
                left=[
                    fleet.metric(metric)
                    for metric in (
                        ObserverMetric.STARTED,
                        ObserverMetric.RESTARTED,
                        ObserverMetric.STOPPED,
                        ObserverMetric.FAILED,
                        ObserverMetric.ORPHAN_STOPPED,
                        ObserverMetric.HEARTBEAT_STALE,
                        ObserverMetric.RUN_TASK_FAILED,
                    )
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="observers: dead letters and reconcile time",
                left=[
                    queue_depth(fleet.observers_dlq, "gave up"),
                    queue_depth(fleet.events_dlq, "undelivered task events"),
                    queue_depth(fleet.stream_dlq, "unprocessed registry changes"),
                    queue_depth(fleet.reconciler_failures, "failed reconciler events"),
                ],
                right=[fleet.metric(ObserverMetric.RECONCILE_DURATION, "Maximum")],
                width=12,
            ),
        ]
    )
    rows.append(
        [
            cloudwatch.GraphWidget(
                title="observers: stuck states (per minute; alarmed after 3 in a row)",
                left=[fleet.metric(metric, "Sum", MINUTE) for metric in STUCK_METRICS],
                width=16,
            ),
            cloudwatch.GraphWidget(
                title="reconciler: registry stream iterator age (ms)",
                left=[fleet.stream_iterator_age()],
                left_annotations=[
                    cloudwatch.HorizontalAnnotation(
                        value=STREAM_BEHIND.to_milliseconds(), label="alarm"
                    )
                ],
                width=8,
            ),
        ]
    )
    if fleet.pooled_kinds:
        rows.append(
            [
                cloudwatch.GraphWidget(
                    title="pooled hosts: lost (per 5 min)",
                    left=[
                        fleet.kind_metric(ObserverMetric.HOST_LOST, k) for k in fleet.pooled_kinds
                    ],
                    width=12,
                ),
                cloudwatch.GraphWidget(
                    title="pooled hosts: STARTING past the start timeout",
                    left=[
                        fleet.kind_metric(ObserverMetric.HOSTS_STUCK_STARTING, k, "Maximum", MINUTE)
                        for k in fleet.pooled_kinds
                    ],
                    width=12,
                ),
            ]
        )
    rows += [kind_row(kind, fleet.cluster, d) for kind, d in fleet.task_definitions.items()]
    return rows
