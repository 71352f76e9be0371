"""The tasks' shared names: what ``BackgroundTask`` (infra) writes into the environment, the task
records' keys, the queue message's envelope and the completion events, read by the runtime
(``vigil.tasks``), the CLI, the kit and the emulator.

A task is work an application enqueues (``vigil.tasks.enqueue``) and a Lambda function runs once
per key from an SQS queue. Its record lives in the stack's tasks table::

    pk = "TASK#<task>"   sk = "<id>"   (one item per task: enqueue, claim and finish each write it once)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

TASK_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
"""A task's name (``send-receipt``): the construct id in kebab case unless given."""
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@#=+-]{0,127}$")
"""A task's id (its key): printable, no spaces, at most 128 characters (it is a sort key, an SQS
deduplication id's source and a schedule name's source). No ``/``: the id is one segment of its
API path (``/tasks/{task}/{id}``), and an encoded ``%2F`` is not kept alike by every proxy; the
other characters a URL must encode (``#``, ``:``, ``@``...) come percent-encoded and are decoded."""
TASK_ID_CHARACTERS = "letters, digits and _.:@#=+- (no '/': the id is a segment of its API path)"
GROUP = re.compile(r"^[A-Za-z0-9_.:@#=+/-]{1,128}$")
"""An ordered task's group (SQS ``MessageGroupId``'s alphabet)."""

PK_PREFIX = "TASK#"
"""The partition of a task's records; ``dynamodb:LeadingKeys`` confines each task's function to
its own."""

ENVELOPE_KEY = "vigil_task"
"""The queue message body is ``{"vigil_task": {...}}``: see :class:`EnvelopeField`."""
ENVELOPE_VERSION = 1


class EnvelopeField(StrEnum):
    """The fields of a task message's envelope."""

    VERSION = "v"
    TASK = "task"
    ID = "id"
    PAYLOAD = "payload"
    ENQUEUED_AT = "enqueued_at"
    """ISO 8601 UTC, when ``enqueue`` was called."""
    DUE_AT = "due_at"
    """ISO 8601 UTC, when the task was asked to run (``delay`` / ``at``); absent: at once."""
    GROUP = "group"
    REDRIVEN = "redriven"
    """True on a message an operator moved back from the dead-letter queue."""
    WAKE = "wake"
    """A signal's wake-up of a WAITING flow: the name of the wait it answers (the claim takes a
    WAITING record before its timeout only for the wait it is waiting on)."""
    REDRIVE_ID = "redrive_id"
    """The redrive operation that moved it back (one id per ``vigil tasks redrive``): a
    redrive takes a FAILED record once; a copy of its message meeting FAILED again (its run
    failed, and the message came back) is a DUPLICATE, not a second budget."""
    PRIORITY = "priority"
    """The declared priority level it was enqueued at (absent: normal): a redrive sends it back
    to that level's queue."""
    PARENT = "parent"
    """A map's child (``run.map``): ``{"task", "id", "map"}`` of the flow that enqueued it; its
    final outcome is counted on that map's journal item (:mod:`vigil.tasks.flows.fanout`)."""
    REQUEST = "request"
    """The digest of the request enqueued under a caller's key (the API's ``Idempotency-Key``),
    also kept on the record: a message of another request under the same key (two requests
    raced past the record's check) never runs, it is a DUPLICATE."""


class TaskStatus(StrEnum):
    QUEUED = "QUEUED"
    """Enqueued (or waiting for its retry after a failed attempt: ``attempts`` > 0)."""
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    """Out of retries, or a message that could not be a task: it is in the dead-letter queue."""
    CANCELLED = "CANCELLED"
    UNCERTAIN = "UNCERTAIN"
    """Stopped on an effect (``run.once``) an earlier attempt began and never recorded done: not
    retried, alarmed, for a person to settle (``vigil tasks settle``)."""
    SLEEPING = "SLEEPING"
    """A flow between invocations (``run.sleep``): its wake-up is sent, due at ``wake_at``."""
    WAITING = "WAITING"
    """A flow waiting for a signal (``run.wait_for``) until ``wake_at`` (its timeout)."""
    COMPENSATED = "COMPENSATED"
    """A flow that failed, with the compensations of its finished steps run in reverse."""


