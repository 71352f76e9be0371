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
TICK_FIELDS = [
    "job",
    "tick",
    "delivery",
    "result.outcome",
    "result.attempt",
    "result.fencing_token",
    "exception_name",
    "@requestId",
]


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
            _story(
                scope,
                "TickStory",
                f"{prefix}one tick's story",
                job_logs,
                key="tick",
                placeholder=TICK_PLACEHOLDER,
                fields=TICK_FIELDS,
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
            _story(
                scope,
                "ObserverStory",
                f"{prefix}one observer's story",
                observer_logs,
                key="observer",
                placeholder=OBSERVER_PLACEHOLDER,
                fields=["observer", "generation", "kind", "action", "reason", "task_arn", "@log"],
            )
        )
    return queries


def _story(
    scope: Construct,
    construct_id: str,
    name: str,
    groups: Sequence[logs.ILogGroup],
    *,
    key: str,
    placeholder: str,
    fields: list[str],
) -> logs.QueryDefinition:
    """Every line carrying one value of ``key``, oldest first."""
    return logs.QueryDefinition(
        scope,
        construct_id,
        query_definition_name=name,
        log_groups=list(groups),
        query_string=logs.QueryString(
            fields=["@timestamp", "level", "message", *fields],
            filter_statements=[f'{key} = "{placeholder}"'],
            sort="@timestamp asc",
            limit=1000,
        ),
    )
