"""Example job (policy ``allow``, cron in Europe/Prague): report on the business day that ended.

Reports of different days may run side by side; each day's report still runs once.
"""

from datetime import timedelta

from vigil import telemetry
from vigil.jobs import Run, scheduled_job


@scheduled_job
def handler(run: Run) -> None:
    day = (run.scheduled_at - timedelta(days=1)).date()
    telemetry.logger().info(
        "daily report",
        extra={"day": day.isoformat(), "fencing_token": run.fencing_token, "attempt": run.attempt},
    )
