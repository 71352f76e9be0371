"""``BackgroundTask``: a queue an application enqueues to, the guarded function that runs each task
once per key, its dead-letter queue, its grants and the role of its one-time schedules.

The runtime (``vigil.tasks``) reads everything it needs from the environment (``TaskEnv``) and the
stack's ``TasksCatalog`` output (``CatalogField``); the names are shared in ``vigil.contract.tasks``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.catalogs import Entry, Filled, grant_read_catalog
from infra.errors import ConfigurationError
from infra.function import SharedLogs, check_function, vigil_function, whole_seconds
from infra.layout import Layout
from infra.queues import (
    DLQ_RETENTION_DAYS,
    check_retention,
    dead_letter_queue,
    tls_only_policy,
    vigil_queue,
)
from infra.quotas import QUEUE_URL, REGION, role_arn
from infra.removal import FIXED_NAME_REMOVAL
from infra.roles import InlineRole
from infra.scheduled_job import default_name
from infra.stage import stage_of
from infra.task_results import results_of
from infra.tasks_table import TasksTable
from infra.writes import Declared, check_writes, grant_writes, writes_environment
from vigil.contract.flows import journal_pk_pattern
from vigil.contract.layout import (
    CONSTRUCT_FIELD,
    STACK_ENV,
    Catalogued,
    Entity,
    catalog_path,
    task_schedule_role_path,
)
from vigil.contract.metrics import NAMESPACE, TaskMetric, dimensions
from vigil.contract.stages import tasks_schedule_group
from vigil.contract.tasks import (
    AUDIT_EVERY_SECONDS,
    DEFAULT_COMPLETION_EVENTS,
    NORMAL_PRIORITY,
    PK_PREFIX,
    PRIORITY_LEVEL,
    RATE_PK_PREFIX,
    TASK_NAME,
    CatalogField,
    CompletionEvents,
    RateLimit,
    TaskEnv,
    max_receive_count,
    schedule_grants,
)

VISIBILITY_PER_TIMEOUT = 6
"""AWS asks for a queue visibility timeout of at least six times the function's timeout."""
MAX_VISIBILITY_S = 43_200
"""SQS's longest visibility timeout (12 hours); also the longest ChangeMessageVisibility."""
MAX_BATCHING_WINDOW_S = 300
QUEUE_RETENTION = Duration.days(DLQ_RETENTION_DAYS)
"""A backlog capped by ``concurrency`` must not expire: a task waits as long as SQS allows."""
MAX_DURATION_DAYS = 365
"""A year: longer than any record's retention is meant to span (a flow's sleeps renew it)."""
DEFAULT_EVENT_BUS = "default"
SCHEDULER = "scheduler.amazonaws.com"


@dataclass(frozen=True)
class _Checked:
    name: str
    visibility_timeout: int
    batching_window: int
    completion_events: CompletionEvents
    writes: tuple[Declared, ...] = ()
    rate_limit: RateLimit | None = None
    priorities: tuple[str, ...] = ()
    max_duration: int | None = None


