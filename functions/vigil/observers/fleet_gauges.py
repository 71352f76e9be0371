"""The fleet's gauges, computed from the records one resync read: what the dashboard and alarms plot.

Every resync emits every gauge, zeros included, so a graph never has gaps where nothing is FAILED and
an alarm on "running below desired" compares two series sampled at the same instant.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from vigil.observers.decisions import Record
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
