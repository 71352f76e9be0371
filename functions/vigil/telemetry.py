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
    PAUSED = "JobTickPaused"
    NEVER_DELIVERED = "JobTickNeverDelivered"
    TOO_LONG = "JobRunTooLong"
    TOO_SHORT = "JobRunTooShort"


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
