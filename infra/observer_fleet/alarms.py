"""The fleet's alarms, one per state that needs a person (each named in
``vigil.contract.alarms``, its description says what to type, its runbook entry says more), and the
metrics they and the dashboard watch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from infra.alarms import alarm_above, alarm_above_zero
from infra.observer_fleet.reconciler import RESYNC_LEASE_SECONDS, STREAM_MAX_RECORD_AGE
from vigil.contract.alarms import (
    SHORTFALL_MINUTES,
    STREAM_BEHIND_MINUTES,
    STUCK_PASSES,
    Alarm,
)
from vigil.contract.metrics import NAMESPACE, ObserverMetric, dimensions

if TYPE_CHECKING:
    from infra.observer_fleet.fleet import ObserverFleet

STREAM_BEHIND = Duration.minutes(STREAM_BEHIND_MINUTES)
STUCK_METRICS = (
    ObserverMetric.RESYNC_SKIPPED,
    ObserverMetric.PASS_ERRORS,
    ObserverMetric.STOP_FAILED,
    ObserverMetric.HEARTBEAT_STALE,
)
"""What each resync counts of the states that can stick (the dashboard plots them too)."""


def build_alarms(fleet: ObserverFleet) -> dict[str, cloudwatch.Alarm]:
    """Every alarm of the fleet, by name (``Monitoring`` sends them all to the alarm topic)."""
    alarms = {
        name: alarm_above_zero(
            fleet,
            f"{name}Alarm",
            alarm=alarm,
            description=f"Vigil observers: messages on {name}",
            metric=queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            ),
        )
        for name, alarm, queue in (
            ("ObserversDlq", Alarm.OBSERVERS_DLQ, fleet.observers_dlq),
            ("EventsDlq", Alarm.EVENTS_DLQ, fleet.events_dlq),
            ("StreamDlq", Alarm.STREAM_DLQ, fleet.stream_dlq),
            ("ReconcilerFailures", Alarm.RECONCILER_FAILURES, fleet.reconciler_failures),
        )
    }
    alarms["ObserversFailed"] = alarm_above_zero(
        fleet,
        "ObserversFailedAlarm",
        alarm=Alarm.OBSERVERS_FAILED,
        description="Vigil observers: an observer gave up (FAILED)",
        metric=fleet.failed_metric,
    )
    alarms["ObserversInFailed"] = alarm_above_zero(
        fleet,
        "ObserversInFailedAlarm",
        alarm=Alarm.OBSERVERS_IN_FAILED,
        description="Vigil observers: at least one observer is FAILED; fix it, then restart it",
        metric=fleet.metric(ObserverMetric.FLEET_FAILED, "Maximum", Duration.minutes(1)),
    )
    alarms["FleetShortfall"] = alarm_above_zero(
        fleet,
        "FleetShortfallAlarm",
        alarm=Alarm.FLEET_SHORTFALL,
        description=f"Vigil observers: fewer running than desired for {SHORTFALL_MINUTES} "
        "minutes (starts failing, crash loops, capacity)",
        metric=fleet.shortfall_metric(),
    )
    for kind in fleet.pooled_kinds:
        alarms.update(_host_alarms(fleet, kind))
    for kind in fleet.kinds:
        alarms[f"ObserverUncertain-{kind}"] = alarm_above_zero(
            fleet,
            f"ObserverUncertainAlarm-{kind}",
            alarm=Alarm.OBSERVER_UNCERTAIN,
            description=f"Vigil observers: an observer of kind {kind} stopped UNCERTAIN: "
            "ctx.once found an effect an earlier generation began and never recorded done; "
            "it is FAILED, not restarted. `vigil observers list --status FAILED` (its "
            "UNCERTAIN column names the effect); once you know whether it happened: "
            "`vigil observers settle NAME --effect EFFECT --done` (or `--not-done`; it "
            "restarts)",
            metric=fleet.kind_metric(ObserverMetric.UNCERTAIN, kind),
        )
    alarms.update(_stuck_alarms(fleet))
    alarms["ReconcilerErrors"] = alarm_above_zero(
        fleet,
        "ReconcilerErrorsAlarm",
        alarm=Alarm.RECONCILER_ERRORS,
        description="Vigil observers: the reconciler function failed (see its logs)",
        metric=fleet.reconciler.metric_errors(period=Duration.minutes(5), statistic="Sum"),
    )
    behind = int(STREAM_BEHIND.to_minutes())
    alarms["StreamBehind"] = alarm_above(
        fleet,
        "StreamBehindAlarm",
        alarm=Alarm.STREAM_BEHIND,
        description=f"Vigil observers: the reconciler has been over {behind} minutes behind "
        f"the registry stream for {STUCK_PASSES} consecutive minutes: creates, stops and "
        "restarts wait (the minute resync still acts on them), and changes older than "
        f"{int(STREAM_MAX_RECORD_AGE.to_hours())} h go to StreamDlq unhandled. Type `aws "
        f"lambda list-event-source-mappings --function-name {fleet.reconciler.function_name}` "
        "(State, LastProcessingResult), then see the reconciler's errors, throttles and "
        "duration on the dashboard and search its log group for the failing batch.",
        metric=fleet.stream_iterator_age(),
        threshold=STREAM_BEHIND.to_milliseconds(),
    )
    alarms["Api5xx"] = alarm_above_zero(
        fleet,
        "Api5xxAlarm",
        alarm=Alarm.API_5XX,
        description="Vigil observers API: server errors (5XX)",
        metric=fleet.api.metric_server_error(period=Duration.minutes(5), statistic="Sum"),
    )
    return alarms


def _stuck_alarms(fleet: ObserverFleet) -> dict[str, cloudwatch.Alarm]:
    """States that can stick without a status to show them: each counted by every resync,
    alarmed when it lasts ``STUCK_PASSES`` consecutive minutes."""
    stuck = {
        "ResyncSkipped": Alarm.RESYNC_SKIPPED,
        "ObserverErrors": Alarm.OBSERVER_ERRORS,
        "StopNotCompleted": Alarm.STOP_NOT_COMPLETED,
        "HeartbeatStale": Alarm.HEARTBEAT_STALE,
    }
    passes = f"{STUCK_PASSES} consecutive minutes"
    logs = "the reconciler's log group"
    descriptions = {
        "ResyncSkipped": f"Vigil observers: the resync was skipped for {passes}: its lease is "
        f"held (a pass longer than a minute, or a release that never landed: it expires "
        f"after {RESYNC_LEASE_SECONDS} s). Observers whose ECS events were lost wait meanwhile. Type `aws "
        "dynamodb get-item --table-name TABLE --key "
        '\'{"kind":{"S":"#resync"},"name":{"S":"#resync"}}\'` on the '
        f"observers table for lease_holder (a request id) and lease_until, then find that "
        f"request id in {logs}.",
        "ObserverErrors": f"Vigil observers: the resync skipped observers after AWS errors "
        f"for {passes} (throttled writes, denied or failing ECS calls). Search {logs} for "
        "'observer skipped this pass after an AWS error' (it names each observer and its "
        "error), then type `vigil observers get NAME`.",
        "StopNotCompleted": "Vigil observers: an observer asked to stop still runs (and "
        f"bills): StopTask failed for {passes}. Type `vigil observers list --status "
        "STOPPING`, then `vigil observers get NAME`: status_reason names ECS's error (often "
        "the reconciler's ecs:StopTask permission or a throttle).",
        "HeartbeatStale": "Vigil observers: RUNNING observers' heartbeats have been older "
        f"than 3 intervals for {passes}: the reconciler cannot replace them (writes to their "
        "records failing or throttled) while the shortfall alarm still counts them running. "
        "Type `vigil observers list --status RUNNING` and `vigil observers get NAME` "
        f"(heartbeat age, task), then search {logs} for the observer.",
    }
    return {
        name: alarm_above_zero(
            fleet,
            f"{name}Alarm",
            alarm=alarm,
            description=descriptions[name],
            metric=fleet.metric(metric, "Sum", Duration.minutes(1)),
        )
        for (name, alarm), metric in zip(stuck.items(), STUCK_METRICS, strict=True)
    }


def _host_alarms(fleet: ObserverFleet, kind: str) -> dict[str, cloudwatch.Alarm]:
    """A pooled kind's hosts: one lost (its observers were moved; find out why), or hosts
    that do not start (RunTask refused: capacity, quota; or a task that never heartbeats)."""
    look = f"`vigil hosts list --kind {kind}` (status, reason, heartbeat age)"
    return {
        f"HostLost-{kind}": alarm_above_zero(
            fleet,
            f"HostLostAlarm-{kind}",
            alarm=Alarm.HOST_LOST,
            description=f"Vigil observers: a host of the pooled kind {kind} was LOST (no "
            f"heartbeat for 3 intervals, or its task stopped); its observers were moved. "
            f"Type {look}, then `vigil observers list` for where they run now.",
            metric=fleet.kind_metric(ObserverMetric.HOST_LOST, kind),
        ),
        f"HostsStuckStarting-{kind}": alarm_above_zero(
            fleet,
            f"HostsStuckStartingAlarm-{kind}",
            alarm=Alarm.HOSTS_STUCK_STARTING,
            description=f"Vigil observers: hosts of the pooled kind {kind} have been "
            f"STARTING longer than the start timeout (RunTask failing: no capacity, a quota; "
            f"or the task never heartbeats); observers wait for them. Type {look}; the "
            "reason names ECS's answer.",
            metric=fleet.kind_metric(
                ObserverMetric.HOSTS_STUCK_STARTING, kind, "Maximum", Duration.minutes(1)
            ),
        ),
    }


def fleet_metric(
    metric: ObserverMetric,
    statistic: str = "Sum",
    period: Duration = Duration.minutes(5),
    *,
    stage: str | None,
    kind: str | None = None,
) -> cloudwatch.Metric:
    """A Powertools metric the API, reconciler or containers of ``stage`` emit: fleet-wide, or
    one kind's (the ``kind`` dimension)."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=str(metric),  # a plain str: jsii would take an Enum for its own
        dimensions_map=dimensions(stage, **({"kind": kind} if kind else {})),
        statistic=statistic,
        period=period,
    )
