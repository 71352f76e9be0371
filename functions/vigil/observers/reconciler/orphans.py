"""The orphan sweep: running tasks that no record names as current, stopped or adopted.

An orphan is a task left by a lost race or a crash between RunTask and recording its ARN. Only the
candidates are described (not the whole cluster), and a candidate about to be stopped or adopted
is judged again on its record as it is now, since the resync's snapshot may be a minute old.

Tasks that are not observers' (another service sharing the cluster: no observer or host marks) are
remembered once described, for as long as they run, so they cost no DescribeTasks on later passes
(the reconciler lives as long as its warm Lambda container: a cold start describes them once more).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vigil.clock import Clock, system_clock
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import EcsTasks
from vigil.observers.fleet_store import Conflict, FleetStore
from vigil.observers.reconciler.report import MetricSink, PassReport, isolated, no_metrics
from vigil.telemetry import ObserverMetric


@dataclass(frozen=True, kw_only=True)
class OrphanSweep:
    store: FleetStore
    ecs: EcsTasks
    settings: d.Settings
    clock: Clock = system_clock
    metric: MetricSink = no_metrics
    foreign: set[str] = field(default_factory=set)
    """Running tasks without observer or host marks, as described by an earlier pass."""

    def sweep(self, records: list[d.Record], running: set[str], report: PassReport) -> None:
        self.foreign.intersection_update(running)  # forget those that stopped
        current = {r.observer.task_arn for r in records if r.observer.task_arn}
        candidates = sorted(running - current - self.foreign)
        if not candidates:
            return
        by_name = {r.name: r for r in records}
        described = self.ecs.describe(candidates)
        report.described += len(candidates)
        self.foreign.update(
            arn
            for arn, task in described.items()
            if task.observer is None and task.host is None and not task.stopped
        )
        for arn in candidates:
            with isolated(described[arn].observer or arn, report):
                self._one(described[arn], by_name, report)

    def _one(self, task: d.TaskState, by_name: dict[str, d.Record], report: PassReport) -> None:
        record = by_name.get(task.observer) if task.observer else None
        action = d.classify_orphan(task, record, self.clock(), self.settings)
        if isinstance(action, d.StopTask | d.SeeTask) and task.observer:
            record = self.store.get(task.observer)
            action = d.classify_orphan(task, record, self.clock(), self.settings)
        report.note(task.observer or "?", action)
        if isinstance(action, d.StopTask):
            self.ecs.stop(action.arn, action.reason)
            report.orphans_stopped += 1
            self.metric(ObserverMetric.ORPHAN_STOPPED, record.observer.kind if record else None, 1)
        elif isinstance(action, d.SeeTask) and record is not None:
            try:
                self.store.apply(record, action, self.clock(), seen=None)
            except Conflict:
                report.conflicts += 1
