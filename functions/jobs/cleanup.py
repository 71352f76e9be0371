"""Example job (policy ``skip``): delete the sessions idle for longer than a window ending at the
tick's time, through ``run.fenced`` (a run that was taken over cannot write after its successor).

The cutoff is computed from ``run.scheduled_at``, not from the clock, so a retried or late run of
the same tick does exactly the same work. Each deletion is conditional on the session still being
idle (one seen since the scan is kept), and the fence rides on the same request. The run ends by
writing its summary item (``LAST_RUN``): a run frozen past its lease and taken over finds that
write refused (``Fenced``, the run ends FENCED), and the item keeps its successor's summary.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
from botocore.exceptions import ClientError

from vigil import telemetry
from vigil.jobs import Run, scheduled_job

RETENTION = timedelta(days=7)
SESSIONS = "Sessions"
"""The table app.py declares in the job's ``writes=[...]`` (its alias there)."""
LAST_RUN = "#cleanup"
"""The key of the item each run ends by writing: which tick cleaned up last, and what it did."""


@scheduled_job
def handler(run: Run) -> None:
    cutoff = run.scheduled_at - RETENTION
    sessions = run.fenced.table(SESSIONS)
    telemetry.logger().info(
        "cleaning up",
        extra={"cutoff": cutoff.isoformat(), "attempt": run.attempt, "table": sessions.table},
    )
    deleted = kept = 0
    idle = {":cutoff": {"N": str(int(cutoff.timestamp()))}}
    for key in idle_sessions(sessions.table, idle):
        try:
            sessions.delete_item(
                Key=key, ConditionExpression="last_seen < :cutoff", ExpressionAttributeValues=idle
            )
            deleted += 1
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            kept += 1  # seen again since the scan, or already deleted
    sessions.put_item(Item=summary(run, cutoff, deleted))
    telemetry.logger().info("cleaned up", extra={"deleted": deleted, "kept": kept})


def idle_sessions(table: str, idle: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The keys of the sessions last seen before the cutoff (the summary item has no
    ``last_seen``, so it is never one)."""
    pages = boto3.client("dynamodb").get_paginator("scan")
    for page in pages.paginate(
        TableName=table,
        FilterExpression="last_seen < :cutoff",
        ExpressionAttributeValues=idle,
        ProjectionExpression="id",
    ):
        yield from page.get("Items", [])


def summary(run: Run, cutoff: datetime, deleted: int) -> dict[str, Any]:
    return {
        "id": {"S": LAST_RUN},
        "tick": {"S": run.tick},
        "attempt": {"N": str(run.attempt)},
        "cutoff": {"S": cutoff.isoformat()},
        "deleted": {"N": str(deleted)},
    }