RETRIES_INDEX = "retries"
"""The tasks table's sparse index of the records waiting for a retry: ``pk`` and ``retry_at``
(keys only). A record is in it only between the finish that sets its retry and the claim that
takes it, so the clean path never writes it; the stranded-tasks audit reads it."""
RETRY_AT_ATTRIBUTE = "retry_at"
DEADLINES_INDEX = "deadlines"
"""The tasks table's sparse index of the records of tasks that declare ``max_duration``, while
they have not ended: ``pk`` and ``deadline`` (keys only). The first claim writes ``deadline``
(its start + ``max_duration``; kept through retries, takeovers and a flow's sleeps), a final
finish removes it; the tasks audit reads ``deadline < now``: what is stuck, and nothing else."""
DEADLINE_ATTRIBUTE = "deadline"
AUDIT_EVERY_SECONDS = 300
"""The tasks audit's period (its schedule's rate), and so the least ``max_duration``."""
AUDIT_EVENT_KEY = "vigil-tasks-audit"
"""The tasks API function's input from its audit schedule (``{"vigil-tasks-audit": true}``)."""

REQUEST_ATTRIBUTE = EnvelopeField.REQUEST.value
"""The task record's copy of the request digest (:attr:`EnvelopeField.REQUEST`): the same key
with another request is refused (``KeyReused``, 422), not taken for a retry."""

REDRIVES_ATTRIBUTE = "redrives"
"""The task record's string set of the redrive operations (:attr:`EnvelopeField.REDRIVE_ID`)
whose messages took it: each gives the task its retries afresh once, however often its message
comes back."""

OUTBOX_ATTRIBUTE = "event_id"
"""On a final record whose outcome is announced: the completion event's id (``detail.event_id``),
written by the finish itself. The event is built from the record alone, so the delivery that
finished the task and any later re-send (its message back: the invocation died before
PutEvents) send the very same event."""
FINISHED_BY_ATTRIBUTE = "finished_by"
"""The message whose run wrote the final outcome: only its redelivery re-sends the event."""

RESULT_REF_ATTRIBUTE = "result_ref"
"""A result too big to keep on the record (over ``RESULT_INLINE_BYTES``): where it is stored
(``s3://bucket/key``), read back by ``get`` (the API, the CLI) and carried by the event."""

CANCEL_REQUESTED_ATTRIBUTE = "cancel_requested_at"
"""On a RUNNING record: when someone asked to cancel it (ISO 8601 UTC). The run learns it at its
next ``run.progress``, ``run.once`` intent or strict fenced write (``TaskCancelled``), a flow at its
next step boundary; a run that fails or is stopped by it ends CANCELLED, neither retried nor
dead-lettered. Kept on the final record, for the audit."""
CANCEL_REQUESTED_BY_ATTRIBUTE = "cancel_requested_by"
"""Who asked (an IAM ARN from the API, the caller's name from the library or CLI)."""

FINAL_STATUSES = frozenset(
    {
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
        TaskStatus.CANCELLED,
        TaskStatus.UNCERTAIN,
        TaskStatus.COMPENSATED,
    }
)
SUSPENDED_STATUSES = frozenset({TaskStatus.SLEEPING, TaskStatus.WAITING})
"""A flow between invocations: no run holds it, its wake-up (a delayed message or a one-time
schedule) is sent, and a signal or a cancel may wake it earlier (:mod:`vigil.contract.flows`)."""


