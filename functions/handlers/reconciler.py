"""Reconciler Lambda: dispatches ECS task events, the minute's resync, and registry stream batches.

Thin on purpose: the shape of the event picks the pass; the passes live in vigil.observers.reconciler.
A malformed event raises before anything is read or written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

from vigil.events import MalformedEvent
from vigil.observers.ecs_tasks import task_state
from vigil.observers.kinds_catalog import with_kinds
from vigil.observers.reconciler import (
    Reconciler,
    ReconcilerConfig,
    build_reconciler,
    changed_records,
    powertools_metric,
)
from vigil.telemetry import logger, metrics, tracer

log = logger()


@cache
def config() -> ReconcilerConfig:
    """Its environment, and the kinds' placements and task definitions from the stack's kinds
    catalog (read once: a deploy that changes a kind or registers a revision changes the
    environment, so the container is replaced)."""
    import boto3

    return ReconcilerConfig.from_env(with_kinds(os.environ, lambda: boto3.client("ssm")))


@cache
def reconciler() -> Reconciler:
    return build_reconciler(config(), metric=powertools_metric)


@log.inject_lambda_context(clear_state=True)
@metrics().log_metrics
@tracer().capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request_id = getattr(context, "aws_request_id", "local")
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    time_left_s = (lambda: remaining() / 1000) if callable(remaining) else None
    return dispatch(event, request_id, reconciler(), config().cluster_arn, time_left_s)


def dispatch(
    event: Any,
    request_id: str,
    target: Reconciler,
    cluster_arn: str,
    time_left_s: Callable[[], float] | None = None,
) -> dict[str, Any]:
    if not isinstance(event, dict):
        raise MalformedEvent(f"expected a JSON object, got {type(event).__name__}")
    if "Records" in event:
        records = event["Records"]
        if not isinstance(records, list) or any(
            not isinstance(r, dict) or r.get("eventSource") != "aws:dynamodb" for r in records
        ):
            raise MalformedEvent("Records must be DynamoDB stream records")
        records = target.replay_legacy(records)  # an upgrade's old registry: onto its copies
        report = target.on_records(changed_records(records))
        _log_actions(report)
        log.info("stream pass", extra={"observers": report.observers, "started": report.started})
        return {"pass": "stream", "observers": report.observers}
    kind = event.get("detail-type")
    if event.get("source") == "aws.ecs" and kind == "ECS Task State Change":
        detail = event.get("detail")
        if (
            not isinstance(detail, dict)
            or not detail.get("taskArn")
            or not detail.get("lastStatus")
        ):
            raise MalformedEvent("ECS Task State Change without detail.taskArn/lastStatus")
        if detail.get("clusterArn") not in (None, cluster_arn):
            log.info(
                "event for another cluster ignored", extra={"cluster": detail.get("clusterArn")}
            )
            return {"pass": "event", "ignored": True}
        report = target.on_task_event(task_state(detail))
        _log_actions(report)
        log.info("event pass", extra={"task": detail["taskArn"], "actions": _names(report)})
        return {"pass": "event", "actions": _names(report)}
    if event.get("source") in ("aws.events", "aws.scheduler") and kind == "Scheduled Event":
        resync = target.resync(holder=request_id, time_left_s=time_left_s)
        if resync is None:
            log.info("resync skipped: another pass holds the lease (counted: ResyncSkipped)")
            return {"pass": "resync", "skipped": True}
        _log_actions(resync)
        log.info(
            "resync pass",
            extra={
                "observers": resync.observers,
                "described": resync.described,
                "started": resync.started,
                "orphans_stopped": resync.orphans_stopped,
            },
        )
        return {"pass": "resync", "observers": resync.observers, "described": resync.described}
    raise MalformedEvent(
        f"unrecognised event (source={event.get('source')!r}, detail-type={kind!r}): "
        "expected an ECS Task State Change, a Scheduled Event or DynamoDB stream records"
    )


def _log_actions(report: Any) -> None:
    """One line per action, keyed by observer: the reconciler's side of an observer's story."""
    for name, action in report.actions:
        log.info(
            "action",
            extra={
                "observer": name,
                "action": type(action).__name__,
                "generation": getattr(action, "generation", None),
                "reason": getattr(action, "reason", None),
            },
        )


def _names(report: Any) -> list[str]:
    return [type(action).__name__ for _, action in report.actions]
