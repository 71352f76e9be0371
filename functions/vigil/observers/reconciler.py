"""The reconciler: gathers evidence, asks :mod:`vigil.observers.decisions`, carries the actions out.

Three passes share one executor:

* the event pass handles one ECS Task State Change event (the fast path of a restart);
* the stream pass handles registry changes (a create or a stop acts within seconds);
* the resync pass, once a minute under a fenced lease so only one runs at a time, reads the whole fleet
  from the index, lists the cluster's running tasks (one page per 100), describes only the tasks that
  need a look (stale heartbeat, not listed), and stops orphans. Nothing is lost to a missed event.

Order within one decision: the DLQ notice (at least once), then the record's conditional write (the
commit point: a writer that lost the race does nothing else and decides again from the record it got
back), then StopTask, then RunTask. So a lost race never stops a healthy task or starts a second one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, Field, ValidationError

from vigil.clock import Clock, iso, system_clock
from vigil.leases import LeaseHeld, LeaseTable
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import EcsTasks, RunTaskFailed
from vigil.observers.fleet_gauges import fleet_gauges
from vigil.observers.fleet_store import Conflict, FleetStore, Write
from vigil.telemetry import ObserverMetric, logger

RESYNC_LEASE_KEY = {"name": "#resync"}
MAX_DECISION_ROUNDS = 4

Sleeper = Callable[[float], None]
MetricSink = Callable[[ObserverMetric, str | None, float], None]
"""Receives (metric, kind or None, value); units in vigil.telemetry.METRIC_UNITS, else counts."""


class ReconcilerConfig(BaseModel):
    """The reconciler's environment, read once and validated (names as the construct sets them)."""

    table: str = Field(alias="VIGIL_OBSERVERS_TABLE", min_length=1)
    cluster_arn: str = Field(alias="VIGIL_CLUSTER_ARN", min_length=1)
    task_definitions: dict[str, str] = Field(alias="VIGIL_TASK_DEFINITIONS", min_length=1)
    container_name: str = Field(alias="VIGIL_CONTAINER_NAME", min_length=1)
    subnets: list[str] = Field(alias="VIGIL_SUBNETS", min_length=1)
    security_groups: list[str] = Field(alias="VIGIL_SECURITY_GROUPS", min_length=1)
    assign_public_ip: bool = Field(alias="VIGIL_ASSIGN_PUBLIC_IP", default=True)
    dlq_url: str = Field(alias="VIGIL_OBSERVERS_DLQ_URL", min_length=1)
    heartbeat_seconds: int = Field(alias="VIGIL_HEARTBEAT_SECONDS", ge=5)
    failure_threshold: int = Field(alias="VIGIL_FAILURE_THRESHOLD", default=5, ge=1)
    backoff_base_seconds: int = Field(alias="VIGIL_BACKOFF_BASE_SECONDS", default=30, ge=1)
    backoff_cap_seconds: int = Field(alias="VIGIL_BACKOFF_CAP_SECONDS", default=900, ge=1)
    start_timeout_seconds: int = Field(alias="VIGIL_START_TIMEOUT_SECONDS", default=600, ge=30)
    healthy_after_seconds: int = Field(alias="VIGIL_HEALTHY_AFTER_SECONDS", default=300, ge=1)
    lease_seconds: int = Field(alias="VIGIL_RESYNC_LEASE_SECONDS", default=300, ge=10)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ReconcilerConfig:
        """Parse the JSON and comma-separated variables; raises ValueError naming what is wrong."""
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            alias = info.alias or name
            if alias not in env:
                continue
            raw = env[alias]
            if name == "task_definitions":
                try:
                    values[alias] = json.loads(raw)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{alias} is not JSON: {error}") from error
            elif name in ("subnets", "security_groups"):
                values[alias] = [part.strip() for part in raw.split(",") if part.strip()]
            else:
                values[alias] = raw
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            raise ValueError(f"invalid reconciler environment: {error}") from error

    def decision_settings(self) -> d.Settings:
        return d.Settings(
            heartbeat_interval=timedelta(seconds=self.heartbeat_seconds),
            start_timeout=timedelta(seconds=self.start_timeout_seconds),
            healthy_after=timedelta(seconds=self.healthy_after_seconds),
            backoff_base=timedelta(seconds=self.backoff_base_seconds),
            backoff_cap=timedelta(seconds=self.backoff_cap_seconds),
            failure_threshold=self.failure_threshold,
        )


