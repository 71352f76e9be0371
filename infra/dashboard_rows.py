"""Dashboard rows for what AWS measures itself: Lambda functions, the API, ECS tasks per kind.

Vigil's own metrics (ticks, lifecycle, fleet gauges) are built in ``infra.monitoring`` and
``infra.observer_fleet.dashboard``; these read the AWS namespaces, so every function, the API and
every observer kind show their health too.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

PERIOD = Duration.minutes(5)
CONTAINER_INSIGHTS = "ECS/ContainerInsights"


def function_row(label: str, function: lambda_.IFunction) -> list[cloudwatch.IWidget]:
    """Invocations, errors and throttles; duration p50/p99; concurrent executions."""
    return [
        cloudwatch.GraphWidget(
            title=f"{label}: invocations, errors, throttles",
            left=[
                function.metric_invocations(period=PERIOD, statistic="Sum"),
                function.metric_errors(period=PERIOD, statistic="Sum"),
                function.metric_throttles(period=PERIOD, statistic="Sum"),
            ],
            width=8,
        ),
        cloudwatch.GraphWidget(
            title=f"{label}: duration (ms)",
            left=[
                function.metric_duration(period=PERIOD, statistic="p50", label="p50"),
                function.metric_duration(period=PERIOD, statistic="p99", label="p99"),
            ],
            width=8,
        ),
        cloudwatch.GraphWidget(
            title=f"{label}: concurrent executions",
            left=[function.metric("ConcurrentExecutions", period=PERIOD, statistic="Maximum")],
            width=8,
        ),
    ]


def shard_function_widget(title: str, function: lambda_.IFunction) -> cloudwatch.IWidget:
    """A job's or task's function on its shard's row, one graph: invocations, errors, throttles
    (left), duration p50 and p99 (right). AWS's own metrics: no series of ours."""
    return cloudwatch.GraphWidget(
        title=title,
        left=[
            function.metric_invocations(period=PERIOD, statistic="Sum"),
            function.metric_errors(period=PERIOD, statistic="Sum"),
            function.metric_throttles(period=PERIOD, statistic="Sum"),
        ],
        right=[
            function.metric_duration(period=PERIOD, statistic="p50", label="duration p50"),
            function.metric_duration(period=PERIOD, statistic="p99", label="duration p99"),
        ],
        width=8,
    )


def api_row(api: apigateway.RestApi) -> list[cloudwatch.IWidget]:
    """Requests, client and server errors; latency p50/p99 (whole request and the function's)."""
    return [
        cloudwatch.GraphWidget(
            title="observers API: requests, 4XX, 5XX",
            left=[
                api.metric_count(period=PERIOD, statistic="Sum", label="requests"),
                api.metric_client_error(period=PERIOD, statistic="Sum", label="4XX"),
                api.metric_server_error(period=PERIOD, statistic="Sum", label="5XX"),
            ],
            width=12,
        ),
        cloudwatch.GraphWidget(
            title="observers API: latency (ms)",
            left=[
                api.metric_latency(period=PERIOD, statistic="p50", label="p50"),
                api.metric_latency(period=PERIOD, statistic="p99", label="p99"),
                api.metric_integration_latency(
                    period=PERIOD, statistic="p99", label="function p99"
                ),
            ],
            width=12,
        ),
    ]


def kind_row(
    kind: str, cluster: ecs.ICluster, definition: ecs.TaskDefinition
) -> list[cloudwatch.IWidget]:
    """CPU and memory used against reserved by one kind's tasks (Container Insights, per family)."""

    def insight(name: str, label: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=CONTAINER_INSIGHTS,
            metric_name=name,
            dimensions_map={
                "ClusterName": cluster.cluster_name,
                "TaskDefinitionFamily": definition.family,
            },
            statistic="Average",
            period=PERIOD,
            label=label,
        )

    return [
        cloudwatch.GraphWidget(
            title=f"kind {kind}: CPU (units)",
            left=[insight("CpuUtilized", "used"), insight("CpuReserved", "reserved")],
            width=12,
        ),
        cloudwatch.GraphWidget(
            title=f"kind {kind}: memory (MiB)",
            left=[insight("MemoryUtilized", "used"), insight("MemoryReserved", "reserved")],
            width=12,
        ),
    ]


def queue_depth(queue: sqs.IQueue, label: str) -> cloudwatch.Metric:
    """The messages a queue holds (the most in 5 minutes), as one line of a graph."""
    return queue.metric_approximate_number_of_messages_visible(
        label=label, period=Duration.minutes(5), statistic="Maximum"
    )
