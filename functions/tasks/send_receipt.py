"""Example task: send an order's receipt, once per order (the caller enqueues with the order's id
as the key, so a second enqueue, a redelivery or a redrive never sends a second receipt)."""

from typing import Any

from vigil import telemetry
from vigil.tasks import TaskRun, task


@task
def handler(run: TaskRun, payload: dict[str, Any]) -> dict[str, Any]:
    telemetry.logger().info(
        "sending receipt",
        extra={"email": payload.get("email"), "fencing_token": run.fencing_token},
    )
    return {"sent_to": payload.get("email")}