class BackgroundTask(Construct):
    """Work an application enqueues (``vigil.tasks.enqueue``), run once per key by ``handler``.

    Args:
        handler: ``module.function`` under ``functions/``; checked at synth without importing it.
        timeout: the function's timeout; the queue's visibility timeout follows from it.
        retries: the runtime's own retries after a failed attempt, ``backoff`` apart and
            doubling; then the task is FAILED and its message dead-lettered.
        backoff: the wait before the first retry (doubling after each).
        concurrency: caps the parallel runs (the event source's maximum concurrency).
        batch_size: messages per invocation (at most 10 for an ordered task; over 10 needs a
            ``batching_window``).
        batching_window: how long the event source gathers a batch (0-300 s; none for an
            ordered task).
        visibility_timeout: the queue's visibility timeout (default and least: 6 x ``timeout``
            plus the batching window, AWS's rule for a Lambda event source).
        ordered: a FIFO queue: tasks of one group run one at a time, in order (no per-message
            delay; batch size at most 10).
        retention: how long a record, and so a key's once-only promise, is kept after its last
            write.
        memory_size: the function's memory, in MB.
        lease_margin: added to the invocation's deadline to make a run's lease (at least 1 s, the
            worst clock skew, and below ``timeout``).
        max_queue_age: a message older than this (at least 60 s) alarms: the function fails, is
            throttled or cannot keep up.
        max_duration: a task (a flow, most often) not ended this long after its first start
            alarms, and the tasks audit names it (at least 5 minutes, the audit's period; whole
            seconds). Retries, takeovers and a flow's sleeps and waits all count. None: never.
        completion_events: which outcomes are announced on EventBridge (``CompletionEvents``):
            ``"failures"`` by default, ``"all"`` when an application subscribes to successes,
            ``"none"`` when results are only read from the records; each event costs as much as
            the task's writes.
        task_name: the key of the task's records, metrics and grants (default: the construct id
            in kebab case).
        description: the function's description (default: the task's name).
        tasks_table: the stack's tasks table (default: one shared by the stack's tasks).
        writes: the tables, buckets, queues and buses the task writes through ``run.fenced``
            (granted exactly: :mod:`infra.writes`).
        rate_limit: at most so many starts a period across every concurrent invocation
            (``"100/minute"``; ``second``, ``minute`` or ``hour``): a message over it waits in
            the queue for its slot, spending no attempt (:mod:`vigil.tasks.rate`).
        priorities: levels above normal (``("high",)``): each its own queue and event source
            on the same function, sharing the dead-letter queue, so ``enqueue(priority="high")``
            is polled apart from the normal backlog (2 resources a level; not for an ordered
            task). See the tasks guide for exactly what this guarantees.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: str,
        timeout: Duration = Duration.minutes(1),
        retries: int = 3,
        backoff: Duration = Duration.seconds(30),
        concurrency: int = 10,
        batch_size: int = 10,
        batching_window: Duration | None = None,
        visibility_timeout: Duration | None = None,
        ordered: bool = False,
        retention: Duration = Duration.days(30),
        memory_size: int = 256,
        lease_margin: Duration = Duration.seconds(10),
        max_queue_age: Duration = Duration.minutes(15),
        max_duration: Duration | None = None,
        completion_events: CompletionEvents | str = DEFAULT_COMPLETION_EVENTS,
        task_name: str | None = None,
        description: str | None = None,
        tasks_table: dynamodb.ITable | None = None,
        writes: Sequence[Any] = (),
        rate_limit: str | None = None,
        priorities: Sequence[str] = (),
    ) -> None:
        checked = _validate(
            construct_id=construct_id,
            task_name=task_name,
            handler=handler,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            concurrency=concurrency,
            batch_size=batch_size,
            batching_window=batching_window,
            visibility_timeout=visibility_timeout,
            ordered=ordered,
            retention=retention,
            memory_size=memory_size,
            lease_margin=lease_margin,
            max_queue_age=max_queue_age,
            max_duration=max_duration,
            completion_events=completion_events,
            writes=writes,
            rate_limit=rate_limit,
            priorities=priorities,
        )
        layout = Layout.of(scope)
        shard = layout.place(Entity.TASK, checked.name, f"BackgroundTask {construct_id!r}")
        super().__init__(shard, construct_id)
        self._vigil_layout = layout
        self.shard = shard
        self.task_name = checked.name
        self.stage = stage_of(self)
        """The stage its metrics are dimensioned by (read once: a call into the CDK's process)."""
        self.function_name = layout.function_name(Entity.TASK, checked.name)
        self.completion_events = checked.completion_events
        self.ordered = ordered
        self.retries = retries
        self.concurrency = concurrency
        self.rate_limit = checked.rate_limit
        self.retention_seconds = int(retention.to_seconds())
        self.max_queue_age_seconds = int(max_queue_age.to_seconds())
        self.max_duration_seconds = checked.max_duration
        """``max_duration`` in seconds (None: not declared): its records' deadline, audited."""
        self.visibility_timeout_seconds = checked.visibility_timeout
        self.table = tasks_table or _shared_tasks_table(self)
        self.dead_letters = dead_letter_queue(self, "DeadLetters", fifo=ordered, enforce_ssl=False)
        self.queue = vigil_queue(
            self,
            "Queue",
            fifo=ordered,
            enforce_ssl=False,
            retention_period=QUEUE_RETENTION,
            visibility_timeout=Duration.seconds(checked.visibility_timeout),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters,
                max_receive_count=max_receive_count(
                    retries, group_batch=batch_size if ordered else 1
                ),
            ),
        )
        self.priority_queues = {
            level: vigil_queue(
                self,
                _priority_queue_id(level),
                enforce_ssl=False,
                retention_period=QUEUE_RETENTION,
                visibility_timeout=Duration.seconds(checked.visibility_timeout),
                dead_letter_queue=sqs.DeadLetterQueue(
                    queue=self.dead_letters, max_receive_count=max_receive_count(retries)
                ),
            )
            for level in checked.priorities
        }
        """Each declared level's own queue (none for an ordered task, refused at synth)."""
        self.queues_policy = tls_only_policy(
            self,
            "QueuesPolicy",
            [self.queue, *self.priority_queues.values(), self.dead_letters],
        )
        """Both queues' one policy: TLS only, and the stack's tasks API may send (``allow_send``)."""
        self.function = vigil_function(
            self,
            "Function",
            handler=handler,
            description=description or f"Vigil task {checked.name}",
            timeout=timeout,
            memory_size=memory_size,
            shared_logs=SharedLogs(self.function_name, shard.log_group),
            environment={
                TaskEnv.NAME.value: checked.name,
                TaskEnv.TABLE.value: self.table.table_name,
                TaskEnv.QUEUE_URL.value: self.queue.queue_url,
                TaskEnv.DEAD_LETTER_URL.value: self.dead_letters.queue_url,
                TaskEnv.RETRIES.value: str(retries),
                TaskEnv.BACKOFF_SECONDS.value: str(int(backoff.to_seconds())),
                TaskEnv.ORDERED.value: "true" if ordered else "false",
                TaskEnv.RETENTION_SECONDS.value: str(self.retention_seconds),
                TaskEnv.LEASE_MARGIN_SECONDS.value: str(int(lease_margin.to_seconds())),
                TaskEnv.EVENT_BUS.value: DEFAULT_EVENT_BUS,
                TaskEnv.COMPLETION_EVENTS.value: self.completion_events.value,
                **self._max_duration_field(TaskEnv.MAX_DURATION_SECONDS, str),
                **(
                    {TaskEnv.RATE_LIMIT.value: str(checked.rate_limit)}
                    if checked.rate_limit
                    else {}
                ),
                **(
                    {
                        TaskEnv.PRIORITY_QUEUE_URLS.value: Stack.of(self).to_json_string(
                            {level: q.queue_url for level, q in self.priority_queues.items()}
                        )
                    }
                    if self.priority_queues
                    else {}
                ),
                **writes_environment(self, checked.writes),
            },
        )
        grant_writes(
            self.function,
            checked.writes,
            claims=self.table,
            claim_conditions=_leading_keys([self]),
        )
        # One event source per queue: each level's pollers and maximum concurrency are its own,
        # so a normal backlog neither delays a level's polls nor holds its concurrency.
        for queue in (self.queue, *self.priority_queues.values()):
            self.function.add_event_source(
                event_sources.SqsEventSource(
                    queue,
                    batch_size=batch_size,
                    # FIFO event sources take no batching window at all.
                    max_batching_window=None
                    if ordered
                    else Duration.seconds(checked.batching_window),
                    max_concurrency=concurrency,
                    report_batch_item_failures=True,
                )
            )
        self._grant_function()
        self.results = results_of(self)
        self.results.serve(self.task_name, self.retention_seconds, self.function)
        self.schedule_group_name = _shared_schedule_group(self)
        self.scheduler_role = self._build_scheduler_role()
        self._grant_flows()

    # --- grants ------------------------------------------------------------------------------

    def _grant_function(self) -> None:
        """Its own records only; its own queue (the event source grants consuming it, with
        ChangeMessageVisibility for backoffs); its own dead-letter queue; completion events, unless
        it announces none."""
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                resources=[self.table.table_arn],
                conditions=_leading_keys([self]),
            )
        )
        if self.rate_limit is not None:
            # Its limiter's partition (pace and reservations): conditional updates only.
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:UpdateItem"],
                    resources=[self.table.table_arn],
                    conditions={
                        "ForAllValues:StringEquals": {
                            "dynamodb:LeadingKeys": [f"{RATE_PK_PREFIX}{self.task_name}"]
                        }
                    },
                )
            )
        self.dead_letters.grant_send_messages(self.function)
        if self.completion_events is CompletionEvents.NONE:
            return
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["events:PutEvents"],
                resources=[
                    Stack.of(self).format_arn(
                        service="events", resource="event-bus", resource_name=DEFAULT_EVENT_BUS
                    )
                ],
            )
        )

    def _grant_flows(self) -> None:
        """What a flow's steps need (:mod:`vigil.tasks.flows`): its journal partitions
        (``TASK#<task>/<id>``, read back by Query), its wake-ups (its own queue, and one-time
        schedules under its own names, sent with its scheduler role)."""
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:Query",
                ],
                resources=[self.table.table_arn],
                conditions=_journal_keys([self]),
            )
        )
        self.queue.grant_send_messages(self.function)
        stack = Stack.of(self)
        for action, names in schedule_grants(self.task_name, manage=False).items():
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=[action],
                    resources=[
                        stack.format_arn(
                            service="scheduler",
                            resource="schedule",
                            resource_name=f"{self.schedule_group_name}/{name}",
                        )
                        for name in names
                    ],
                )
            )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.scheduler_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": SCHEDULER}},
            )
        )
        self.function.add_environment(
            TaskEnv.SCHEDULER_ROLE_ARN.value, self.scheduler_role.role_arn
        )
        self.function.add_environment(TaskEnv.SCHEDULE_GROUP.value, self.schedule_group_name)

    def _build_scheduler_role(self) -> iam.Role:
        """What a one-time schedule (a start beyond SQS's 15-minute delay) sends its message as:
        this task's queue only, and only for schedules of this account."""
        stack = Stack.of(self)
        role = InlineRole(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                SCHEDULER,
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
            description=f"Vigil task {self.task_name}: one-time schedules send to its queue",
            # Under the stack's path of scheduler roles: the tasks API may pass those, and only
            # those, to Scheduler, whatever the number of tasks (one ARN pattern).
            path=task_schedule_role_path(Layout.of(self).stack_name, stack.region),
        )
        # The dead-letter queue too: a schedule that cannot send leaves the task there.
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["sqs:SendMessage"],
                resources=[q.queue_arn for q in self.work_queues] + [self.dead_letters.queue_arn],
            )
        )
        return role

    @property
    def work_queues(self) -> list[sqs.Queue]:
        """Its queue, then each priority level's: what enqueuers send to."""
        return [self.queue, *self.priority_queues.values()]

    def allow_send(self, principal: iam.IPrincipal) -> None:
        """Let ``principal`` (the stack's tasks API) send to this task's queue, through the
        queue's own policy: the principal's policy need not list every task's queue."""
        self.queues_policy.document.add_statements(
            iam.PolicyStatement(
                principals=[principal],
                actions=["sqs:SendMessage"],
                resources=[q.queue_arn for q in self.work_queues],
            )
        )

    def grant_enqueue(self, grantee: iam.IGrantable) -> None:
        """Let an application's role enqueue this task (``vigil.tasks.enqueue``,
        ``enqueue_many``) and nothing else."""
        grant_tasks(grantee, [self])

    def grant_read(self, grantee: iam.IGrantable) -> None:
        """Let an application's role read this task's records and results (``vigil.tasks.get``,
        ``wait``, a handle's ``.get()``/``.wait()``): GetItem on its records, Query on a flow's
        journal (its step timeline), GetObject under its results' prefix; nothing else."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem"],
                resources=[self.table.table_arn],
                conditions=_leading_keys([self]),
            )
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"],
                resources=[self.table.table_arn],
                conditions=_journal_keys([self]),
            )
        )
        self.results.grant_read(grantee, self.task_name)

    def map_to(self, *children: BackgroundTask) -> None:
        """Let this flow's ``run.map`` fan out to ``children``: its function enqueues them,
        reads their records and results (through the stack's tasks catalog) and cancels those
        that have not ended when the flow is cancelled, and each child's
        function, when a child ends, counts that end on this flow's map item (UpdateItem on this
        flow's journal partitions only) and the last one wakes the flow (SendMessage to its
        queue). The grants are attached from the top-level stack, so a flow and a child in two
        shards do not make the shards depend on each other."""
        if not children:
            raise ConfigurationError(self.task_name, "map_to", "name at least one child task")
        top = Layout.of(self).stack
        flow_role = self._imported_role(top, self)
        self.function.add_environment(STACK_ENV, Layout.of(self).stack_name)
        grant_read_catalog(flow_role, top, catalog_path(top.stack_name, Catalogued.TASKS))
        for child in children:
            if not isinstance(child, BackgroundTask):
                raise ConfigurationError(
                    self.task_name, "map_to", f"{child!r} is not a BackgroundTask"
                )
            if child.table is not self.table:
                raise ConfigurationError(
                    self.task_name, "map_to", f"{child.task_name} keeps its records elsewhere"
                )
            # Enqueue, read, and cancel (a cancelled flow cancels its children that have not
            # ended): what ``vigil tasks cancel`` may do to the child, and nothing more.
            grant_tasks(flow_role, [child], manage=True)
            child.grant_read(flow_role)
            child_role = self._imported_role(top, child)
            child_role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:UpdateItem"],
                    resources=[self.table.table_arn],
                    conditions=_journal_keys([self]),
                )
            )
            child_role.add_to_principal_policy(
                iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn])
            )

    def _imported_role(self, top: Stack, task: BackgroundTask) -> iam.IRole:
        """``task``'s function role as the top-level stack sees it (one per task), so grants
        added to it are policies of the top-level stack."""
        construct_id = f"MapRole{task.node.addr}"
        found = top.node.try_find_child(construct_id)
        if found is not None:
            return found  # type: ignore[return-value]
        role = task.function.role
        assert role is not None
        return iam.Role.from_role_arn(top, construct_id, role.role_arn, mutable=True)

    # --- the catalog and monitoring handles --------------------------------------------------

    def catalog_entry(self) -> dict[str, Any]:
        """This task's entry in ``TasksCatalog`` (and ``VIGIL_TASKS_CATALOG``)."""
        return {
            CatalogField.QUEUE_URL.value: self.queue.queue_url,
            CatalogField.DEAD_LETTER_URL.value: self.dead_letters.queue_url,
            CatalogField.TABLE.value: self.table.table_name,
            CatalogField.ORDERED.value: self.ordered,
            CatalogField.RETENTION_SECONDS.value: self.retention_seconds,
            CatalogField.SCHEDULER_ROLE_ARN.value: self.scheduler_role.role_arn,
            CatalogField.SCHEDULE_GROUP.value: self.schedule_group_name,
            CatalogField.FUNCTION.value: self.function_name,
            CatalogField.COMPLETION_EVENTS.value: self.completion_events.value,
            CatalogField.VISIBILITY_TIMEOUT_SECONDS.value: self.visibility_timeout_seconds,
            CatalogField.MAX_QUEUE_AGE_SECONDS.value: self.max_queue_age_seconds,
            **self._max_duration_field(CatalogField.MAX_DURATION_SECONDS, int),
            **self._priority_field(lambda queue: queue.queue_url),
        }

    def catalog_fields(self) -> Entry:
        """This task's entry in the stack's tasks catalog (``vigil.catalog``), without what every
        task shares (its table and schedule group: the catalog's shared part)."""
        stack = Stack.of(self)
        region = stack.region if not Token.is_unresolved(stack.region) else "x" * REGION
        path = task_schedule_role_path(Layout.of(self).stack_name, region)
        return {
            CatalogField.QUEUE_URL.value: Filled(self.queue.queue_url, QUEUE_URL),
            CatalogField.DEAD_LETTER_URL.value: Filled(self.dead_letters.queue_url, QUEUE_URL),
            CatalogField.ORDERED.value: self.ordered,
            CatalogField.RETENTION_SECONDS.value: self.retention_seconds,
            CatalogField.SCHEDULER_ROLE_ARN.value: Filled(
                self.scheduler_role.role_arn, role_arn(path)
            ),
            CatalogField.FUNCTION.value: self.function_name,
            CatalogField.COMPLETION_EVENTS.value: self.completion_events.value,
            CatalogField.VISIBILITY_TIMEOUT_SECONDS.value: self.visibility_timeout_seconds,
            CatalogField.MAX_QUEUE_AGE_SECONDS.value: self.max_queue_age_seconds,
            **self._max_duration_field(CatalogField.MAX_DURATION_SECONDS, int),
            **self._priority_field(lambda queue: Filled(queue.queue_url, QUEUE_URL)),
            CONSTRUCT_FIELD: self.node.id,
        }

    def _max_duration_field(self, name: TaskEnv | CatalogField, form: Any) -> dict[str, Any]:
        """``max_duration`` in the environment or the catalog (absent when not declared: the
        functions and catalogs of tasks without it are unchanged)."""
        if self.max_duration_seconds is None:
            return {}
        return {name.value: form(self.max_duration_seconds)}

    def _priority_field(self, url: Any) -> dict[str, Any]:
        """The catalog's ``priority_queue_urls`` (absent without levels: catalogs unchanged)."""
        if not self.priority_queues:
            return {}
        return {
            CatalogField.PRIORITY_QUEUE_URLS.value: {
                level: url(queue) for level, queue in self.priority_queues.items()
            }
        }

    def metric(
        self,
        metric: TaskMetric,
        statistic: str = "Sum",
        label: str | None = None,
    ) -> cloudwatch.Metric:
        """A Powertools metric this task emits."""
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=str(metric),  # a plain str: jsii would take an Enum for its own
            dimensions_map=dimensions(self.stage, task=self.task_name),
            statistic=statistic,
            period=Duration.minutes(5),
            label=label,
        )


