"""Example job (policy ``allow``, cron in Europe/Prague): report on the business day that ended,
and email the report.

Reports of different days may run side by side; each day's report still runs once. The email is
an effect no write can fence (a mail API takes no condition), so it goes through ``run.once``:
a retried or taken-over run of the same day skips an email already sent, and one whose earlier
run died between sending and recording it ends UNCERTAIN for a person to settle (``vigil jobs
settle``) rather than sending a second email.
"""

from datetime import date, timedelta

from vigil import telemetry
from vigil.jobs import Run, scheduled_job

REPORT_EMAIL = "report-email"


@scheduled_job
def handler(run: Run) -> None:
    day = (run.scheduled_at - timedelta(days=1)).date()
    telemetry.logger().info(
        "daily report",
        extra={"day": day.isoformat(), "fencing_token": run.fencing_token, "attempt": run.attempt},
    )
    with run.once(REPORT_EMAIL) as first:
        if first:
            send_report(day)


def send_report(day: date) -> None:
    """The stand-in for the team's mail API (a call that cannot be made conditional): it logs
    the email it sends, which is what the demo and the tests count."""
    telemetry.logger().info("report emailed", extra={"day": day.isoformat()})
