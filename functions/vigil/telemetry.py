"""One place for the names that logs, metrics and traces share, so dashboards and code agree.

Powertools objects are cheap to build (no I/O) but the Tracer pulls in the X-Ray SDK when tracing is
on, so it is built only on first use.
"""

from __future__ import annotations

import os
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

SERVICE = "vigil"
NAMESPACE = "Vigil"


class JobMetric(StrEnum):
    """Metrics emitted per job; the dimension is ``job``."""

    SUCCEEDED = "JobRunSucceeded"
    FAILED = "JobRunFailed"
    DUPLICATE = "JobDuplicateSuppressed"
    SKIPPED = "JobTickSkipped"
    MISSED = "JobTickMissed"
    FENCED = "JobRunFenced"
    DURATION = "JobRunDuration"
    LATENESS = "JobTickLateness"
    MALFORMED = "JobEventMalformed"


class ObserverMetric(StrEnum):
    """Metrics of the observer fleet; per-observer ones carry the ``kind`` dimension."""

    CREATED = "ObserverCreated"
    STARTED = "ObserverStarted"
    RESTARTED = "ObserverRestarted"
    STOPPED = "ObserverStopped"
    FAILED = "ObserverFailed"
    ORPHAN_STOPPED = "ObserverOrphanStopped"
    STALE_EVENT_IGNORED = "ObserverStaleEventIgnored"
    RUN_TASK_FAILED = "ObserverRunTaskFailed"
    HEARTBEAT_STALE = "ObserverHeartbeatStale"
    FENCED = "ObserverFenced"
    RECONCILE_DURATION = "ReconcilePassDuration"
    # Gauges every resync emits for the whole fleet (vigil.observers.fleet_gauges).
    FLEET_DESIRED = "FleetDesiredRunning"
    FLEET_PENDING = "FleetPending"
    FLEET_STARTING = "FleetStarting"
    FLEET_RUNNING = "FleetRunning"
    FLEET_STOPPING = "FleetStopping"
    FLEET_STOPPED = "FleetStopped"
    FLEET_FAILED = "FleetFailed"
    FLEET_OLDEST_HEARTBEAT_AGE = "FleetOldestHeartbeatAge"


METRIC_UNITS: dict[str, str] = {
    ObserverMetric.RECONCILE_DURATION: "Milliseconds",
    ObserverMetric.FLEET_OLDEST_HEARTBEAT_AGE: "Seconds",
}
"""CloudWatch units of the metrics that are not counts."""


@cache
def logger() -> Logger:
    return Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", SERVICE))


@cache
def metrics() -> Metrics:
    return Metrics(
        namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE),
        service=os.environ.get("POWERTOOLS_SERVICE_NAME", SERVICE),
    )


@cache
def tracer() -> Tracer:
    from aws_lambda_powertools import Tracer

    # Only boto calls are worth a subsegment; patching every library X-Ray knows costs start-up time.
    return Tracer(
        service=os.environ.get("POWERTOOLS_SERVICE_NAME", SERVICE), patch_modules=["botocore"]
    )
