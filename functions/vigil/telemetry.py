"""The Powertools objects every function and container logs, counts and traces with.

Their names (service, namespace, metrics) are the contract's (``vigil.contract.metrics``), which
infra builds the dashboard and alarms from.

Powertools objects are cheap to build (no I/O) but the Tracer pulls in the X-Ray SDK when tracing is
on, so it is built only on first use.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

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


LambdaHandler = Callable[[Any, Any], dict[str, Any]]


def tracing_enabled() -> bool:
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() not in ("1", "true")


def instrument(handler: LambdaHandler) -> LambdaHandler:
    """A guarded handler as every decorator (``@scheduled_job``, ``@task``) hands it to Lambda:
    the invocation's context on every log line, its metrics flushed at the end, and a trace
    unless tracing is off (building the tracer imports the X-Ray SDK)."""
    instrumented: LambdaHandler = logger().inject_lambda_context(clear_state=True)(handler)
    instrumented = metrics().log_metrics(instrumented)
    if tracing_enabled():
        instrumented = tracer().capture_lambda_handler(instrumented)
    return instrumented


def count_one(metric: str, **dimensions: str) -> None:
    """One count of ``metric`` under ``service`` and exactly ``dimensions``, written at once and
    apart from the invocation's other metrics (whose dimensions differ): a per-job or per-task
    count from a function that serves many."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    with single_metric(name=metric, unit=MetricUnit.Count, value=1, namespace=NAMESPACE) as one:
        one.add_dimension(name="service", value=SERVICE)
        for name, value in dimensions.items():
            one.add_dimension(name=name, value=value)