class TaskEnv(StrEnum):
    """The environment ``BackgroundTask`` gives its function."""

    NAME = "VIGIL_TASK_NAME"
    TABLE = "VIGIL_TASKS_TABLE"
    QUEUE_URL = "VIGIL_TASK_QUEUE_URL"
    DEAD_LETTER_URL = "VIGIL_TASK_DEAD_LETTER_URL"
    RETRIES = "VIGIL_TASK_RETRIES"
    BACKOFF_SECONDS = "VIGIL_TASK_BACKOFF_SECONDS"
    """The first retry's delay; each next one doubles, capped just under SQS's 12 hours
    (``vigil.tasks.settings.MAX_BACKOFF``)."""
    ORDERED = "VIGIL_TASK_ORDERED"
    RETENTION_SECONDS = "VIGIL_TASK_RETENTION_SECONDS"
    """How long a record (and so a key's once-only promise) is kept after its last write."""
    LEASE_MARGIN_SECONDS = "VIGIL_TASK_LEASE_MARGIN_SECONDS"
    EVENT_BUS = "VIGIL_EVENT_BUS"
    RESULTS_BUCKET = "VIGIL_TASK_RESULTS_BUCKET"
    """The stack's results bucket: a result over ``RESULT_INLINE_BYTES`` is stored there, the
    record keeps its location (unset: every result stays on the record)."""
    RATE_LIMIT = "VIGIL_TASK_RATE_LIMIT"
    """``BackgroundTask(rate_limit=)`` as written (``100/minute``): unset, no limit."""
    SCHEDULER_ROLE_ARN = "VIGIL_TASK_SCHEDULER_ROLE_ARN"
    """The role a flow's one-time schedule (a sleep beyond SQS's 15-minute delay) sends with."""
    SCHEDULE_GROUP = "VIGIL_TASK_SCHEDULE_GROUP"
    PRIORITY_QUEUE_URLS = "VIGIL_TASK_PRIORITY_QUEUE_URLS"
    """``{level: queue URL}`` as JSON, for a task declared with ``priorities``: the guard sets a
    message's visibility on the queue it came from (unset: the task has one queue)."""
    MAX_DURATION_SECONDS = "VIGIL_TASK_MAX_DURATION_SECONDS"
    """``BackgroundTask(max_duration=)``: the first claim writes the record's ``deadline``
    (unset: none, and the task is never found stuck)."""
    COMPLETION_EVENTS = "VIGIL_TASK_COMPLETION_EVENTS"
    """Which outcomes send a completion event (:class:`CompletionEvents`). The function's own
    copy of the catalog's ``completion_events``: the function cannot read ``TasksCatalog``,
    which names the function itself (a circular reference in the template)."""


CATALOG_ENV = "VIGIL_TASKS_CATALOG"
"""An application's environment: the stack's ``TasksCatalog`` output (JSON), which tells
``enqueue`` each task's queue, table and scheduler role without any other lookup."""


class CatalogField(StrEnum):
    """Per task in ``TasksCatalog``."""

    QUEUE_URL = "queue_url"
    DEAD_LETTER_URL = "dead_letter_url"
    TABLE = "table"
    ORDERED = "ordered"
    RETENTION_SECONDS = "retention_seconds"
    SCHEDULER_ROLE_ARN = "scheduler_role_arn"
    """The role a one-time schedule (``at`` beyond SQS's 15-minute delay) sends the message with."""
    SCHEDULE_GROUP = "schedule_group"
    FUNCTION = "function"
    COMPLETION_EVENTS = "completion_events"
    """Which outcomes the task announces on EventBridge (:class:`CompletionEvents`): what an
    application's rule can expect to hear."""
    VISIBILITY_TIMEOUT_SECONDS = "visibility_timeout_seconds"
    """The queue's visibility timeout: how late a retry's message may come back when setting
    its backoff failed (the stranded-tasks audit's bound)."""
    MAX_QUEUE_AGE_SECONDS = "max_queue_age_seconds"
    """How long a message may wait before the queue-age alarm: the rest of the audit's bound."""
    MAX_DURATION_SECONDS = "max_duration_seconds"
    """``BackgroundTask(max_duration=)`` (absent: none): the tasks audit looks for this task's
    records not ended past their deadline (``DEADLINES_INDEX``)."""
    PRIORITY_QUEUE_URLS = "priority_queue_urls"
    """``{level: queue URL}``: the task's declared priority levels, each its own queue (absent
    or empty: no levels; ``enqueue(priority=...)`` is refused)."""


PRIORITY_LEVEL = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
"""A declared priority level's name (it names a queue: short, lower case)."""
NORMAL_PRIORITY = "normal"
"""The level of the task's own queue: ``priority="normal"`` is the same as none."""


