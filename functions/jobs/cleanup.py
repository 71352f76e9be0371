"""Example job (policy ``skip``): expire what is older than a window ending at the tick's time.

The cutoff is computed from ``run.scheduled_at``, not from the clock, so a retried or late run of
the same tick does exactly the same work; the fencing token goes with every write it would make.
"""

from datetime import timedelta

from vigil import telemetry
from vigil.jobs import Run, scheduled_job

RETENTION = timedelta(days=7)


@scheduled_job
def handler(run: Run) -> None:
    cutoff = run.scheduled_at - RETENTION
    telemetry.logger().info(
        "cleaning up",
        extra={
            "cutoff": cutoff.isoformat(),
            "fencing_token": run.fencing_token,
            "attempt": run.attempt,
        },
    )
