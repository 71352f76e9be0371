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
    """A tick's run succeeded (recorded SUCCEEDED)."""
    FAILED = "JobRunFailed"
    """A run raised: Lambda retries it, then dead-letters its event (``failed_runs``)."""
    DUPLICATE = "JobDuplicateSuppressed"
    """A second delivery of a tick already claimed or done did not run (the guard's point)."""
    SKIPPED = "JobTickSkipped"
    """A tick arrived while a run of the job was still going and ``overlap="skip"``."""
    MISSED = "JobTickMissed"
    """A tick arrived later than ``max_lateness`` and did not run (alarmed)."""
    FENCED = "JobRunFenced"
    """A run lost its lease to a newer one; its late writes through ``run.fenced`` were refused."""
    DURATION = "JobRunDuration"
    """Declared, not emitted today: a run's duration is on its record (``duration_ms``)."""
    LATENESS = "JobTickLateness"
    """Declared, not emitted today: a tick's lateness shows in ``vigil jobs history``."""
    MALFORMED = "JobEventMalformed"
    """An event the guard could not read as a tick (not from the scheduler?); nothing ran."""
    PAUSED = "JobTickPaused"
    """A tick arrived while the job was paused (``vigil jobs pause``) and was recorded PAUSED."""
    NEVER_DELIVERED = "JobTickNeverDelivered"
    """The audit found an expected tick that never arrived and recorded it MISSED (alarmed)."""
    TOO_LONG = "JobRunTooLong"
    """A run took longer than the job's ``max_duration`` (alarmed when set)."""
    TOO_SHORT = "JobRunTooShort"
    """A run finished under the job's ``min_duration`` (alarmed when set)."""
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
    """The API registered an observer."""
    STARTED = "ObserverStarted"
    """The reconciler started an observer's task (or placed it on a host)."""
    RESTARTED = "ObserverRestarted"
    """The reconciler started an observer again after its task stopped or went silent."""
    STOPPED = "ObserverStopped"
    """An observer asked to stop has stopped."""
    FAILED = "ObserverFailed"
    """An observer gave up after ``failure_threshold`` failures in a row (alarmed)."""
    ORPHAN_STOPPED = "ObserverOrphanStopped"
    """A task no registry record owns (or an old generation's) was stopped."""
    STALE_EVENT_IGNORED = "ObserverStaleEventIgnored"
    """An ECS event about an older generation of an observer, or a registry change the record
    has since moved past (a stream record delivered again), was ignored."""
    RUN_TASK_FAILED = "ObserverRunTaskFailed"
    """ECS refused a RunTask (capacity, quota, permissions); the start is retried with backoff."""
    HEARTBEAT_STALE = "ObserverHeartbeatStale"
    """RUNNING observers whose heartbeat is older than 3 intervals, counted by each resync."""
    FENCED = "ObserverFenced"
    """An observer's write through ``ctx.fenced`` was refused: a newer generation owns it."""
    UNCERTAIN = "ObserverUncertain"
    """``ctx.once`` met an effect an earlier generation began and never recorded done: the
    observer stopped, marked with the effect, until a person settles it."""
    SETTLED = "ObserverSettled"
    """A person settled an UNCERTAIN observer's effect (``vigil observers settle``): it starts
    again."""
    RECONCILE_DURATION = "ReconcilePassDuration"
    """How long a resync pass took."""
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
    """Observers wanted running, as the resync saw them."""
    FLEET_PENDING = "FleetPending"
    """Observers by status (this and the next five gauges): PENDING."""
    FLEET_STARTING = "FleetStarting"
    """Observers STARTING."""
    FLEET_RUNNING = "FleetRunning"
    """Observers RUNNING."""
    FLEET_STOPPING = "FleetStopping"
    """Observers STOPPING."""
    FLEET_STOPPED = "FleetStopped"
    """Observers STOPPED."""
    FLEET_FAILED = "FleetFailed"
    """Observers FAILED (alarmed while above zero)."""
    FLEET_OLDEST_HEARTBEAT_AGE = "FleetOldestHeartbeatAge"
    """The oldest heartbeat of a RUNNING observer."""
    FLEET_HANDING_OVER = "FleetHandingOver"
    """Observers in a planned hand-over (a rollout, a drain, a rebalance) within their kind's
    ``max_unavailable``: FleetShortfall does not count them as missing."""


