"""Vigil's queues: encrypted, TLS-only, and retained on stack deletion unless the stack is a
throwaway (``infra.removal``). Most are dead-letter queues, kept for SQS's longest 14 days; the
tasks' work queues (``infra.background_task``) are built from the same base."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.errors import ConfigurationError
from infra.removal import data_removal_policy

DLQ_RETENTION_DAYS = 14


def check_retention(
    fail: Callable[[str, str], ConfigurationError], retention: Duration, record: str
) -> None:
    """A record must outlive the dead letter that may redrive it."""
    if retention.to_days(integral=False) < DLQ_RETENTION_DAYS:
        raise fail(
            "retention",
            f"must be at least {DLQ_RETENTION_DAYS} days, as long as a dead letter can wait "
            f"for a redrive: a redrive must find its {record}",
        )


def vigil_queue(
    scope: Construct,
    construct_id: str,
    *,
    fifo: bool = False,
    enforce_ssl: bool = True,
    **properties: Any,
) -> sqs.Queue:
    """A queue with the properties every Vigil queue shares; FIFO ones deduplicate only by the
    sender's ``MessageDeduplicationId`` (no content-based deduplication). ``enforce_ssl=False``
    only for a queue that :func:`tls_only_policy` covers with others."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=enforce_ssl,
        removal_policy=data_removal_policy(scope),
        # None on a standard queue: the template stays as it was before FIFO existed here.
        fifo=True if fifo else None,
        content_based_deduplication=False if fifo else None,
        **properties,
    )


def dead_letter_queue(
    scope: Construct, construct_id: str, *, fifo: bool = False, enforce_ssl: bool = True
) -> sqs.Queue:
    """``fifo`` for the dead-letter queue of a FIFO queue (SQS requires the same type)."""
    return vigil_queue(
        scope,
        construct_id,
        fifo=fifo,
        enforce_ssl=enforce_ssl,
        retention_period=Duration.days(DLQ_RETENTION_DAYS),
    )


def tls_only_policy(
    scope: Construct, construct_id: str, queues: Sequence[sqs.IQueue]
) -> sqs.QueuePolicy:
    """One queue policy for several queues (CloudFormation applies the document to each it
    lists): every request without TLS is refused, as ``enforce_ssl`` does for one queue. One
    resource instead of one per queue; statements added later (who may send) join it."""
    policy = sqs.QueuePolicy(scope, construct_id, queues=list(queues))
    policy.document.add_statements(
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["sqs:*"],
            resources=[queue.queue_arn for queue in queues],
            conditions={"Bool": {"aws:SecureTransport": "false"}},
        )
    )
    return policy
