"""Every alarm Vigil declares, by identity: what it watches, when it fires, and where its runbook
entry is.

The identity (an ``Alarm``) is what ties the three places an alarm lives together: ``infra``
declares the CloudWatch alarm from its ``AlarmSpec`` (periods, period, missing-data rule), its
description ends with ``runbook_link`` (``docs/runbooks.md#<identity>``), and the runbook and the
generated reference (``docsgen``) have one entry per identity; tests fail when they differ.
The alarms' construct ids (and so their CloudFormation logical ids and history) stay infra's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from vigil.contract.metrics import JobMetric, ObserverMetric, TaskMetric

RUNBOOKS = "docs/runbooks.md"
"""Where each alarm's runbook entry is, as a path from the repository's root: every checkout
(the one a stack was deployed from included) has it at the version deployed, GitHub renders it,
and the docs site serves the same page (``runbooks/#<identity>``). No hosted URL is assumed:
Vigil is cloned, not installed from a site, and a fork's runbooks are its own."""
DESCRIPTION_LIMIT = 1024
"""CloudWatch's longest ``AlarmDescription``: a longer one fails the deploy, not the synth."""
SHORTFALL_MINUTES = 5
"""Minutes in a row the fleet runs fewer observers than desired before FleetShortfall fires."""
STUCK_PASSES = 3
"""Consecutive minutes (resync passes) a stuck state must last before its alarm: one pass that
fails or is skipped clears by itself at the next; three in a row do not."""
STREAM_BEHIND_MINUTES = 5
"""How far behind the registry stream the reconciler may fall (its iterator age) before the alarm:
a healthy batch is handled within seconds; 5 minutes is retries failing or the function throttled."""


class AlarmScope(StrEnum):
    """What one copy of an alarm watches: an alarm of a per-job scope exists once per job; one of
    the *every job* scopes exists once per stack, a Metrics Insights alarm whose query groups by
    job, so each job is a contributor with its own state and CloudWatch notifies naming it."""

    JOB = "job"
    TASK = "task"
    JOBS = "every job (one alarm; each job a contributor)"
    TASKS = "every task (one alarm; each task a contributor)"
    JOBS_CONTROL = "jobs control"
    TASKS_AUDIT = "tasks audit"
    FLEET = "observer fleet"
    POOLED_KIND = "pooled kind"
    KIND = "observer kind"


class Alarm(StrEnum):
    """An alarm's identity; its value is also its runbook entry's anchor."""

    JOB_FAILED_RUNS = "job-failed-runs"
    JOB_UNDELIVERED = "job-undelivered"
    JOB_MISSED_TICKS = "job-missed-ticks"
    JOB_NEVER_DELIVERED = "job-never-delivered"
    JOB_FINISH_UNRECORDED = "job-finish-unrecorded"
    JOB_UNCERTAIN = "job-uncertain"
    JOB_TOO_LONG = "job-too-long"
    JOB_TOO_SHORT = "job-too-short"
    TASK_QUEUE = "task-queue"
    TASK_FAILED = "task-failed"
    TASK_FINISH_UNRECORDED = "task-finish-unrecorded"
    TASK_UNCERTAIN = "task-uncertain"
    TASK_EVENT_UNSENT = "task-event-unsent"
    FLOW_COMPENSATION_FAILED = "flow-compensation-failed"
    TASK_STUCK = "task-stuck"
    TASKS_STRANDED = "tasks-stranded"
    JOBS_AUDIT_UNDELIVERED = "jobs-audit-undelivered"
    OBSERVERS_DLQ = "observers-dlq"
    EVENTS_DLQ = "events-dlq"
    STREAM_DLQ = "stream-dlq"
    RECONCILER_FAILURES = "reconciler-failures"
    OBSERVERS_FAILED = "observers-failed"
    OBSERVERS_IN_FAILED = "observers-in-failed"
    FLEET_SHORTFALL = "fleet-shortfall"
    RESYNC_SKIPPED = "resync-skipped"
    OBSERVER_ERRORS = "observer-errors"
    STOP_NOT_COMPLETED = "stop-not-completed"
    HEARTBEAT_STALE = "heartbeat-stale"
    RECONCILER_ERRORS = "reconciler-errors"
    STREAM_BEHIND = "stream-behind"
    API_5XX = "api-5xx"
    HOST_LOST = "host-lost"
    HOSTS_STUCK_STARTING = "hosts-stuck-starting"
    OBSERVER_UNCERTAIN = "observer-uncertain"


Watched = JobMetric | TaskMetric | ObserverMetric | str
"""A Vigil metric (``vigil.contract.metrics``), or an AWS one named in words."""


@dataclass(frozen=True)
class AlarmSpec:
    """How an alarm reads its metric: ALARM when each of ``periods`` consecutive periods of
    ``period_minutes`` is above its threshold (zero unless ``threshold`` says otherwise)."""

    scope: AlarmScope
    watches: Watched
    statistic: str
    period_minutes: int
    meaning: str
    """One sentence: what is wrong when it fires (its runbook entry says what to do)."""
    periods: int = 1
    threshold: str = "0"
    """Zero, or where the threshold comes from (a parameter, a constant)."""
    grouped_by: str = ""
    """A Metrics Insights alarm's GROUP BY dimension (``job``, ``task``): what names the entity
    in its notification. Empty: a standard alarm."""
    gauge: bool = False
    """A state only some periods report: a period without data keeps the last state instead of
    reading as zero (and sending a false OK)."""
    declared_when: str = ""
    """Empty when every copy of its scope has it; else the condition."""
    missing_breaches: bool = False
    """A metric emitted on every pass (zero too): a period without data means the pass did not
    run, and alarms like a finding."""


def _dlq(scope: AlarmScope, queue: str, meaning: str, minutes: int = 5) -> AlarmSpec:
    return AlarmSpec(
        scope,
        f"AWS/SQS ApproximateNumberOfMessagesVisible of {queue}",
        "Maximum",
        minutes,
        meaning,
    )


def _insights(
    scope: AlarmScope, metric: JobMetric | TaskMetric, meaning: str, declared_when: str = ""
) -> AlarmSpec:
    return AlarmSpec(
        scope,
        metric,
        "Sum",
        5,
        meaning,
        grouped_by="job" if scope is AlarmScope.JOBS else "task",
        declared_when=declared_when,
    )


ALARMS: dict[Alarm, AlarmSpec] = {
    Alarm.JOB_FAILED_RUNS: _dlq(
        AlarmScope.JOB,
        "the job's FailedRuns queue",
        "Runs failed after all of Lambda's retries; their events wait in the dead-letter queue.",
    ),
    Alarm.JOB_UNDELIVERED: _dlq(
        AlarmScope.JOBS_CONTROL,
        "the stack's JobsUndelivered queue (every job's schedule sends there)",
        "EventBridge Scheduler could not invoke a job's function at all (each message's input "
        "names the job; the never-delivered audit names it too once the tick is missed).",
    ),
    Alarm.JOB_MISSED_TICKS: _insights(
        AlarmScope.JOBS,
        JobMetric.MISSED,
        "Ticks arrived later than max_lateness and were recorded MISSED without running.",
    ),
    Alarm.JOB_NEVER_DELIVERED: _insights(
        AlarmScope.JOBS,
        JobMetric.NEVER_DELIVERED,
        "The audit found expected ticks that never arrived and recorded them MISSED.",
    ),
    Alarm.JOB_FINISH_UNRECORDED: _insights(
        AlarmScope.JOBS,
        JobMetric.FINISH_UNRECORDED,
        "A run ended but its outcome could not be written before the invocation's time ran out.",
    ),
    Alarm.JOB_UNCERTAIN: _insights(
        AlarmScope.JOBS,
        JobMetric.UNCERTAIN,
        "A tick stopped UNCERTAIN on an effect an earlier run began and never recorded done.",
    ),
    Alarm.JOB_TOO_LONG: _insights(
        AlarmScope.JOBS,
        JobMetric.TOO_LONG,
        "A run took longer than the job's max_duration.",
        declared_when="a job sets max_duration",
    ),
    Alarm.JOB_TOO_SHORT: _insights(
        AlarmScope.JOBS,
        JobMetric.TOO_SHORT,
        "A run finished in less than the job's min_duration.",
        declared_when="a job sets min_duration",
    ),
    Alarm.TASK_QUEUE: AlarmSpec(
        AlarmScope.TASK,
        "AWS/SQS ApproximateAgeOfOldestMessage of the task's queue, and "
        "ApproximateNumberOfMessagesVisible of its DeadLetters queue",
        "Maximum",
        5,
        "A message has waited longer than the task's max_queue_age, or messages wait in its "
        "dead-letter queue (out of retries, malformed, or an invocation that kept dying).",
        threshold="the task's max_queue_age, in seconds (the queue); 0 (the dead letters)",
    ),
    Alarm.TASK_FAILED: _insights(
        AlarmScope.TASKS,
        TaskMetric.FAILED,
        "Tasks are FAILED after all their retries.",
    ),
    Alarm.TASK_FINISH_UNRECORDED: _insights(
        AlarmScope.TASKS,
        TaskMetric.FINISH_UNRECORDED,
        "A run ended but its outcome could not be written before the invocation's time ran out.",
    ),
    Alarm.TASK_UNCERTAIN: _insights(
        AlarmScope.TASKS,
        TaskMetric.UNCERTAIN,
        "A task stopped UNCERTAIN on an effect an earlier attempt began and never recorded done.",
    ),
    Alarm.TASK_EVENT_UNSENT: _insights(
        AlarmScope.TASKS,
        TaskMetric.EVENT_UNSENT,
        "Completion events EventBridge did not take in time: subscribers missed these outcomes.",
        declared_when='a task\'s completion_events is not "none"',
    ),
    Alarm.FLOW_COMPENSATION_FAILED: _insights(
        AlarmScope.TASKS,
        TaskMetric.COMPENSATION_FAILED,
        "A failed flow's compensation raised: what it undid is partial, the flow is FAILED.",
    ),
    Alarm.TASK_STUCK: AlarmSpec(
        AlarmScope.TASKS,
        TaskMetric.STUCK,
        "Sum",
        # Three audit passes: a period always holds one, so a stuck task's alarm does not flap
        # with the passes' jitter against 5-minute periods.
        15,
        "A task (a flow) has not ended past its max_duration: the tasks audit names each.",
        grouped_by="task",
        declared_when="a task sets max_duration",
    ),
    Alarm.TASKS_STRANDED: AlarmSpec(
        AlarmScope.TASKS_AUDIT,
        TaskMetric.STRANDED,
        "Maximum",
        15,
        "A task waits for a retry no message holds any more, or the audit that looks has not run.",
        missing_breaches=True,
        declared_when="the stack has tasks",
    ),
    Alarm.JOBS_AUDIT_UNDELIVERED: _dlq(
        AlarmScope.JOBS_CONTROL,
        "the jobs control's AuditUndelivered queue",
        "The never-delivered audit could not run: missing ticks are not being detected.",
    ),
    Alarm.OBSERVERS_DLQ: _dlq(
        AlarmScope.FLEET,
        "the fleet's ObserversDlq",
        "An observer gave up (FAILED): one message per observer, with its reason.",
        minutes=1,
    ),
    Alarm.EVENTS_DLQ: _dlq(
        AlarmScope.FLEET,
        "the fleet's EventsDlq",
        "EventBridge could not deliver ECS task events or resync ticks to the reconciler.",
        minutes=1,
    ),
    Alarm.STREAM_DLQ: _dlq(
        AlarmScope.FLEET,
        "the fleet's StreamDlq",
        "Registry changes the reconciler failed on after its retries, left unhandled.",
        minutes=1,
    ),
    Alarm.RECONCILER_FAILURES: _dlq(
        AlarmScope.FLEET,
        "the fleet's ReconcilerFailures queue",
        "ECS events or resync ticks the reconciler failed on after Lambda's retries.",
        minutes=1,
    ),
    Alarm.OBSERVERS_FAILED: AlarmSpec(
        AlarmScope.FLEET,
        ObserverMetric.FAILED,
        "Sum",
        5,
        "An observer gave up: it crashed failure_threshold times in a row and is FAILED.",
    ),
    Alarm.OBSERVERS_IN_FAILED: AlarmSpec(
        AlarmScope.FLEET,
        ObserverMetric.FLEET_FAILED,
        "Maximum",
        1,
        "At least one observer is FAILED and stays so until someone restarts it.",
        gauge=True,
    ),
    Alarm.FLEET_SHORTFALL: AlarmSpec(
        AlarmScope.FLEET,
        "FleetDesiredRunning - FleetRunning - FleetHandingOver",
        "Maximum",
        1,
        "Fewer observers run than are desired, beyond planned hand-overs.",
        periods=SHORTFALL_MINUTES,
        gauge=True,
    ),
    Alarm.RESYNC_SKIPPED: AlarmSpec(
        AlarmScope.FLEET,
        ObserverMetric.RESYNC_SKIPPED,
        "Sum",
        1,
        "The minute resync keeps finding its lease held, so it does not run.",
        periods=STUCK_PASSES,
    ),
    Alarm.OBSERVER_ERRORS: AlarmSpec(
        AlarmScope.FLEET,
        ObserverMetric.PASS_ERRORS,
        "Sum",
        1,
        "The resync keeps skipping observers after AWS errors of their own, or registry items "
        "no writer of Vigil's makes.",
        periods=STUCK_PASSES,
    ),
    Alarm.STOP_NOT_COMPLETED: AlarmSpec(
        AlarmScope.FLEET,
        ObserverMetric.STOP_FAILED,
        "Sum",
        1,
        "An observer asked to stop still runs (and bills): StopTask keeps failing.",
        periods=STUCK_PASSES,
    ),
    Alarm.HEARTBEAT_STALE: AlarmSpec(
        AlarmScope.FLEET,
        ObserverMetric.HEARTBEAT_STALE,
        "Sum",
        1,
        "RUNNING observers' heartbeats are stale and the reconciler cannot replace them.",
        periods=STUCK_PASSES,
    ),
    Alarm.RECONCILER_ERRORS: AlarmSpec(
        AlarmScope.FLEET,
        "AWS/Lambda Errors of the reconciler function",
        "Sum",
        5,
        "The reconciler function raised errors.",
    ),
    Alarm.STREAM_BEHIND: AlarmSpec(
        AlarmScope.FLEET,
        "AWS/Lambda IteratorAge of the reconciler function (its registry stream)",
        "Maximum",
        1,
        "The reconciler has fallen behind the registry stream: creates, stops and restarts wait.",
        periods=STUCK_PASSES,
        threshold=f"{STREAM_BEHIND_MINUTES} minutes (in milliseconds)",
    ),
    Alarm.API_5XX: AlarmSpec(
        AlarmScope.FLEET,
        "AWS/ApiGateway 5XXError of the management API",
        "Sum",
        5,
        "The management API answered server errors.",
    ),
    Alarm.HOST_LOST: AlarmSpec(
        AlarmScope.POOLED_KIND,
        ObserverMetric.HOST_LOST,
        "Sum",
        5,
        "A host of the kind was LOST; its observers were moved to other hosts.",
    ),
    Alarm.HOSTS_STUCK_STARTING: AlarmSpec(
        AlarmScope.POOLED_KIND,
        ObserverMetric.HOSTS_STUCK_STARTING,
        "Maximum",
        1,
        "Hosts of the kind have been STARTING longer than the start timeout; observers wait.",
        gauge=True,
    ),
    Alarm.OBSERVER_UNCERTAIN: AlarmSpec(
        AlarmScope.KIND,
        ObserverMetric.UNCERTAIN,
        "Sum",
        5,
        "An observer of the kind stopped UNCERTAIN on an effect (ctx.once) an earlier generation "
        "began and never recorded done; it is FAILED, not restarted, until a person settles the "
        "effect (vigil observers settle).",
    ),
}
"""Every alarm, in the order the reference and the runbooks list them."""


def runbook_link(alarm: Alarm) -> str:
    """The alarm's runbook entry, the last words of its description."""
    return f"{RUNBOOKS}#{alarm.value}"