class Notices:
    """FAILED notices on the observers' dead-letter queue, for a person or an alarm to pick up."""

    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def failed(self, record: d.Record, action: d.MarkFailed, now: datetime) -> None:
        observer = record.observer
        body = {
            "type": "ObserverFailed",
            "name": observer.name,
            "kind": observer.kind,
            "generation": observer.generation,
            "reason": action.reason,
            "consecutive_failures": action.consecutive_failures,
            "last_exit": action.last_exit.to_json() if action.last_exit else None,
            "at": iso(now),
        }
        self._client.send_message(QueueUrl=self._queue_url, MessageBody=json.dumps(body))


def no_metrics(metric: ObserverMetric, kind: str | None, value: float) -> None:
    return None


@dataclass
class PassReport:
    """What one pass did, for logs, tests and benchmarks."""

    observers: int = 0
    described: int = 0
    orphans_stopped: int = 0
    started: int = 0
    stopped: int = 0
    ignored: int = 0
    conflicts: int = 0
    errors: int = 0
    """Observers skipped by a resync after an AWS error of their own (the next pass retries)."""
    actions: list[tuple[str, d.Action]] = field(default_factory=list)

    def note(self, name: str, action: d.Action) -> None:
        self.actions.append((name, action))
        if isinstance(action, d.StartTask | d.RetryStart):
            self.started += 1
        elif isinstance(action, d.StopTask):
            self.stopped += 1
        elif isinstance(action, d.Ignore):
            self.ignored += 1


