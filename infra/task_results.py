"""``TaskResults``: the stack's bucket for task results too big to keep on a record.

A result over ``RESULT_INLINE_BYTES`` (4 KiB of JSON) is written by the task's function to
``<task>/<digest of the id>/<token>.json`` and the record keeps its location (``result_ref``):
the record stays about 1 KB, so a task keeps costing three write units and a later duplicate one
(``vigil.tasks.results``). One bucket per stack, created with its first task: private, TLS only,
S3-managed encryption, bucket-owner objects. Each task writes only under its own prefix and its
objects expire with its records (a lifecycle rule per task: its retention plus a day). The tasks
API function reads the declared tasks' prefixes (``GET /tasks/{task}/{id}`` answers the result);
operators read with their own credentials (``vigil tasks get``).
"""

from __future__ import annotations

import math

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.layout import Layout
from infra.removal import data_removal_policy
from vigil.contract.tasks import TaskEnv

CONSTRUCT_ID = "TaskResults"


class TaskResults(Construct):
    """The results bucket (see the module)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            removal_policy=data_removal_policy(scope),
        )

    def serve(self, task_name: str, retention_seconds: int, function: lambda_.Function) -> None:
        """``task_name``'s function writes its big results under its own prefix, which expire
        a day after its records would."""
        self.bucket.add_lifecycle_rule(
            id=f"expire-{task_name}",
            prefix=f"{task_name}/",
            expiration=Duration.days(math.ceil(retention_seconds / 86_400) + 1),
        )
        function.add_environment(TaskEnv.RESULTS_BUCKET.value, self.bucket.bucket_name)
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:PutObject"], resources=[self.bucket.arn_for_objects(f"{task_name}/*")]
            )
        )

    def grant_read(self, grantee: iam.IGrantable, task_name: str = "") -> None:
        """Reading every task's results (the tasks API function: the bucket holds nothing else,
        and one statement stays within IAM's policy size at any number of tasks), or only
        ``task_name``'s (an application's ``BackgroundTask.grant_read``)."""
        prefix = f"{task_name}/*" if task_name else "*"
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(prefix)]
            )
        )


def results_of(scope: Construct) -> TaskResults:
    """The stack's results bucket, created with the first task that asks, in the stack that holds
    the shards (one bucket whichever shard a task is in)."""
    stack = Layout.of(scope).stack
    existing = stack.node.try_find_child(CONSTRUCT_ID)
    if isinstance(existing, TaskResults):
        return existing
    return TaskResults(stack, CONSTRUCT_ID)
