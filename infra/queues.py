"""Every Vigil queue is a dead-letter queue: encrypted, TLS-only, kept for SQS's longest 14 days."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

DLQ_RETENTION_DAYS = 14


def dead_letter_queue(scope: Construct, construct_id: str) -> sqs.Queue:
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(DLQ_RETENTION_DAYS),
    )
