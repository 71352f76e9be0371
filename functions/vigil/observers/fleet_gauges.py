"""The fleet's gauges, computed from the records one resync read: what the dashboard and alarms plot.

Every resync emits every gauge, zeros included, so a graph never has gaps where nothing is FAILED and
an alarm on "running below desired" compares two series sampled at the same instant.

Pooled kinds: their share of desired and running comes from what every pass reads anyway (the
hosts scan and the waiting index, :func:`pooled_counts`), on every pass, so an all-pooled fleet,
whose resync reads the fleet index only every ``sweep_minutes``, still feeds FleetShortfall each
minute. The same source on every pass (sweep or not) keeps the series free of a sawtooth. A pooled
FAILED observer is on no host and in no index: it is not in the pooled desired count (the sweep's
FleetFailed gauge and its alarm report it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from vigil.contract.hosts import LIVE_HOST_STATUSES
from vigil.observers.decisions import Record
from vigil.observers.hosts.model import Host
from vigil.observers.model import Desired, Status
from vigil.telemetry import ObserverMetric

BY_STATUS: dict[Status, ObserverMetric] = {
    Status.PENDING: ObserverMetric.FLEET_PENDING,
    Status.STARTING: ObserverMetric.FLEET_STARTING,
    Status.RUNNING: ObserverMetric.FLEET_RUNNING,
    Status.STOPPING: ObserverMetric.FLEET_STOPPING,
    Status.STOPPED: ObserverMetric.FLEET_STOPPED,
    Status.FAILED: ObserverMetric.FLEET_FAILED,
}


def fleet_gauges(records: Iterable[Record], now: datetime) -> dict[ObserverMetric, float]:
    """Observers per status, how many are wanted running, and the oldest live heartbeat's age (s).

    The heartbeat age looks only at RUNNING observers: a stopped one's last heartbeat is old by design.
    """
    gauges: dict[ObserverMetric, float] = dict.fromkeys(BY_STATUS.values(), 0.0)
    gauges[ObserverMetric.FLEET_DESIRED] = 0.0
    oldest: float = 0.0
    for record in records:
        observer = record.observer
        gauges[BY_STATUS[observer.status]] += 1
        if observer.desired is Desired.RUNNING:
            gauges[ObserverMetric.FLEET_DESIRED] += 1
        if observer.status is Status.RUNNING and observer.heartbeat_at is not None:
            oldest = max(oldest, (now - observer.heartbeat_at).total_seconds())
    gauges[ObserverMetric.FLEET_OLDEST_HEARTBEAT_AGE] = oldest
    return gauges


@dataclass(frozen=True)
class PooledCounts:
    """Pooled observers wanted running and running, from the hosts and the waiting index."""

    desired: int = 0
    running: int = 0

    def gauges(self, dedicated: Iterable[Record] = ()) -> dict[ObserverMetric, float]:
        """FleetDesiredRunning and FleetRunning: these counts plus the dedicated records'."""
        desired, running = float(self.desired), float(self.running)
        for record in dedicated:
            desired += record.observer.desired is Desired.RUNNING
            running += record.observer.status is Status.RUNNING
        return {ObserverMetric.FLEET_DESIRED: desired, ObserverMetric.FLEET_RUNNING: running}


def pooled_counts(hosts: Iterable[Host], waiting: Iterable[str]) -> PooledCounts:
    """Wanted: every observer assigned to a host (or still on a LOST/STOPPED one whose loss is
    unfinished), still stopping on a host that handed it over, or waiting for a placement.
    Running: those a live host's last heartbeat runs at their assigned generation."""
    desired: set[str] = set(waiting)
    running: set[str] = set()
    for host in hosts:
        if host.status in LIVE_HOST_STATUSES:
            desired.update(host.assigned)
            desired.update(n for n, g in host.handover.items() if host.runs(n, g))
            running.update(n for n, g in host.assigned.items() if host.runs(n, g))
        elif not host.evacuated:
            desired.update(host.assigned)
    return PooledCounts(desired=len(desired), running=len(running))
