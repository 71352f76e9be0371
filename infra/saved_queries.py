"""CloudWatch Logs Insights queries saved in the stack, for the questions operators ask.

Each query carries a placeholder to replace in the console before running it (``TICK`` is a
scheduled time as the logs write it, ``2026-11-22T12:00:00Z``; ``OBSERVER`` an observer's name).
Field names are the Powertools keys the runtime appends: ``job``/``tick``/``delivery`` on a job's
lines, ``observer``/``generation``/``kind`` on a container's and on the reconciler's.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

TICK_PLACEHOLDER = "TICK"
OBSERVER_PLACEHOLDER = "OBSERVER"


def saved_queries(
    scope: Construct,
    *,
    job_logs: Sequence[logs.ILogGroup],
    observer_logs: Sequence[logs.ILogGroup],
) -> list[logs.QueryDefinition]:
    """One tick's story and the last errors per job (jobs' logs); one observer's story (fleet's)."""
    prefix = f"{Stack.of(scope).stack_name}/"
    queries: list[logs.QueryDefinition] = []
    if job_logs:
        queries.append(
            logs.QueryDefinition(
                scope,
                "TickStory",
                query_definition_name=f"{prefix}one tick's story",
                log_groups=list(job_logs),
                query_string=logs.QueryString(
                    fields=[
                        "@timestamp",
                        "job",
                        "tick",
                        "delivery",
                        "level",
                        "message",
                        "result.outcome",
                        "result.attempt",
                        "result.fencing_token",
                        "exception_name",
                        "@requestId",
                    ],
                    filter_statements=[f'tick = "{TICK_PLACEHOLDER}"'],
                    sort="@timestamp asc",
                    limit=200,
                ),
            )
        )
        queries.append(
            logs.QueryDefinition(
                scope,
                "LastErrorsPerJob",
                query_definition_name=f"{prefix}last errors per job",
                log_groups=list(job_logs),
                query_string=logs.QueryString(
                    filter_statements=['level = "ERROR"'],
                    stats_statements=[
                        "count(*) as errors, latest(@timestamp) as last_at, "
                        "latest(tick) as last_tick, latest(exception_name) as error, "
                        "latest(message) as message by job"
                    ],
                    sort="last_at desc",
                ),
            )
        )
    if observer_logs:
        queries.append(
            logs.QueryDefinition(
                scope,
                "ObserverStory",
                query_definition_name=f"{prefix}one observer's story",
                log_groups=list(observer_logs),
                query_string=logs.QueryString(
                    fields=[
                        "@timestamp",
                        "observer",
                        "generation",
                        "kind",
                        "level",
                        "message",
                        "action",
                        "reason",
                        "task_arn",
                        "@log",
                    ],
                    filter_statements=[f'observer = "{OBSERVER_PLACEHOLDER}"'],
                    sort="@timestamp asc",
                    limit=1000,
                ),
            )
        )
    return queries
