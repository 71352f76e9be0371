"""Metric names, their namespace and the service and stage dimensions: what the code emits and
what the dashboard and alarms read."""

from __future__ import annotations

from enum import StrEnum

from vigil.contract.stages import STAGE_VARIABLE

SERVICE = "vigil"
"""Powertools' service name: the logs' ``service`` key and every metric's ``service`` dimension."""
NAMESPACE = "Vigil"
"""The CloudWatch namespace of every metric."""
STAGE_DIMENSION = "stage"
"""The dimension a named stage's metrics carry (its value: the stage), so that stage's alarms and
dashboard read its own metrics only. The default stage's metrics have none: they keep the identity
they had before stages, so its alarms keep their history."""


def dimensions(stage: str | None, **others: str) -> dict[str, str]:
    """A metric's dimensions: ``service``, ``others`` (``job``, ``task``, ``kind``) and the stage's
    when there is one. The one place both the emitting code and the alarms build them."""
    return {"service": SERVICE, **others, **({STAGE_DIMENSION: stage} if stage else {})}


def powertools_environment(stage: str | None = None) -> dict[str, str]:
    """The environment every function and container gets, so Powertools names what it emits (a
    ``single_metric`` takes its ``service`` dimension from it), and a named stage's name, which
    ``vigil.telemetry`` adds to every metric as the ``stage`` dimension."""
    return {
        "POWERTOOLS_SERVICE_NAME": SERVICE,
        "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
        **({STAGE_VARIABLE: stage} if stage else {}),
    }


class JobMetric(StrEnum):
    """Metrics emitted per job; the dimension is ``job``."""

    SUCCEEDED = "JobRunSucceeded"
    FAILED = "JobRunFailed"
    DUPLICATE = "JobDuplicateSuppressed"
    SKIPPED = "JobTickSkipped"
    MISSED = "JobTickMissed"
    FENCED = "JobRunFenced"
    DURATION = "JobRunDuration"
    LATENESS = "JobTickLateness"
    MALFORMED = "JobEventMalformed"
    PAUSED = "JobTickPaused"
    NEVER_DELIVERED = "JobTickNeverDelivered"
    TOO_LONG = "JobRunTooLong"
    TOO_SHORT = "JobRunTooShort"
    UNCERTAIN = "JobRunUncertain"
    """A run stopped on an effect an earlier run began and never recorded done (``run.once``):
    the tick is UNCERTAIN until ``vigil jobs settle``."""
    FINISH_UNRECORDED = "JobFinishUnrecorded"
    """A run ended (succeeded or failed) but its outcome could not be written before the
    invocation's time ran out: Lambda's retry on the same container writes it; on another
    container a succeeded body runs again."""


class ObserverMetric(StrEnum):
    """Metrics of the observer fleet; per-observer ones carry the ``kind`` dimension."""

    CREATED = "ObserverCreated"
    STARTED = "ObserverStarted"
    RESTARTED = "ObserverRestarted"
    STOPPED = "ObserverStopped"
    FAILED = "ObserverFailed"
    ORPHAN_STOPPED = "ObserverOrphanStopped"
    STALE_EVENT_IGNORED = "ObserverStaleEventIgnored"
    RUN_TASK_FAILED = "ObserverRunTaskFailed"
    HEARTBEAT_STALE = "ObserverHeartbeatStale"
    FENCED = "ObserverFenced"
    UNCERTAIN = "ObserverUncertain"
    """``ctx.once`` met an effect an earlier generation began and never recorded done: the
    observer stopped, marked with the effect, until a person settles it."""
    RECONCILE_DURATION = "ReconcilePassDuration"
    RESYNC_SKIPPED = "ResyncSkipped"
    """A resync found its lease held (a pass still running, or a release that never landed)."""
    PASS_ERRORS = "ReconcilePassErrors"
    """Observers a resync skipped after an AWS error of their own (the next pass retries them)."""
    STOP_FAILED = "ObserverStopFailed"
    """StopTask failed for an observer asked to stop (its task runs on, and bills, until it works)."""
    HOST_LOST = "HostLost"
    """A pooled host marked LOST (silent for 3 intervals, or its task stopped), per kind."""
    HOSTS_STUCK_STARTING = "HostsStuckStarting"
    """Gauge per pooled kind, every resync: hosts STARTING for longer than the start timeout
    (RunTask keeps failing, or the task never heartbeats)."""
    # Gauges every resync emits for the whole fleet (vigil.observers.fleet_gauges).
    FLEET_DESIRED = "FleetDesiredRunning"
    FLEET_PENDING = "FleetPending"
    FLEET_STARTING = "FleetStarting"
    FLEET_RUNNING = "FleetRunning"
    FLEET_STOPPING = "FleetStopping"
    FLEET_STOPPED = "FleetStopped"
    FLEET_FAILED = "FleetFailed"
    FLEET_OLDEST_HEARTBEAT_AGE = "FleetOldestHeartbeatAge"
    FLEET_HANDING_OVER = "FleetHandingOver"
    """Observers in a planned hand-over (a rollout, a drain, a rebalance) within their kind's
    ``max_unavailable``: FleetShortfall does not count them as missing."""


class TaskMetric(StrEnum):
    """Metrics emitted per task (``vigil.tasks``); the dimension is ``task``.

    Enqueues are not among them: an application enqueues with boto3 alone and emits no metrics,
    so SQS's own ``NumberOfMessagesSent`` of the task's queue counts them (every enqueue, by
    any path, plus redrives; on each task's outcomes graph), at no request of ours."""

    SUCCEEDED = "TaskSucceeded"
    FAILED = "TaskFailed"
    """Out of retries (or malformed): the record is FAILED and the message dead-lettered."""
    RETRIED = "TaskRetried"
    DUPLICATE = "TaskDuplicateSuppressed"
    FENCED = "TaskRunFenced"
    CANCELLED = "TaskCancelled"
    MALFORMED = "TaskMessageMalformed"
    DURATION = "TaskRunDuration"
    QUEUE_WAIT = "TaskQueueWait"
    """From ``enqueued_at`` (or ``due_at``) to the claim: what a caller waits before work starts."""
    FINISH_UNRECORDED = "TaskFinishUnrecorded"
    UNCERTAIN = "TaskRunUncertain"
    """A run stopped on an effect an earlier run began and never recorded done (``run.once``):
    the task is UNCERTAIN until ``vigil tasks settle``."""
    EVENT_UNSENT = "TaskEventUnsent"
    """A completion event PutEvents did not take before the invocation's time ran out."""


METRIC_UNITS: dict[str, str] = {
    ObserverMetric.RECONCILE_DURATION: "Milliseconds",
    ObserverMetric.FLEET_OLDEST_HEARTBEAT_AGE: "Seconds",
    TaskMetric.DURATION: "Milliseconds",
    TaskMetric.QUEUE_WAIT: "Milliseconds",
}
"""CloudWatch units of the metrics that are not counts."""
