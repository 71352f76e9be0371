"""The fleet's gauges, computed from the records one resync read: what the dashboard and alarms plot.

Every resync emits every gauge, zeros included, so a graph never has gaps where nothing is FAILED and
an alarm on "running below desired" compares two series sampled at the same instant.

Pooled kinds: their share of desired and running comes from what every pass reads anyway (the
hosts scan and the waiting index, :func:`pooled_counts`), on every pass, so an all-pooled fleet,
whose resync reads the fleet index only every ``sweep_minutes``, still feeds FleetShortfall each
minute. The same source on every pass (sweep or not) keeps the series free of a sawtooth. A pooled
FAILED observer is on no host and in no index: it is not in the pooled desired count (the sweep's
FleetFailed gauge and its alarm report it).

FleetHandingOver: pooled observers in a planned hand-over (their old host still stopping them, or
their next generation not yet running on the new host), at most the kind's ``max_unavailable``
budget; FleetShortfall subtracts it, so a long rollout does not alarm while one that loses more
than its budget (a host dies meanwhile) still does. Dedicated hand-overs are not counted yet.
A hand-over is bounded by the start timeout: only onto a host that has started (RunTask gave it a
task; one that then never heartbeats is lost at the start timeout). One onto a host whose RunTask
is refused may never finish: it is a shortfall at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from vigil.contract.hosts import DEFAULT_MAX_UNAVAILABLE, LIVE_HOST_STATUSES
from vigil.observers.decisions import Record
from vigil.observers.host_fleet.model import Host
from vigil.observers.model import Desired, Status
from vigil.observers.rollout import budget
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
    gauges[ObserverMetric.FLEET_HANDING_OVER] = 0.0
    return gauges


@dataclass(frozen=True)
class PooledCounts:
    """Pooled observers wanted running and running, from the hosts and the waiting index."""

    desired: int = 0
    running: int = 0
    handing_over: int = 0

    def gauges(self, dedicated: Iterable[Record] = ()) -> dict[ObserverMetric, float]:
        """Desired, running and handing over: these counts plus the dedicated records'."""
        desired, running = float(self.desired), float(self.running)
        for record in dedicated:
            desired += record.observer.desired is Desired.RUNNING
            running += record.observer.status is Status.RUNNING
        return {
            ObserverMetric.FLEET_DESIRED: desired,
            ObserverMetric.FLEET_RUNNING: running,
            ObserverMetric.FLEET_HANDING_OVER: float(self.handing_over),
        }


def pooled_counts(
    hosts: Iterable[Host], waiting: Mapping[str, Iterable[str]], max_unavailable: Mapping[str, int]
) -> PooledCounts:
    """Wanted: every observer assigned to a host (or still on a LOST/STOPPED one whose loss is
    unfinished), still stopping on a host that handed it over, or waiting (kind -> names) for a
    placement. Running: those a live host's last heartbeat runs at their assigned generation.
    Handing over: see the module's docstring."""
    hosts = list(hosts)
    kind_of = {name: kind for kind, names in waiting.items() for name in names}
    running: set[str] = set()
    stopping: set[str] = set()
    handed: set[tuple[str, int]] = set()
    """(name, generation) every host handed over: its next generation is the hand-over's. Every
    host's entries, not one map merged (the last host scanned would win): a stale entry (a dead
    host's, or one the pass clears only once the next generation runs) then never hides a
    current one, whatever the scan order."""
    for host in hosts:
        handed.update(host.handover.items())
        if host.status in LIVE_HOST_STATUSES:
            kind_of.update(dict.fromkeys(host.assigned, host.kind))
            stopping.update(n for n, g in host.handover.items() if host.runs(n, g))
            kind_of.update(dict.fromkeys(stopping & host.handover.keys(), host.kind))
            running.update(n for n, g in host.assigned.items() if host.runs(n, g))
        elif not host.evacuated:
            kind_of.update(dict.fromkeys(host.assigned, host.kind))
    arriving = {
        n
        for host in hosts
        if host.status in LIVE_HOST_STATUSES and host.started
        for n, g in host.assigned.items()
        if (n, g - 1) in handed
    }
    moving = ((stopping | arriving) - running) & kind_of.keys()
    wanted = Counter(kind_of.values())
    in_flight = Counter(kind_of[n] for n in moving)
    allowed = sum(
        min(count, budget(max_unavailable.get(kind, DEFAULT_MAX_UNAVAILABLE), wanted[kind]))
        for kind, count in in_flight.items()
    )
    return PooledCounts(desired=len(kind_of), running=len(running), handing_over=allowed)