def catalog(tasks: Iterable[BackgroundTask]) -> dict[str, dict[str, Any]]:
    """``{task: entry}``: what ``enqueue``, the API, the CLI and the kit find tasks by."""
    return {task.task_name: task.catalog_entry() for task in tasks}


def grant_tasks(
    grantee: iam.IGrantable, tasks: Sequence[BackgroundTask], *, manage: bool = False
) -> None:
    """What ``vigil.tasks.enqueue`` and ``enqueue_many`` need for ``tasks``: read and put their records, send to their queues,
    create one-time schedules in their group with their scheduler roles. ``manage`` adds reading
    and cancelling (get, list, cancel: a conditional update, deleting a pending schedule).

    Give it to an application's role, or to the management API's function.
    """
    if not tasks:
        return
    # GetItem: a keyed enqueue reads its key's record before sending (one key, one request);
    # BatchGetItem: ``enqueue_many`` reads its keys' records so, 100 a request.
    records = ["dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:BatchGetItem"]
    if manage:
        records += ["dynamodb:Query", "dynamodb:UpdateItem"]
    for table, owners in _by_table(tasks).items():
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=records, resources=[table.table_arn], conditions=_leading_keys(owners)
            )
        )
        if manage:  # a flow's steps (get) and signals (its wait's item) in its journal
            grantee.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:Query", "dynamodb:UpdateItem"],
                    resources=[table.table_arn],
                    conditions=_journal_keys(owners),
                )
            )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["sqs:SendMessage"],
            resources=[queue.queue_arn for task in tasks for queue in task.work_queues],
        )
    )
    stack = Layout.of(tasks[0]).stack
    # Only these tasks' schedule names (``schedule_grants``: the task's whole name and a
    # delimiter no task name has), so a role that may enqueue one task cannot create or delete
    # another task's schedules.
    by_action: dict[str, set[str]] = {}
    for task in tasks:
        for action, names in schedule_grants(task.task_name, manage=manage).items():
            by_action.setdefault(action, set()).update(
                stack.format_arn(
                    service="scheduler",
                    resource="schedule",
                    resource_name=f"{task.schedule_group_name}/{name}",
                )
                for name in names
            )
    for action, resources in sorted(by_action.items()):
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=[action], resources=sorted(resources))
        )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=[task.scheduler_role.role_arn for task in tasks],
            conditions={"StringEquals": {"iam:PassedToService": SCHEDULER}},
        )
    )