class TaskMetric(StrEnum):
    """Metrics emitted per task (``vigil.tasks``); the dimension is ``task``.

    Enqueues are not among them: an application enqueues with boto3 alone and emits no metrics,
    so SQS's own ``NumberOfMessagesSent`` of the task's queue counts them (every enqueue, by
    any path, plus redrives; on each task's outcomes graph), at no request of ours."""

    SUCCEEDED = "TaskSucceeded"
    """A task ran and succeeded."""
    FAILED = "TaskFailed"
    """Out of retries (or malformed): the record is FAILED and the message dead-lettered."""
    RETRIED = "TaskRetried"
    """A task's attempt failed; it runs again after its backoff."""
    DUPLICATE = "TaskDuplicateSuppressed"
    """A second delivery of a task already claimed or done did not run."""
    FENCED = "TaskRunFenced"
    """A run lost its lease to a newer attempt; its late writes were refused."""
    CANCELLED = "TaskCancelled"
    """A task was cancelled: its message met a CANCELLED record, or its run was stopped by a
    cancel asked for while it ran."""
    MALFORMED = "TaskMessageMalformed"
    """A message that is no task (dead-lettered without running)."""
    DURATION = "TaskRunDuration"
    """How long a task's run took."""
    QUEUE_WAIT = "TaskQueueWait"
    """From ``enqueued_at`` (or ``due_at``) to the claim: what a caller waits before work starts."""
    FINISH_UNRECORDED = "TaskFinishUnrecorded"
    """A run ended but its outcome could not be written before the invocation's time ran
    out: the message comes back and the task runs again once its lease expires."""
    UNCERTAIN = "TaskRunUncertain"
    """A run stopped on an effect an earlier run began and never recorded done (``run.once``):
    the task is UNCERTAIN until ``vigil tasks settle``."""
    EVENT_UNSENT = "TaskEventUnsent"
    """A completion event PutEvents did not take before the invocation's time ran out."""
    RATE_LIMITED = "TaskRateLimited"
    """A message over the task's ``rate_limit``: sent back to wait for its slot (no attempt
    spent). Steady counts mean the backlog outgrows the rate: the queue-age alarm tells."""
    PROGRESS_DROPPED = "TaskProgressDropped"
    """A ``run.progress`` note DynamoDB kept throttling: dropped, the run went on."""
    COMPENSATED = "FlowCompensated"
    """A flow failed (or was cancelled) and its finished steps' compensations all ran."""
    COMPENSATION_FAILED = "FlowCompensationFailed"
    """A flow's compensation raised: the flow is FAILED naming it, and what it undid is partial
    (alarmed: runbook ``flow-compensation-failed``)."""
    SLEPT = "FlowSlept"
    """Stack-wide (no ``task`` dimension): a flow's invocation ended SLEEPING (``run.sleep``)."""
    WAITED = "FlowWaited"
    """Stack-wide: a flow's invocation ended WAITING for a signal (``run.wait_for``)."""
    STUCK = "TaskStuck"
    """Per task, from the tasks audit, only when some are: records of a task that declares
    ``max_duration`` not ended past their deadline (alarmed: runbook ``task-stuck``)."""
    STRANDED = "TasksStranded"
    """Stack-wide (no ``task`` dimension), every pass of the stranded-tasks audit, zero too:
    records waiting for a retry whose message should have taken them by now
    (``vigil.tasks.audit``)."""


STACK_WIDE_TASK_METRICS = frozenset({TaskMetric.STRANDED, TaskMetric.SLEPT, TaskMetric.WAITED})
"""Task metrics without the ``task`` dimension: not on a task's own graphs."""


METRIC_UNITS: dict[str, str] = {
    ObserverMetric.RECONCILE_DURATION: "Milliseconds",
    ObserverMetric.FLEET_OLDEST_HEARTBEAT_AGE: "Seconds",
    TaskMetric.DURATION: "Milliseconds",
    TaskMetric.QUEUE_WAIT: "Milliseconds",
}
"""CloudWatch units of the metrics that are not counts."""
