"""The resync pass: once a minute, level-triggered, so nothing is lost to a missed event.

Under a fenced lease, so only one runs at a time, it reads the fleet index (every observer but the
STOPPED ones: a pass costs the same whatever stopped records the account keeps), lists
the cluster's running tasks (one page per 100), describes only the tasks that need a look (stale
heartbeat, not listed), hands outdated observers over to their kind's current task definition
within the rollout budget (:mod:`.rollouts`), and sweeps orphans. Fargate takes about 20 RunTask/s,
so a mass start is spread over passes (``max_starts``), each within Lambda's time.

The lease is released through :func:`vigil.persist.persist`: a release lost to a throttle would
keep the lease for its whole duration (Lambda's timeout plus a minute), and every resync until then
would be skipped. A skipped resync is counted (``ResyncSkipped``); skips in consecutive minutes
alarm, since events lost meanwhile wait for the lease to expire.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from vigil.clock import Clock, Sleeper, system_clock
from vigil.contract.observers import RESYNC_LEASE
from vigil.leases import Lease, LeaseHeld, LeaseTable
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import EcsTasks
from vigil.observers.fleet_gauges import fleet_gauges
from vigil.observers.fleet_store import FleetStore
from vigil.observers.model import Status
from vigil.observers.reconciler.executor import Settler
from vigil.observers.reconciler.hosts import HostManager, sweep_due
from vigil.observers.reconciler.orphans import OrphanSweep
from vigil.observers.reconciler.report import MetricSink, PassReport, isolated, no_metrics
from vigil.observers.reconciler.rollouts import Rollouts
from vigil.persist import OutOfTime, persist
from vigil.telemetry import ObserverMetric, logger

RESYNC_LEASE_KEY = {"kind": RESYNC_LEASE, "name": RESYNC_LEASE}
"""The lease's item in the registry (keyed by kind; :meth:`FleetStore.ref` gives it for either
layout)."""


@dataclass(frozen=True, kw_only=True)
class ResyncPass:
    store: FleetStore
    ecs: EcsTasks
    leases: LeaseTable
    settler: Settler
    sweep: OrphanSweep
    settings: d.Settings
    clock: Clock = system_clock
    sleeper: Sleeper = time.sleep
    metric: MetricSink = no_metrics
    lease_duration: timedelta = timedelta(minutes=5)
    max_starts: int = 1000
    """Fargate takes about 20 RunTask/s: a mass start is spread over passes."""
    rollouts: Rollouts = field(default_factory=Rollouts)
    """Hands outdated RUNNING observers over to their kind's current task definition."""
    hosts: HostManager | None = None
    """The pooled kinds' manager (None: every kind is dedicated)."""
    dedicated_kinds: bool = True
    """False when every kind is pooled: the fleet index is read only on sweep passes."""
    max_relists: int = 1000
    """Records moved to the index their status belongs to, at most, per pass (the upgrade's
    backfill of a large account is spread over passes, each within Lambda's time)."""

    def run(self, holder: str, time_left_s: Callable[[], float] | None = None) -> PassReport | None:
        """None when another pass holds the lease. ``time_left_s``: the invocation's time left
        (Lambda's context); the release is retried within it and within the lease."""
        key = self.store.ref.special(RESYNC_LEASE)
        lease = self.leases.acquire(key, holder, self.lease_duration)
        if isinstance(lease, LeaseHeld):
            self.metric(ObserverMetric.RESYNC_SKIPPED, None, 1)
            return None
        started = time.monotonic()
        report: PassReport | None = None
        try:
            report = self._pass()
            return report
        finally:
            self._release(lease, time_left_s)
            elapsed_ms = (time.monotonic() - started) * 1000
            self.metric(ObserverMetric.RECONCILE_DURATION, None, elapsed_ms)
            if report is not None:
                self.metric(ObserverMetric.PASS_ERRORS, None, report.errors)

    def _release(self, lease: Lease, time_left_s: Callable[[], float] | None) -> None:
        """Retried through throttles while both the invocation and the lease have time; past
        that the lease expires by itself (and the skipped resyncs meanwhile are counted)."""

        def left() -> float:
            in_lease = (lease.until - self.clock()).total_seconds()
            return min(in_lease, time_left_s()) if time_left_s is not None else in_lease

        try:
            persist(lambda: self.leases.release(lease), time_left_s=left, sleep=self.sleeper)
        except OutOfTime as gave_up:
            logger().warning(
                "resync lease not released: it expires by itself",
                extra={"until": lease.until.isoformat(), "error": str(gave_up)},
            )

    def _pass(self) -> PassReport:
        if self.hosts is None:
            report = PassReport()
            records, gauges = self._read_fleet(report)
            self._emit(gauges)
            running = set(self.ecs.running())
            self._dedicated(records, running, report)
            return report
        return self._with_hosts(self.hosts)

    def _with_hosts(self, manager: HostManager) -> PassReport:
        """Hosts first (a failover should not wait behind the dedicated fleet), then the index
        when the fleet has dedicated kinds or a sweep is due (see ``reconciler.hosts``)."""
        report = PassReport()
        hosts = manager.resync(self.ecs.running, report)  # reads the hosts, then lists the tasks
        running = hosts.running
        if not (self.dedicated_kinds or manager.sweep_due(self.clock())):
            self._emit(hosts.counts.gauges())
            return report
        records, gauges = self._read_fleet(report)
        pooled = [r for r in records if manager.placer.pooled(r.observer.kind)]
        dedicated = [r for r in records if not manager.placer.pooled(r.observer.kind)]
        self._emit({**gauges, **hosts.counts.gauges(dedicated)})
        manager.check(pooled, report)
        self._dedicated(dedicated, running - hosts.task_arns, report)
        return report

    def _read_fleet(self, report: PassReport) -> tuple[list[d.Record], dict[ObserverMetric, float]]:
        """The records to decide (the fleet index: all but the STOPPED ones) and their gauges.

        A STOPPED record found there was written before the stopped index existed (or by a
        writer of that time, during a deployment): this pass moves it out, so the first pass
        after the upgrade is the backfill, and later ones find none. FleetStopped is counted on
        a sweep minute only, from the stopped index's small items; the same read moves back a
        record an older writer restarted there (it would otherwise never be decided)."""
        now = self.clock()
        records: list[d.Record] = []
        strays: dict[str, Status] = {}
        for record in self.store.fleet():
            if record.observer.status is Status.STOPPED:
                strays[record.name] = Status.STOPPED
            else:
                records.append(record)
        report.observers += len(records)
        gauges = fleet_gauges(records, now)
        del gauges[ObserverMetric.FLEET_STOPPED]
        if self.hosts.sweep_due(now) if self.hosts is not None else sweep_due(now):
            stopped = {**self.store.stopped(), **strays}  # (strays: still to move, counted)
            gauges[ObserverMetric.FLEET_STOPPED] = sum(
                1 for status in stopped.values() if status is Status.STOPPED
            )
            strays.update((n, s) for n, s in stopped.items() if s is not Status.STOPPED)
        for name, status in list(strays.items())[: self.max_relists]:
            with isolated(name, report):
                self.store.relist(name, status)
        return records, gauges

    def _emit(self, gauges: dict[ObserverMetric, float]) -> None:
        for gauge, value in gauges.items():
            self.metric(gauge, None, value)

    def _dedicated(self, records: list[d.Record], running: set[str], report: PassReport) -> None:
        to_describe: dict[str, d.Record] = {}
        due = self.rollouts.due(records)
        for record in records:
            arn = record.observer.task_arn
            evidence: d.Evidence = d.Listed(arn in running) if arn else None
            plan = d.decide(record, evidence, self.clock(), self.settings)
            plan = self.rollouts.replace(record, plan, due)
            if plan.look is not None:
                to_describe[plan.look] = record
                continue
            if report.started >= self.max_starts and plan.starts:
                report.note(record.name, d.Ignore("start deferred: this pass started its maximum"))
                continue
            with isolated(record.name, report):
                self.settler.settle(record, evidence, report, first=plan)
        if to_describe:
            self._count_stale(to_describe.values())
            described = self.ecs.describe(to_describe)
            report.described += len(to_describe)
            for arn, record in to_describe.items():
                with isolated(record.name, report):
                    self.settler.settle(record, described[arn], report)
        self.sweep.sweep(records, running, report)

    def _count_stale(self, records: Iterable[d.Record]) -> None:
        now = self.clock()
        stale = sum(
            1
            for r in records
            if r.observer.heartbeat_at is not None
            and now - r.observer.heartbeat_at > self.settings.stale_after
        )
        if stale:
            self.metric(ObserverMetric.HEARTBEAT_STALE, None, stale)
