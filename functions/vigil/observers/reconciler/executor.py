"""Carrying out one decision, and deciding again after a lost race.

Order within one plan: the DLQ notice (at least once), then the record's conditional write (the
commit point: a writer that lost the race does nothing else and decides again from the record it got
back), then StopTask, then RunTask. So a lost race never stops a healthy task or starts a second one.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from vigil.clock import Clock, system_clock
from vigil.contract.hosts import Capacity
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import EcsTasks
from vigil.observers.fleet_store import Conflict, FleetStore
from vigil.observers.host_fleet.decide import decide_pooled
from vigil.observers.model import Desired
from vigil.observers.reconciler.notices import Notices
from vigil.observers.reconciler.placer import Placer, start_write
from vigil.observers.reconciler.report import MetricSink, PassReport, no_metrics
from vigil.observers.reconciler.starter import MAX_DECISION_ROUNDS, TaskStarter
from vigil.telemetry import ObserverMetric


@dataclass(frozen=True, kw_only=True)
class Executor:
    store: FleetStore
    ecs: EcsTasks
    notices: Notices
    starter: TaskStarter
    clock: Clock = system_clock
    metric: MetricSink = no_metrics
    placer: Placer | None = None
    """Pooled kinds: StartTask/RetryStart place on a host, StopTask takes off one."""

    def pooled(self, record: d.Record | None) -> Placer | None:
        if record is None or self.placer is None or not self.placer.pooled(record.observer.kind):
            return None
        return self.placer

    def carry_out(
        self,
        name: str,
        record: d.Record | None,
        plan: d.Plan,
        *,
        seen: d.TaskState | None,
        report: PassReport,
    ) -> None:
        """Raises :class:`Conflict` (having done nothing) when the write lost a race."""
        kind = record.observer.kind if record else None
        write = plan.write if record is not None else None
        placer = self.pooled(record)
        if placer is not None and record is not None and isinstance(write, d.StartTask):
            write = start_write(placer, record, write)
            plan = d.Plan(write, plan.effects)
        written = record.observer.version if record is not None else 0
        if record is not None and write is not None:
            now = self.clock()
            if isinstance(write, d.MarkFailed):
                self.notices.failed(record, write, now)
            self.store.apply(record, write, now, seen)
            written += 1
        for action in plan.actions:
            report.note(name, action)
            match action:
                case d.StopTask() if placer is not None and record is not None:
                    placer.take_off(record)
                case d.StopTask() if (
                    record is not None
                    and record.observer.desired is Desired.STOPPED
                    and action.arn == record.observer.task_arn
                ):
                    self._stop_for_good(record, action, written)
                case d.StopTask():
                    self.ecs.stop(action.arn, action.reason)
                    if record is None or action.arn != record.observer.task_arn:
                        report.orphans_stopped += 1
                        self.metric(ObserverMetric.ORPHAN_STOPPED, kind, 1)
                case d.Ignore(stale=True):
                    self.metric(ObserverMetric.STALE_EVENT_IGNORED, kind, 1)
                case d.MarkFailed():
                    self.metric(ObserverMetric.FAILED, kind, 1)
                case d.MarkStopped():
                    self.metric(ObserverMetric.STOPPED, kind, 1)
                case _:
                    pass
        if record is not None:
            self._start(record, plan, kind)

    def _stop_for_good(self, record: d.Record, action: d.StopTask, written: int) -> None:
        """StopTask for an observer asked to stop. A failure (denied, throttled, ECS down) leaves
        its task running and billing, so it is not silent: counted (``ObserverStopFailed``, which
        alarms when it repeats), said on the record once, then raised for the pass to count."""
        try:
            self.ecs.stop(action.arn, action.reason)
        except (ClientError, BotoCoreError) as error:
            self.metric(ObserverMetric.STOP_FAILED, record.observer.kind, 1)
            reason = f"{type(error).__name__}: {error}"
            with suppress(ClientError, BotoCoreError):
                self.store.record_stop_failure(record.name, written, reason, self.clock())
            raise

    def _start(self, record: d.Record, plan: d.Plan, kind: str | None) -> None:
        """RunTask after everything else: for a StartTask write, or a RetryStart effect."""
        version = record.observer.version
        placer = self.pooled(record)
        if isinstance(plan.write, d.StartTask):
            restarted = plan.write.restart
            metric = ObserverMetric.RESTARTED if restarted else ObserverMetric.STARTED
            self.metric(metric, kind, 1)
            # The StartTask write bumped the version once.
            if placer is not None and plan.write.host is not None:
                placer.place(record, plan.write.generation, version + 1, plan.write.host)
            else:
                self.starter.start(record, plan.write.generation, version + 1)
        for effect in plan.effects:
            if isinstance(effect, d.RetryStart):
                self.metric(ObserverMetric.STARTED, kind, 1)
                if placer is not None:
                    placer.retry(record, effect.generation)
                else:
                    fell_back = record.tracking.capacity == Capacity.ON_DEMAND
                    self.starter.start(record, effect.generation, version, on_demand=fell_back)


@dataclass(frozen=True, kw_only=True)
class Settler:
    """Decide and act for one record, looking at its task first when the decision asks to, and
    deciding again from the fresh record after a lost race."""

    executor: Executor
    ecs: EcsTasks
    settings: d.Settings
    clock: Clock = system_clock

    def settle(
        self,
        record: d.Record,
        evidence: d.Evidence,
        report: PassReport,
        first: d.Plan | None = None,
    ) -> None:
        current: d.Record | None = record
        plan = first
        for _ in range(MAX_DECISION_ROUNDS):
            if current is None:
                return
            placer = self.executor.pooled(current)
            if placer is not None:
                host = placer.host(current.pooled.host)
                plan = decide_pooled(current, host, self.clock(), self.settings)
            elif plan is None:
                plan = d.decide(current, evidence, self.clock(), self.settings)
            if plan.look is not None:
                evidence = self.ecs.describe([plan.look])[plan.look]
                report.described += 1
                plan = d.decide(current, evidence, self.clock(), self.settings)
            seen = evidence if isinstance(evidence, d.TaskState) and placer is None else None
            try:
                self.executor.carry_out(current.name, current, plan, seen=seen, report=report)
                return
            except Conflict as conflict:
                report.conflicts += 1
                current = conflict.current
                plan = None
        report.note(record.name, d.Ignore("record kept changing; the next pass will look again"))
