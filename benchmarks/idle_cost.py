"""What the example app costs a month while idle, the alarm line counted in the synthesized app.

The alarm count moved with every alarm added, and the hand-written figure drifted from the code;
``make bench`` now counts the template's alarms and the metrics they read (CloudWatch bills a
standard alarm per metric it reads, so a metric-math alarm counts each of its metrics) and writes
the table into the deploying guide. The other rows are estimates of idle use, not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.helpers.monitoring import alarm_series
from vigil_tools.emulator.template import Synthesized, synthesize

ALARM_METRIC_MONTH = 0.10
"""$ per standard-resolution alarm metric a month (us-east-1, 2025 list price)."""
DASHBOARD_MONTH = 3.00
PRICED = (
    "us-east-1, on-demand list prices as AWS's pricing pages gave them in 2025 "
    "(approximate, free tiers ignored)"
)


@dataclass(frozen=True)
class Row:
    item: str
    price: str
    idle_use: str
    dollars: float
    approximate: bool = True


ESTIMATED = (
    Row(
        "Custom metrics (EMF)",
        "$0.30 per metric-month, prorated hourly",
        "~9 fleet series every minute, ~3 per job while it ticks",
        3.60,
    ),
    Row(
        "Lambda",
        "$0.20 per million requests, $0.0000166667 per GB-s",
        "resync every minute (1 GB, ~0.3 s), cleanup every 5 min",
        0.25,
    ),
    Row(
        "DynamoDB on-demand",
        "$0.625 per million WRU, $0.125 per million RRU, PITR $0.20 per GB-month",
        "resync lease and job claims, tiny tables",
        0.10,
    ),
    Row(
        "CloudWatch Logs",
        "$0.50 per GB ingested, $0.03 per GB-month stored",
        "a few lines per resync",
        0.05,
    ),
    Row(
        "SQS event source polling",
        "$0.40 per million requests (FIFO $0.50)",
        "Lambda's pollers long-poll each task queue even when idle: about 5 pollers x 3 receives a "
        "minute, ~650,000 requests a month per queue (an estimate, not measured here)",
        0.60,
    ),
    Row(
        "VPC, SNS (e-mail), API Gateway, Container Insights, EventBridge",
        "per use only",
        "none while idle",
        0.0,
        approximate=False,
    ),
)


def counted(synth: Synthesized) -> tuple[Row, Row]:
    """The dashboard and alarm rows, counted in the template."""
    dashboards = len(synth.resources("AWS::CloudWatch::Dashboard"))
    alarms = synth.resources("AWS::CloudWatch::Alarm").values()
    metrics = sum(len(alarm_series(alarm)) for alarm in alarms)
    return (
        Row(
            "CloudWatch dashboard",
            f"${DASHBOARD_MONTH:.2f} per dashboard-month (first 3 per account free)",
            str(dashboards),
            dashboards * DASHBOARD_MONTH,
            approximate=False,
        ),
        Row(
            "CloudWatch alarms",
            f"${ALARM_METRIC_MONTH:.2f} per standard alarm metric",
            f"{len(alarms)} alarms reading {metrics} metrics (counted in the synthesized template)",
            metrics * ALARM_METRIC_MONTH,
            approximate=False,
        ),
    )


def line(row: Row) -> str:
    """The row as the table shows it."""
    dollars = f"{'~' if row.approximate else ''}${row.dollars:.2f}"
    return f"| {row.item} | {row.price} | {row.idle_use} | {dollars} |"


def table(rows: tuple[Row, ...]) -> str:
    lines = ["| Item | Price | Idle use | Per month |", "|---|---|---|---:|"]
    lines += [line(row) for row in rows]
    total = sum(row.dollars for row in rows)
    lines.append(f"| **Total** | | | **about ${total:.2f}** |")
    return "\n".join(lines)


def run(synth: Synthesized | None = None) -> str:
    rows = counted(synth or synthesize()) + ESTIMATED
    return f"Prices: {PRICED}.\n\n{table(rows)}"


if __name__ == "__main__":
    print(run())
