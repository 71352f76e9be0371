"""The Powertools objects every function and container logs, counts and traces with.

Their names (service, namespace, metrics) are the contract's (``vigil.contract.metrics``), which
infra builds the dashboard and alarms from.

Powertools objects are cheap to build (no I/O) but the Tracer pulls in the X-Ray SDK when tracing is
on, so it is built only on first use.
"""

from __future__ import annotations

import os
from functools import cache
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import Metrics

from vigil.contract.metrics import METRIC_UNITS as METRIC_UNITS
from vigil.contract.metrics import NAMESPACE as NAMESPACE
from vigil.contract.metrics import SERVICE as SERVICE
from vigil.contract.metrics import JobMetric as JobMetric
from vigil.contract.metrics import ObserverMetric as ObserverMetric
from vigil.contract.metrics import TaskMetric as TaskMetric

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer


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