class Reconciler:
    def __init__(
        self,
        *,
        store: FleetStore,
        ecs: EcsTasks,
        notices: Notices,
        leases: LeaseTable,
        settings: d.Settings,
        clock: Clock = system_clock,
        sleeper: Sleeper = time.sleep,
        metric: MetricSink = no_metrics,
        run_task_attempts: int = 3,
        run_task_pause: float = 0.5,
        lease_duration: timedelta = timedelta(minutes=5),
        max_starts_per_pass: int = 1000,
    ) -> None:
        self._store = store
        self._ecs = ecs
        self._notices = notices
        self._leases = leases
        self._settings = settings
        self._clock = clock
        self._sleep = sleeper
        self._metric = metric
        self._run_task_attempts = run_task_attempts
        self._run_task_pause = run_task_pause
        self._lease_duration = lease_duration
        self._max_starts = max_starts_per_pass
        """Fargate takes ~20 RunTask/s: a mass start is spread over passes, each within Lambda's time."""

    # Passes --------------------------------------------------------------------------------------

    def on_task_event(self, task: d.TaskState) -> PassReport:
        """One ECS Task State Change event."""
        report = PassReport(observers=1)
        if task.observer is None:
            report.note("?", d.Ignore(f"task {task.arn} carries no observer marks"))
            return report
        record = self._store.get(task.observer)
        for _ in range(MAX_DECISION_ROUNDS):
            actions = d.decide_event(record, task, self._clock(), self._settings)
            try:
                self._carry_out(task.observer, record, actions, seen=task, report=report)
                return report
            except Conflict as conflict:
                report.conflicts += 1
                record = conflict.current
        raise RuntimeError(f"{task.observer}: record kept changing; the event will be redelivered")

    def on_records(self, records: Iterable[d.Record]) -> PassReport:
        """Registry changes (from the stream): act on each record as it now stands."""
        report = PassReport()
        for record in records:
            report.observers += 1
            self._reconcile(record, None, report)
        return report

    def resync(self, holder: str) -> PassReport | None:
        """The periodic level-triggered pass; None when another pass holds the lease."""
        lease = self._leases.acquire(RESYNC_LEASE_KEY, holder, self._lease_duration)
        if isinstance(lease, LeaseHeld):
            return None
        started = time.monotonic()
        try:
            return self._resync()
        finally:
            self._leases.release(lease)
            elapsed_ms = (time.monotonic() - started) * 1000
            self._metric(ObserverMetric.RECONCILE_DURATION, None, elapsed_ms)

    def _resync(self) -> PassReport:
        report = PassReport()
        records = list(self._store.fleet())
        report.observers = len(records)
        for gauge, value in fleet_gauges(records, self._clock()).items():
            self._metric(gauge, None, value)
        running = set(self._ecs.running())
        to_describe: dict[str, d.Record] = {}
        for record in records:
            arn = record.observer.task_arn
            evidence: d.Evidence = d.Listed(arn in running) if arn else None
            actions = d.decide(record, evidence, self._clock(), self._settings)
            looks = [a for a in actions if isinstance(a, d.Describe)]
            if looks:
                to_describe[looks[0].arn] = record
                continue
            if report.started >= self._max_starts and _starts(actions):
                report.note(record.name, d.Ignore("start deferred: this pass started its maximum"))
                continue
            with _isolated(record.name, report):
                self._reconcile(record, evidence, report, first=actions)
        if to_describe:
            now = self._clock()
            stale = sum(
                1
                for r in to_describe.values()
                if r.observer.heartbeat_at is not None
                and now - r.observer.heartbeat_at > self._settings.stale_after
            )
            if stale:
                self._metric(ObserverMetric.HEARTBEAT_STALE, None, stale)
            described = self._ecs.describe(to_describe)
            report.described += len(to_describe)
            for arn, record in to_describe.items():
                with _isolated(record.name, report):
                    self._reconcile(record, described[arn], report)
        self._sweep_orphans(records, running, report)
        return report

    # Orphans -------------------------------------------------------------------------------------

    def _sweep_orphans(
        self, records: list[d.Record], running: set[str], report: PassReport
    ) -> None:
        """Running tasks no record names as current: described (only those), then classified."""
        current = {r.observer.task_arn for r in records if r.observer.task_arn}
        candidates = sorted(running - current)
        if not candidates:
            return
        by_name = {r.name: r for r in records}
        described = self._ecs.describe(candidates)
        report.described += len(candidates)
        for arn in candidates:
            with _isolated(described[arn].observer or arn, report):
                self._sweep_one(described[arn], by_name, report)

    def _sweep_one(
        self, task: d.TaskState, by_name: dict[str, d.Record], report: PassReport
    ) -> None:
        """Classify one orphan candidate and stop or adopt it."""
        record = by_name.get(task.observer) if task.observer else None
        action = d.classify_orphan(task, record, self._clock(), self._settings)
        if isinstance(action, d.StopTask | d.SeeTask) and task.observer:
            # The snapshot may be a minute old: judge again on the record as it is now.
            record = self._store.get(task.observer)
            action = d.classify_orphan(task, record, self._clock(), self._settings)
        report.note(task.observer or "?", action)
        if isinstance(action, d.StopTask):
            self._ecs.stop(action.arn, action.reason)
            report.orphans_stopped += 1
            self._metric(ObserverMetric.ORPHAN_STOPPED, record.observer.kind if record else None, 1)
        elif isinstance(action, d.SeeTask) and record is not None:
            try:
                self._store.apply(record, action, self._clock(), seen=None)
            except Conflict:
                report.conflicts += 1

    # Executor ------------------------------------------------------------------------------------

    def _reconcile(
        self,
        record: d.Record,
        evidence: d.Evidence,
        report: PassReport,
        first: list[d.Action] | None = None,
    ) -> None:
        """Decide and act for one record, deciding again from the fresh record after a lost race."""
        current: d.Record | None = record
        actions = first
        for _ in range(MAX_DECISION_ROUNDS):
            if current is None:
                return
            if actions is None:
                actions = d.decide(current, evidence, self._clock(), self._settings)
            if any(isinstance(a, d.Describe) for a in actions):
                arn = next(a.arn for a in actions if isinstance(a, d.Describe))
                evidence = self._ecs.describe([arn])[arn]
                report.described += 1
                actions = d.decide(current, evidence, self._clock(), self._settings)
            seen = evidence if isinstance(evidence, d.TaskState) else None
            try:
                self._carry_out(current.name, current, actions, seen=seen, report=report)
                return
            except Conflict as conflict:
                report.conflicts += 1
                current = conflict.current
                actions = None
        report.note(record.name, d.Ignore("record kept changing; the next pass will look again"))

    def _carry_out(
        self,
        name: str,
        record: d.Record | None,
        actions: list[d.Action],
        *,
        seen: d.TaskState | None,
        report: PassReport,
    ) -> None:
        writes = [a for a in actions if isinstance(a, d.WRITES)]
        assert len(writes) <= 1, f"decisions returned several writes: {writes}"
        kind = record.observer.kind if record else None
        now = self._clock()
        for action in actions:
            if isinstance(action, d.MarkFailed) and record is not None:
                self._notices.failed(record, action, now)
        if writes and record is not None:
            write: Write = writes[0]  # type: ignore[assignment]
            self._store.apply(record, write, now, seen)
        for action in actions:
            report.note(name, action)
            match action:
                case d.StopTask():
                    self._ecs.stop(action.arn, action.reason)
                    if record is None or action.arn != record.observer.task_arn:
                        report.orphans_stopped += 1
                        self._metric(ObserverMetric.ORPHAN_STOPPED, kind, 1)
                case d.Ignore(stale=True):
                    self._metric(ObserverMetric.STALE_EVENT_IGNORED, kind, 1)
                case d.MarkFailed():
                    self._metric(ObserverMetric.FAILED, kind, 1)
                case d.MarkStopped():
                    self._metric(ObserverMetric.STOPPED, kind, 1)
                case _:
                    pass
        for action in actions:
            if isinstance(action, d.StartTask | d.RetryStart) and record is not None:
                self._metric(
                    ObserverMetric.RESTARTED
                    if isinstance(action, d.StartTask) and action.restart
                    else ObserverMetric.STARTED,
                    kind,
                    1,
                )
                # A StartTask write bumped the version once; a RetryStart wrote nothing.
                written = record.observer.version + (1 if isinstance(action, d.StartTask) else 0)
                self._run(record, action.generation, written)

    def _run(self, record: d.Record, generation: int, written_version: int) -> None:
        """RunTask for one generation; on failure the record says when to retry. Never raises."""
        observer = record.observer
        error: RunTaskFailed | None = None
        for attempt in range(self._run_task_attempts):
            try:
                arn = self._ecs.run(
                    name=observer.name,
                    kind=observer.kind,
                    generation=generation,
                    incarnation=iso(observer.created_at),
                )
            except RunTaskFailed as failed:
                error = failed
                if not failed.transient or attempt + 1 == self._run_task_attempts:
                    break
                self._sleep(self._run_task_pause * (2**attempt))
                continue
            recorded = self._store.record_task(
                observer.name, generation, arn, self._clock(), written_version
            )
            if not recorded:
                # The record moved on while the task started (stopped, or a newer generation).
                self._ecs.stop(arn, "orphan: its generation was superseded while starting")
            return
        assert error is not None
        self._metric(ObserverMetric.RUN_TASK_FAILED, observer.kind, 1)
        self._note_start_failure(observer.name, generation, error)

    def _note_start_failure(self, name: str, generation: int, error: RunTaskFailed) -> None:
        for _ in range(MAX_DECISION_ROUNDS):
            current = self._store.get(name)
            if current is None or current.observer.generation != generation:
                return
            if current.observer.task_arn is not None:
                return
            attempts = current.tracking.start_attempts + 1
            now = self._clock()
            retry_at = now + d.run_task_retry_delay(attempts, self._settings)
            try:
                self._store.record_start_failure(current, error.reason, retry_at, now)
                return
            except Conflict:
                continue


