"""The reconciler: gathers evidence, asks :mod:`vigil.observers.decisions`, carries the plan out.

Three passes share one executor:

* :class:`~.passes.EventPass` handles one ECS Task State Change event (the fast path of a restart);
* :class:`~.passes.StreamPass` handles registry changes (a create or a stop acts within seconds);
* :class:`~.resync.ResyncPass`, once a minute under a fenced lease, reads the whole fleet and
  looks only at what needs a look, then :class:`~.orphans.OrphanSweep` stops orphans. Nothing is
  lost to a missed event.

:class:`~.executor.Executor` carries out one plan (the DLQ notice, the record's conditional write,
StopTask, then RunTask through :class:`~.starter.TaskStarter`, which retries RunTask briefly);
:class:`~.executor.Settler` decides again after a lost race. Each takes only what it uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from vigil.clock import Clock, Sleeper, system_clock
from vigil.dynamo import from_wire
from vigil.leases import LeaseTable
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import EcsTasks
from vigil.observers.fleet_store import FleetStore
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.kind_options import KindOptionsMap, pooled_kinds
from vigil.observers.migration import LegacyRegistry, Migration
from vigil.observers.reconciler.config import ReconcilerConfig
from vigil.observers.reconciler.executor import Executor, Settler
from vigil.observers.reconciler.hosts import HostManager
from vigil.observers.reconciler.notices import Notices
from vigil.observers.reconciler.orphans import OrphanSweep
from vigil.observers.reconciler.passes import (
    EventPass,
    StreamPass,
    changed_records,
    needs_attention,
)
from vigil.observers.reconciler.placer import Placer, random_host_id
from vigil.observers.reconciler.report import MetricSink, PassReport, no_metrics
from vigil.observers.reconciler.resync import RESYNC_LEASE_KEY, ResyncPass
from vigil.observers.reconciler.rollouts import Rollouts
from vigil.observers.reconciler.starter import TaskStarter
from vigil.telemetry import ObserverMetric

__all__ = [
    "RESYNC_LEASE_KEY",
    "MetricSink",
    "Notices",
    "PassReport",
    "Reconciler",
    "ReconcilerConfig",
    "Rollouts",
    "assemble",
    "build_reconciler",
    "changed_records",
    "dedicated_rollouts",
    "needs_attention",
    "no_metrics",
    "powertools_metric",
]


@dataclass(frozen=True)
class Reconciler:
    """The three passes, as the Lambda handler dispatches to them; and, during an upgrade from a
    name-keyed registry, its migration, which every pass waits for (:mod:`..migration`)."""

    events: EventPass
    changes: StreamPass
    resyncs: ResyncPass
    migration: Migration | None = None

    def on_task_event(self, task: d.TaskState) -> PassReport:
        self._migrated()
        return self.events.run(task)

    def on_records(self, records: Iterable[d.Record]) -> PassReport:
        self._migrated()
        return self.changes.run(records)

    def resync(
        self, holder: str, time_left_s: Callable[[], float] | None = None
    ) -> PassReport | None:
        self._migrated()
        return self.resyncs.run(holder, time_left_s)

    def replay_legacy(self, stream_records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The name-keyed registry's stream records replayed onto their copies (in order); the
        other records, for the stream pass."""
        if self.migration is None:
            return stream_records
        self._migrated()
        legacy = self.migration.legacy
        for record in stream_records:
            if legacy.owns(record):
                change = record.get("dynamodb") or {}
                new, old = from_wire(change.get("NewImage")), from_wire(change.get("OldImage"))
                self.migration.replay(new, old)
        return [r for r in stream_records if not legacy.owns(r)]

    def _migrated(self) -> None:
        """Every observer of the name-keyed registry is here before any pass acts (one read of
        the marker per process once done): a pass that did not know one would take its running
        task for an orphan."""
        if self.migration is not None:
            self.migration.ensure()


