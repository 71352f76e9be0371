"""Every Vigil queue is a dead-letter queue: encrypted, TLS-only, kept for SQS's longest 14 days,
and retained on stack deletion unless the stack is a throwaway (``infra.removal``)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.removal import data_removal_policy

DLQ_RETENTION_DAYS = 14


def dead_letter_queue(scope: Construct, construct_id: str) -> sqs.Queue:
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(DLQ_RETENTION_DAYS),
        removal_policy=data_removal_policy(scope),
    )