def task_records_condition() -> dict[str, Any]:
    """An IAM condition: the request names only task records' partitions (``TASK#*``), one
    statement at any number of tasks (the tasks API's grants and its stranded-tasks audit's)."""
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{PK_PREFIX}*"]}}


def grant_manage_tasks(
    grantee: iam.IGrantable, *, table: dynamodb.ITable, schedule_group: str
) -> None:
    """What the stack's tasks API needs over every task of the stack, each grant one statement at
    any number of tasks: the tasks' records in the tasks table (``TASK#*``), the stack's group of
    one-time schedules, the roles under the stack's path of scheduler roles. Sending to the tasks'
    queues comes from each queue's policy (:meth:`BackgroundTask.allow_send`)."""
    stack = Layout.of(table).stack
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=[
                "dynamodb:PutItem",
                "dynamodb:GetItem",
                "dynamodb:Query",
                "dynamodb:UpdateItem",
            ],
            resources=[table.table_arn],
            conditions=task_records_condition(),
        )
    )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["scheduler:CreateSchedule", "scheduler:DeleteSchedule"],
            resources=[
                stack.format_arn(
                    service="scheduler",
                    resource="schedule",
                    resource_name=f"{schedule_group}/*",
                )
            ],
        )
    )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=[
                stack.format_arn(
                    service="iam",
                    region="",
                    resource="role",
                    resource_name=task_schedule_role_path(stack.stack_name, stack.region)[1:] + "*",
                )
            ],
            conditions={"StringEquals": {"iam:PassedToService": SCHEDULER}},
        )
    )


