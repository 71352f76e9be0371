"""The tasks table: one per stack, shared by every background task, separate from the job runs.

One item per task (``pk = TASK#<task>``, ``sk = <id>``; ``vigil.contract.tasks``), written at most
three times (enqueue, claim, finish). No index: a GSI would add a write unit to each of those writes;
``vigil tasks list`` queries a task's own partition.
"""

from __future__ import annotations

from constructs import Construct

from infra.runs_table import records_table


class TasksTable(Construct):
    """The tasks table: one record per task (no index; see the module)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = records_table(self, "Table")
