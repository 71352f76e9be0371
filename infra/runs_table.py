"""The job runs table: one per stack, shared by every scheduled job (see vigil.jobs.store)."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.removal import data_removal_policy, deletion_protected
from vigil.contract.jobs import JOBS_INDEX


def records_table(scope: Construct, construct_id: str) -> dynamodb.Table:
    """A guard's records: pk/sk strings, on demand, expired by ``expires_at`` (epoch seconds),
    point-in-time recovery, kept as ``infra.removal`` keeps data unless the stack is a throwaway.
    The job runs and the tasks tables are both one."""
    # aws_dynamodb.Table rather than TableV2: the local emulator cannot deploy GlobalTable.
    removal_policy = data_removal_policy(scope)
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        time_to_live_attribute="expires_at",
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        removal_policy=removal_policy,
        deletion_protection=deletion_protected(removal_policy),
    )


class JobRunsTable(Construct):
    """The job runs table: every job's tick records, with the index ``vigil jobs list`` reads."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = records_table(self, "Table")
        self.table.add_global_secondary_index(
            index_name=JOBS_INDEX,
            partition_key=dynamodb.Attribute(name="entity", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="job", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.ALL,
        )