def assemble(
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
    rollouts: Rollouts | None = None,
    hosts: HostStore | None = None,
    placements: KindOptionsMap | None = None,
    new_host_id: Callable[[str], str] = random_host_id,
    migration: Migration | None = None,
) -> Reconciler:
    """Wire the units together on the given adapters (real clients, or moto's in tests).

    With ``hosts`` and a pooled kind among ``placements``, the reconciler also manages hosts.
    """
    placer = None
    if hosts is not None and placements and pooled_kinds(placements):
        placer = Placer(
            hosts=hosts,
            store=store,
            ecs=ecs,
            placements=placements,
            settings=settings,
            clock=clock,
            metric=metric,
            new_host_id=new_host_id,
        )
    starter = TaskStarter(
        store=store,
        ecs=ecs,
        settings=settings,
        clock=clock,
        sleeper=sleeper,
        metric=metric,
        attempts=run_task_attempts,
        pause=run_task_pause,
    )
    executor = Executor(
        store=store,
        ecs=ecs,
        notices=notices,
        starter=starter,
        clock=clock,
        metric=metric,
        placer=placer,
    )
    settler = Settler(executor=executor, ecs=ecs, settings=settings, clock=clock)
    sweep = OrphanSweep(store=store, ecs=ecs, settings=settings, clock=clock, metric=metric)
    manager = None
    if placer is not None and hosts is not None:
        manager = HostManager(
            placer=placer,
            hosts=hosts,
            store=store,
            ecs=ecs,
            settler=settler,
            settings=settings,
            clock=clock,
        )
    return Reconciler(
        events=EventPass(
            store=store, executor=executor, settings=settings, clock=clock, hosts=manager
        ),
        changes=StreamPass(store=store, settler=settler),
        resyncs=ResyncPass(
            store=store,
            ecs=ecs,
            leases=leases,
            settler=settler,
            sweep=sweep,
            settings=settings,
            clock=clock,
            sleeper=sleeper,
            metric=metric,
            lease_duration=lease_duration,
            max_starts=max_starts_per_pass,
            rollouts=rollouts or Rollouts(),
            hosts=manager,
            dedicated_kinds=placements is None or any(not p.pooled for p in placements.values()),
        ),
        migration=migration,
    )


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
    placements = config.kind_options
    legacy = LegacyRegistry(dynamodb, config.legacy_table) if config.legacy_table else None
    return assemble(
        store=FleetStore(
            dynamodb, config.table, pooled_kinds=pooled_kinds(placements), legacy=legacy
        ),
        ecs=EcsTasks(
            session.client("ecs"),
            cluster=config.cluster_arn,
            task_definitions=config.task_definitions,
            container_name=config.container_name,
            subnets=config.subnets,
            security_groups=config.security_groups,
            assign_public_ip=config.assign_public_ip,
            capacities={k: config.options(k).capacity for k in config.task_definitions},
        ),
        notices=Notices(session.client("sqs"), config.dlq_url),
        leases=LeaseTable(dynamodb, config.table.table, clock),
        settings=config.decision_settings(),
        clock=clock,
        metric=metric,
        lease_duration=timedelta(seconds=config.lease_seconds),
        rollouts=dedicated_rollouts(config),
        hosts=HostStore(dynamodb, config.hosts_table) if config.hosts_table else None,
        placements=placements,
        migration=Migration(dynamodb, config.table, legacy, clock=clock) if legacy else None,
    )


def dedicated_rollouts(config: ReconcilerConfig) -> Rollouts:
    """The resync's rollouts: dedicated kinds only (a pooled observer's task is its host's, which
    the manager rolls by draining hosts, never by stopping the task under one observer)."""
    dedicated = [kind for kind in config.task_definitions if not config.options(kind).pooled]
    return Rollouts(
        revisions={kind: config.task_definitions[kind] for kind in dedicated},
        max_unavailable={kind: config.options(kind).max_unavailable for kind in dedicated},
    )


def powertools_metric(metric: ObserverMetric, kind: str | None, value: float) -> None:
    """The Lambda's metric sink: EMF through Powertools, with the ``kind`` dimension when known."""
    from vigil.telemetry import METRIC_UNITS, emit_one, metrics

    unit = METRIC_UNITS.get(metric, "Count")
    # Always the fleet-wide series (alarms use it), and per kind when the kind is known.
    metrics().add_metric(name=metric.value, unit=unit, value=value)
    if kind is None:
        return
    emit_one(metric.value, value, unit, kind=kind)
