"""Example task (plain): send an order's receipt.

Enqueued with the order's id as the key, so an order placed twice (a double click, a retried
checkout request) sends one receipt. The receipt's number is derived from the order, not drawn,
so a retried attempt sends the very same receipt; the fencing token goes with the send, for a
mail service that can refuse a stale sender. The email is an effect no write can fence: it goes
through ``run.once``, so a retry skips a receipt already sent, and an attempt that died between
sending and recording it ends UNCERTAIN for a person to settle (``vigil tasks settle``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from vigil import telemetry
from vigil.tasks import TaskRun, task

RECEIPT_EMAIL = "receipt-email"


class InvalidOrder(ValueError):
    """The payload names no order or no address: retrying will not help, so the task says so
    (``no_retry_on``): FAILED at its first attempt, in the dead-letter queue with this message,
    where an operator sees it (and redrives it once the producer is fixed)."""


@task(no_retry_on=(InvalidOrder,))
def handler(run: TaskRun, payload: dict[str, Any]) -> dict[str, Any]:
    order, email = payload.get("order"), payload.get("email")
    if not order or not email:
        raise InvalidOrder(f"a receipt needs an order and an email, got {sorted(payload)}")
    total = payload.get("total", 0)
    receipt = "R-" + hashlib.sha256(str(order).encode()).hexdigest()[:10].upper()
    with run.once(RECEIPT_EMAIL) as first:
        if first:
            telemetry.logger().info(
                "receipt sent",
                extra={"order": order, "receipt": receipt, "fencing_token": run.fencing_token},
            )
    return {"receipt": receipt, "order": order, "email": email, "total": total}