@contextmanager
def _isolated(name: str, report: PassReport) -> Iterator[None]:
    """One observer's AWS error (a throttle, a timeout, a denied call) is logged and counted, and
    the pass goes on with the next observer; the next pass looks at this one again."""
    try:
        yield
    except (ClientError, BotoCoreError) as error:
        report.errors += 1
        logger().warning(
            "observer skipped this pass after an AWS error",
            extra={"observer": name, "error": f"{type(error).__name__}: {error}"},
        )


def _starts(actions: list[d.Action]) -> bool:
    return any(isinstance(a, d.StartTask | d.RetryStart) for a in actions)


# Wiring ------------------------------------------------------------------------------------------


def build_reconciler(
    config: ReconcilerConfig,
    *,
    session: Any = None,
    clock: Clock = system_clock,
    metric: MetricSink = no_metrics,
) -> Reconciler:
    """The reconciler on real clients; ``session`` is a boto3 Session (tests pass moto's)."""
    import boto3

    session = session or boto3.session.Session()
    dynamodb = session.client("dynamodb")
    return Reconciler(
        store=FleetStore(dynamodb, config.table),
        ecs=EcsTasks(
            session.client("ecs"),
            cluster=config.cluster_arn,
            task_definitions=config.task_definitions,
            container_name=config.container_name,
            subnets=config.subnets,
            security_groups=config.security_groups,
            assign_public_ip=config.assign_public_ip,
        ),
        notices=Notices(session.client("sqs"), config.dlq_url),
        leases=LeaseTable(dynamodb, config.table, clock),
        settings=config.decision_settings(),
        clock=clock,
        metric=metric,
        lease_duration=timedelta(seconds=config.lease_seconds),
    )