MAX_QUEUE_DELAY_S = 900
"""SQS's longest per-message delay; a later start goes through a one-time schedule."""
MAX_MESSAGE_BYTES = 262_144
"""SQS's largest message (256 KiB): a bigger envelope is refused by ``enqueue``."""
MAX_RESULT_BYTES = 65_536
"""The largest result a task may return (JSON); a bigger one fails the run, plainly."""
RESULT_INLINE_BYTES = 4_096
"""The largest result kept on the record itself; a bigger one goes to the stack's results bucket
and the record keeps where (``result_ref``). A record over 1 KB costs a write unit per KB at the
finish and again at every refused claim after it (a duplicate), each $0.625 per million; an S3
PUT costs $5 per million, as much as 8. At 4 KiB the finish alone costs 5 write units and each
later duplicate 5 more: past it, the bucket is the cheaper place, and the record stays ~1 KB."""

RECEIVES_THAT_RUN_NOTHING = 10
"""Room in a task queue's redrive policy for receives that run nothing: a message deferred near
a batch's deadline, one that met a live lease (BUSY), a batch Lambda returned for a throttle.
AWS asks for a ``maxReceiveCount`` of at least 5 on a Lambda event source for the throttles
alone."""


def max_receive_count(retries: int, group_batch: int = 1) -> int:
    """The task queue's redrive policy (``BackgroundTask``): the runtime counts a task's attempts
    on its record, not by SQS's receives, and dead-letters it itself with the reason after its
    ``retries + 1`` runs, or on the next receive (``RunCrashed``) when those runs died whole. SQS's
    own move is only the net for a message the function cannot even claim (it fails to start),
    so it must never come first for a task still in its budget.

    ``group_batch``: an ordered task's batch size. Its batch skips a group's later messages
    whenever an earlier one is kept, and each skip is a receive, so a message may be received
    for each of the (up to ``group_batch - 1``) messages ahead of it in its batch as often as
    they may be kept, before its own budget (at most 1000, SQS's largest, for retries <= 10)."""
    return group_batch * (retries + 2 + RECEIVES_THAT_RUN_NOTHING)


SCHEDULE_GROUP = "vigil-tasks"
"""The EventBridge Scheduler group of one-time schedules (``at`` beyond 15 minutes)."""
MAX_SCHEDULE_NAME = 64
"""EventBridge Scheduler's longest schedule name (``CreateSchedule``'s ``Name``: 1 to 64 of
``[0-9a-zA-Z-_.]``; a group's name has the same limits, and an account has at most 500 groups,
so tasks share the stack's group rather than having one each)."""
SCHEDULE_NAME_DELIMITER = "_"
"""Opens and closes the task's part of a one-time schedule's name (``_send-receipt_<digest>``).
Scheduler's alphabet has it and a task's name (:data:`TASK_NAME`) cannot, so one task's names
(``_<task>_*``, what ``grant_tasks`` grants) never start another task's: a role allowed to
enqueue ``a`` cannot create (squat) a schedule name of ``a-b``. Leading too, because a legacy
name's pattern (:func:`legacy_schedule_name_pattern`, still granted for deleting) fixes its
first characters to a task's: a name starting with the delimiter can never match one, whereas
``<task>_<digest>`` of a 24-character task does match the legacy pattern of its first 23."""
LEGACY_SCHEDULE_DIGEST = 40
"""Names before the delimiter were ``<task[:23]>-<40 hex digits>``: a task sharing its first 23
characters with another (or any task that is a prefix of another's name plus a dash) shared
their names' prefix, and so their grants. A pending schedule may still carry such a name:
``cancel`` deletes it too."""
LEGACY_SCHEDULE_TASK_CHARACTERS = 23


def schedule_name_prefix(task: str) -> str:
    """What every one-time schedule name of ``task`` starts with, and no other task's does."""
    return f"{SCHEDULE_NAME_DELIMITER}{task}{SCHEDULE_NAME_DELIMITER}"


def legacy_schedule_name_pattern(task: str) -> str:
    """The IAM pattern of ``task``'s legacy names: ``?`` matches one character, so the pattern
    has the names' exact length and covers another task's legacy names only when both share
    their first 23 characters (those names cannot be told apart by their shape), never a current
    name (which starts with the delimiter, never a task's character)."""
    return f"{task[:LEGACY_SCHEDULE_TASK_CHARACTERS]}-" + "?" * LEGACY_SCHEDULE_DIGEST


