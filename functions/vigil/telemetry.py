"""The Powertools objects every function and container logs, counts and traces with.

Their names (service, namespace, metrics, dimensions) are the contract's (``vigil.contract.metrics``),
which infra builds the dashboard and alarms from. In a named stage (``VIGIL_STAGE``, set by the
constructs) every metric also carries the ``stage`` dimension, so each stage's alarms read its own.

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
from vigil.contract.metrics import STAGE_DIMENSION
from vigil.contract.metrics import JobMetric as JobMetric
from vigil.contract.metrics import ObserverMetric as ObserverMetric
from vigil.contract.metrics import TaskMetric as TaskMetric
from vigil.contract.metrics import dimensions as metric_dimensions
from vigil.contract.stages import current_stage as stage

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer


@cache
def logger() -> Logger:
    return Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", SERVICE))


@cache
def metrics() -> Metrics:
    emitter = Metrics(
        namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE),
        service=os.environ.get("POWERTOOLS_SERVICE_NAME", SERVICE),
    )
    named = stage()
    if named is not None:
        # Default dimensions survive every flush: all the invocation's metrics carry the stage.
        emitter.set_default_dimensions(**{STAGE_DIMENSION: named})
    return emitter


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
    """One count of ``metric`` under ``service``, the stage and exactly ``dimensions``, written
    at once and apart from the invocation's other metrics (whose dimensions differ): a per-job,
    per-task or per-kind count from a function or container that serves many."""
    emit_one(metric, 1, "Count", **dimensions)


def emit_one(metric: str, value: float, unit: str, **dimensions: str) -> None:
    """One value of ``metric`` under ``service``, the stage and exactly ``dimensions``, written at
    once (a ``single_metric``): the one way a metric with dimensions of its own is emitted."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    with single_metric(
        name=metric,
        unit=MetricUnit(unit),
        value=value,
        namespace=NAMESPACE,
        default_dimensions=metric_dimensions(stage(), **dimensions),
    ):
        pass