def _by_table(tasks: Sequence[BackgroundTask]) -> dict[dynamodb.ITable, list[BackgroundTask]]:
    owners: dict[dynamodb.ITable, list[BackgroundTask]] = {}
    for task in tasks:
        owners.setdefault(task.table, []).append(task)
    return owners


def _leading_keys(tasks: Iterable[BackgroundTask]) -> dict[str, Any]:
    return {
        "ForAllValues:StringEquals": {
            "dynamodb:LeadingKeys": [f"{PK_PREFIX}{task.task_name}" for task in tasks]
        }
    }


def _journal_keys(tasks: Iterable[BackgroundTask]) -> dict[str, Any]:
    """The flows' journal partitions of ``tasks`` (``TASK#<task>/*``: no task name holds ``/``,
    so no other task's partitions match)."""
    return {
        "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": [journal_pk_pattern(task.task_name) for task in tasks]
        }
    }


def _validate(
    *,
    construct_id: str,
    task_name: str | None,
    handler: str,
    timeout: Duration,
    retries: int,
    backoff: Duration,
    concurrency: int,
    batch_size: int,
    batching_window: Duration | None,
    visibility_timeout: Duration | None,
    ordered: bool,
    retention: Duration,
    memory_size: int,
    lease_margin: Duration,
    max_queue_age: Duration,
    completion_events: CompletionEvents | str,
    max_duration: Duration | None = None,
    writes: Sequence[Any] = (),
    rate_limit: str | None = None,
    priorities: Sequence[str] = (),
) -> _Checked:
    """Every limit AWS would refuse at deploy (or that would make the task unsafe), at synth."""
    name = task_name or default_name(construct_id)
    owner = f"BackgroundTask {construct_id!r} (task {name})"

    def fail(parameter: str, problem: str) -> ConfigurationError:
        return ConfigurationError(owner, parameter, problem)

    if not TASK_NAME.match(name):
        raise fail("task_name", f"{name!r} must match {TASK_NAME.pattern}")
    seconds = check_function(fail, handler=handler, timeout=timeout, memory_size=memory_size)
    if not 0 <= retries <= 10:
        raise fail("retries", f"{retries} is outside 0-10")
    if not 0 <= whole_seconds(fail, "backoff", backoff) <= MAX_VISIBILITY_S:
        raise fail("backoff", "must be from 0 s to SQS's longest visibility timeout, 12 hours")
    if not 2 <= concurrency <= 1000:
        raise fail("concurrency", f"{concurrency} is outside the SQS event source's maximum 2-1000")
    largest = 10 if ordered else 10_000
    if not 1 <= batch_size <= largest:
        kind = "a FIFO (ordered)" if ordered else "a standard"
        raise fail(
            "batch_size", f"{batch_size} is outside 1-{largest}, what SQS allows {kind} queue"
        )
    window = (
        0 if batching_window is None else whole_seconds(fail, "batching_window", batching_window)
    )
    if ordered and batching_window is not None:
        raise fail(
            "batching_window", "an ordered task's FIFO event source takes no batching window"
        )
    if not 0 <= window <= MAX_BATCHING_WINDOW_S:
        raise fail("batching_window", f"{window} s is outside 0-{MAX_BATCHING_WINDOW_S} s")
    if batch_size > 10 and window < 1:
        raise fail(
            "batching_window", f"must be at least 1 s for a batch size over 10 ({batch_size})"
        )
    least = VISIBILITY_PER_TIMEOUT * seconds + window
    visibility = (
        least
        if visibility_timeout is None
        else whole_seconds(fail, "visibility_timeout", visibility_timeout)
    )
    if not least <= visibility <= MAX_VISIBILITY_S:
        raise fail(
            "visibility_timeout",
            f"{visibility} s must be at least {VISIBILITY_PER_TIMEOUT} x the timeout + the "
            f"batching window ({least} s; AWS's rule for a Lambda event source) and at most "
            f"{MAX_VISIBILITY_S} s",
        )
    check_retention(fail, retention, "task's record")
    if not 1 <= whole_seconds(fail, "lease_margin", lease_margin) < seconds:
        raise fail("lease_margin", "must be at least 1 s (clock skew) and below the timeout")
    if whole_seconds(fail, "max_queue_age", max_queue_age) < 60:
        raise fail("max_queue_age", "must be at least 60 s (the alarm's resolution)")
    longest = _check_max_duration(fail, max_duration)
    choices = [choice.value for choice in CompletionEvents]
    if completion_events not in choices:
        raise fail("completion_events", f"{completion_events!r} is not one of {choices}")
    rate = None
    if rate_limit is not None:
        try:
            rate = RateLimit.parse(rate_limit)
        except ValueError as error:
            raise fail("rate_limit", str(error)) from None
    levels = _check_priorities(fail, priorities, ordered=ordered)
    return _Checked(
        name=name,
        visibility_timeout=visibility,
        batching_window=window,
        completion_events=CompletionEvents(completion_events),
        writes=tuple(check_writes(fail, writes)),
        rate_limit=rate,
        priorities=levels,
        max_duration=longest,
    )


