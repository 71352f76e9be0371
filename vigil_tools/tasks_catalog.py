"""A deployed (or local) stack's tasks: its tasks catalog (``vigil.catalog``), read once for the CLI,
the testing kit and ``vigil local up`` (which hands it to an application as
``VIGIL_TASKS_CATALOG``). A stack deployed before the catalogs had a ``TasksCatalog`` output: read
when there."""

from __future__ import annotations

import json
from typing import Any

from vigil.catalog import read_catalog
from vigil.contract.layout import Catalogued
from vigil_tools.stacks import stack_outputs

OUTPUT = "TasksCatalog"


def tasks_catalog(session: Any, stack: str) -> dict[str, dict[str, Any]]:
    """Per task, its whole entry (queues, table, scheduler role and group, function); empty when
    the app declares no task. Raises StackNotFound when the stack is not deployed."""
    outputs = stack_outputs(session.client("cloudformation"), stack)
    if OUTPUT in outputs:
        return dict(json.loads(outputs[OUTPUT] or "{}"))
    parts = read_catalog(session.client("ssm"), stack, Catalogued.TASKS)
    return {name: {**parts.shared, **entry} for name, entry in parts.entries.items()}
