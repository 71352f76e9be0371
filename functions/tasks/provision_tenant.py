"""Example ordered task: provision a tenant's resources; the tenant is the group, so one tenant's
steps run one at a time, in the order they were enqueued."""

from typing import Any

from vigil import telemetry
from vigil.tasks import TaskRun, task


@task
def handler(run: TaskRun, payload: dict[str, Any]) -> dict[str, Any]:
    telemetry.logger().info(
        "provisioning",
        extra={"step": payload.get("step"), "fencing_token": run.fencing_token},
    )
    run.progress(100, "done")
    return {"step": payload.get("step")}
