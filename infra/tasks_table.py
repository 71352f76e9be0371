"""The tasks table: one per stack, shared by every background task, separate from the job runs.

One item per task (``pk = TASK#<task>``, ``sk = <id>``; ``vigil.contract.tasks``), written three
times on the clean path (enqueue, claim, finish). One sparse index, ``retries`` (``pk``,
``retry_at``, keys only): an item is in it only while it waits for a retry, so the clean path
writes it never, a failed attempt twice (the finish that sets the retry, the claim that takes it).
The stranded-tasks audit reads it. A second, ``deadlines`` (``pk``, ``deadline``, keys only),
holds the records of tasks that declare ``max_duration`` from their first claim to their final
finish (two index writes a task, none for a task without ``max_duration``): the audit's stuck
tasks. An index over every record would add a write unit to each of the three writes;
``vigil tasks list`` queries a task's own partition instead.
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.runs_table import records_table
from vigil.contract.tasks import (
    DEADLINE_ATTRIBUTE,
    DEADLINES_INDEX,
    RETRIES_INDEX,
    RETRY_AT_ATTRIBUTE,
)


class TasksTable(Construct):
    """The tasks table: one record per task, and the sparse indexes of retries and deadlines
    (see the module)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = records_table(self, "Table")
        for index, sort_key in (
            (RETRIES_INDEX, RETRY_AT_ATTRIBUTE),
            (DEADLINES_INDEX, DEADLINE_ATTRIBUTE),
        ):
            self.table.add_global_secondary_index(
                index_name=index,
                partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
                sort_key=dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.STRING),
                projection_type=dynamodb.ProjectionType.KEYS_ONLY,
            )