def _check_max_duration(fail: Any, max_duration: Any) -> int | None:
    """A Duration of whole seconds, at least the tasks audit's period (a shorter one could not
    be told from it), at most ``MAX_DURATION_DAYS``."""
    if max_duration is None:
        return None
    if not isinstance(max_duration, Duration):
        raise fail("max_duration", f"{max_duration!r} is not a Duration (Duration.hours(6))")
    seconds = whole_seconds(fail, "max_duration", max_duration)
    if not AUDIT_EVERY_SECONDS <= seconds <= MAX_DURATION_DAYS * 86_400:
        raise fail(
            "max_duration",
            f"{seconds} s is outside {AUDIT_EVERY_SECONDS} s (the tasks audit's period) to "
            f"{MAX_DURATION_DAYS} days",
        )
    return seconds


def _check_priorities(fail: Any, priorities: Sequence[str], *, ordered: bool) -> tuple[str, ...]:
    """Distinct level names, not ``normal`` (the task's own queue), and none on an ordered task:
    a group's one-at-a-time order is kept per FIFO queue, so a group split over two queues
    could run two of its tasks at once, or out of order."""
    if isinstance(priorities, str):
        raise fail(
            "priorities", f"must be a sequence of level names, got the string {priorities!r}"
        )
    levels = tuple(priorities)
    if levels and ordered:
        raise fail(
            "priorities",
            "an ordered task cannot have priority levels: its groups keep their order within one "
            "FIFO queue, and a second queue would run a group's tasks at once or out of order",
        )
    for level in levels:
        if not isinstance(level, str) or not PRIORITY_LEVEL.match(level):
            raise fail("priorities", f"{level!r} must match {PRIORITY_LEVEL.pattern}")
        if level == NORMAL_PRIORITY:
            raise fail("priorities", f"{level!r} is the task's own queue: declare only the others")
    if len(set(levels)) != len(levels):
        raise fail("priorities", f"{list(levels)} names a level twice")
    return levels


def _priority_queue_id(level: str) -> str:
    """``Queue`` + the level in camel case: ``high`` -> ``QueueHigh``."""
    return "Queue" + "".join(part.capitalize() for part in level.split("-"))


def _shared_tasks_table(scope: Construct) -> dynamodb.ITable:
    stack = Layout.of(scope).stack
    existing = stack.node.try_find_child("Tasks")
    if isinstance(existing, TasksTable):
        return existing.table
    return TasksTable(stack, "Tasks").table


def _shared_schedule_group(scope: Construct) -> str:
    """The stack's group of one-time schedules (one per stack: a name unique in the region)."""
    stack = Layout.of(scope).stack
    name = tasks_schedule_group(stack.stack_name)
    if stack.node.try_find_child("TaskSchedules") is None:
        scheduler.ScheduleGroup(
            stack,
            "TaskSchedules",
            schedule_group_name=name,
            # Its pending schedules send as the tasks' scheduler roles, which go with the stack.
            removal_policy=FIXED_NAME_REMOVAL,
        )
    return name