def schedule_grants(task: str, *, manage: bool) -> dict[str, tuple[str, ...]]:
    """The schedule names (IAM patterns within the stack's tasks group) a role that may enqueue
    ``task`` is granted, per Scheduler action: what ``enqueue`` creates, and with ``manage`` what
    ``cancel`` deletes (the legacy names too, see :data:`LEGACY_SCHEDULE_DIGEST`). Nothing is
    created under a legacy name any more, so none is granted for creating."""
    current = f"{schedule_name_prefix(task)}*"
    grants: dict[str, tuple[str, ...]] = {"scheduler:CreateSchedule": (current,)}
    if manage:
        grants["scheduler:DeleteSchedule"] = (current, legacy_schedule_name_pattern(task))
    return grants


REASON_ATTRIBUTE = "vigil_reason"
"""The string message attribute that says why a message is in a task's dead-letter queue."""

EVENT_SOURCE = "vigil"


class TaskEventType(StrEnum):
    """The completion events' ``detail-type`` on EventBridge."""

    SUCCEEDED = "Vigil Task Succeeded"
    FAILED = "Vigil Task Failed"
    CANCELLED = "Vigil Task Cancelled"
    """A run stopped by a cancel requested while it ran (a QUEUED task's cancel sends none: its
    caller is the one who asked)."""


class CompletionEvents(StrEnum):
    """Which of a task's outcomes send a completion event, chosen per task at the construct.

    An event is a PutEvents entry, $1.00 per million: as much as the task's three write units
    cost together, for every task, whether anyone listens or not. The record always has the
    outcome (``GET /tasks/{task}/{id}``); the event only tells a subscriber of it.
    """

    ALL = "all"
    """Succeeded, failed and cancelled while running: an application subscribes to successes (a
    rule on ``Vigil Task Succeeded``)."""
    FAILURES = "failures"
    """Failed only: what needs acting on (the default; the failed alarm tells operators too)."""
    NONE = "none"
    """No events (and no ``events:PutEvents`` grant): results are read from the records."""

    def announces(self, status: TaskStatus) -> bool:
        """Whether a task that ended ``status`` sends its completion event."""
        if self is CompletionEvents.ALL:
            return status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED)
        return self is CompletionEvents.FAILURES and status is TaskStatus.FAILED


DEFAULT_COMPLETION_EVENTS = CompletionEvents.FAILURES
"""A million tasks a day that nobody subscribes to the successes of should not pay $1 a day
for them: successes are announced when a task asks for ``"all"``."""


RATE_PK_PREFIX = "RATE#"
"""The partition of a rate-limited task's limiter (``RATE#<task>``): its pacing item and its
messages' reservations, in the tasks table beside (never among) the task's records."""
RATE_PERIODS = {"second": 1, "minute": 60, "hour": 3_600, "s": 1, "m": 60, "h": 3_600}
"""``rate_limit``'s units (Celery's ``100/m`` too)."""
RATE_LIMIT = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+)\s*$")
MAX_RATE_PER_SECOND = 250
"""The most starts a second a limiter paces: its items share one partition, which takes 1,000
writes a second, and a start deferred under a backlog costs four (a refused move, the
reservation's move and item, its take)."""


@dataclass(frozen=True)
class RateLimit:
    """At most ``starts`` a ``period_s``, across every concurrent invocation of the task."""

    starts: int
    period_s: int

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"100/minute"`` (or ``second``, ``hour``, plurals, ``s``/``m``/``h``); ValueError
        saying what is accepted."""
        match = RATE_LIMIT.match(text) if isinstance(text, str) else None
        unit = match.group(2) if match else ""
        plural = len(unit) > 2 and unit.endswith("s")
        period = RATE_PERIODS.get(unit) or (RATE_PERIODS.get(unit[:-1]) if plural else None)
        if not match or period is None or int(match.group(1)) < 1:
            raise ValueError(
                f"{text!r} is not a rate: write N/second, N/minute or N/hour (N at least 1; "
                "also N/s, N/m, N/h)"
            )
        starts = int(match.group(1))
        if starts > MAX_RATE_PER_SECOND * period:
            raise ValueError(
                f"{text!r} is over {MAX_RATE_PER_SECOND} starts a second, what one DynamoDB "
                "partition (1,000 writes a second) paces under a backlog"
            )
        return cls(starts, period)

    def __str__(self) -> str:
        unit = {1: "second", 60: "minute", 3_600: "hour"}[self.period_s]
        return f"{self.starts}/{unit}"