def powertools_metric(metric: ObserverMetric, kind: str | None, value: float) -> None:
    """The Lambda's metric sink: EMF through Powertools, with the ``kind`` dimension when known."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    from vigil.telemetry import METRIC_UNITS, NAMESPACE, metrics

    unit = MetricUnit(METRIC_UNITS.get(metric, MetricUnit.Count.value))
    # Always the fleet-wide series (alarms use it), and per kind when the kind is known.
    metrics().add_metric(name=metric.value, unit=unit, value=value)
    if kind is None:
        return
    with single_metric(name=metric.value, unit=unit, value=value, namespace=NAMESPACE) as one:
        one.add_dimension(name="kind", value=kind)


def changed_records(stream_records: Iterable[Mapping[str, Any]]) -> list[d.Record]:
    """Stream records that call for the reconciler (creates, stops, restarts), not heartbeats.

    The event source mapping filters the same way; this check keeps the handler correct without it.
    """
    from vigil.dynamo import from_wire
    from vigil.observers.fleet_store import record_from_item
    from vigil.observers.model import is_observer_item

    wanted: list[d.Record] = []
    for stream_record in stream_records:
        change = stream_record.get("dynamodb") or {}
        new = from_wire(change.get("NewImage"))
        if not new or not is_observer_item(new):
            continue
        old = from_wire(change.get("OldImage"))
        if needs_attention(new, old):
            wanted.append(record_from_item(new))
    return wanted


def needs_attention(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    if old is None:
        return True
    status, desired = new.get("status"), new.get("desired")
    if desired != old.get("desired"):
        return True
    if new.get("restart_generation") != old.get("restart_generation"):
        return True
    if status == "PENDING" and old.get("status") != "PENDING":
        return True
    return (
        desired == "STOPPED"
        and status in ("STARTING", "RUNNING", "STOPPING")
        and (status != old.get("status"))
    )
