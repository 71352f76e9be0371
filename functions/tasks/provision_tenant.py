"""Example task (ordered per tenant): provision, change or remove a tenant, step by step.

Enqueued with ``group=<tenant>``: a tenant's tasks run one at a time, in the order they were
enqueued (create before resize before delete), while different tenants proceed side by side.
Progress is recorded between steps, readable on the task's record while it runs.
"""

from __future__ import annotations

from typing import Any

from vigil import telemetry
from vigil.tasks import TaskRun, task

STEPS = {
    "create": ("database", "bucket", "dns"),
    "resize": ("database",),
    "delete": ("dns", "bucket", "database"),
}


class UnknownAction(ValueError):
    pass


@task
def handler(run: TaskRun, payload: dict[str, Any]) -> dict[str, Any]:
    tenant, action = payload.get("tenant"), payload.get("action", "create")
    steps = STEPS.get(str(action))
    if not tenant or steps is None:
        raise UnknownAction(f"need a tenant and one of {sorted(STEPS)}, got {payload}")
    for done, step in enumerate(steps, start=1):
        telemetry.logger().info(
            "provisioning",
            extra={"tenant": tenant, "action": action, "step": step, "token": run.fencing_token},
        )
        run.progress(done * 100 // len(steps), f"{action} {step}")
    return {"tenant": tenant, "action": action, "steps": list(steps)}
