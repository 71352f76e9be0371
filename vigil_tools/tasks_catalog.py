"""A deployed (or local) stack's tasks: its ``TasksCatalog`` output, read once for the CLI, the
testing kit and ``vigil local up`` (which hands it to an application as ``VIGIL_TASKS_CATALOG``)."""

from __future__ import annotations

import json
from typing import Any

from vigil_tools.stacks import stack_outputs

OUTPUT = "TasksCatalog"


def tasks_catalog(cloudformation: Any, stack: str) -> dict[str, dict[str, Any]]:
    """Per task, its queues, table, scheduler role and function; empty when the app declares
    no task (or predates tasks)."""
    return dict(json.loads(stack_outputs(cloudformation, stack).get(OUTPUT) or "{}"))
