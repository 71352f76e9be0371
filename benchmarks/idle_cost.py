"""What the example app costs a month while idle: the alarm line counted in the synthesized app,
the metric series, invocations and traces measured on the emulator.

The alarm count moved with every alarm added, and the hand-written figure drifted from the code;
``make bench`` now counts the template's alarms and the metrics they read (CloudWatch bills a
standard alarm per metric it reads, so a metric-math alarm counts each of its metrics) and writes
the table into the deploying guide. The custom metrics, Lambda and X-Ray rows were estimates that
understated (issue 33 item 17: 14 continuous series, not ~9; traces missing; Lambda at x86 prices
while the functions run on arm64): they are now measured by deploying the app on the emulator and
leaving it idle for :data:`IDLE_HOURS` simulated hours, reading back every EMF line its functions
printed and counting its invocations. The other rows are estimates of idle use, not counted.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.helpers.monitoring import alarm_series
from vigil_tools.emulator.template import Synthesized, synthesize

ALARM_METRIC_MONTH = 0.10
"""$ per standard-resolution alarm metric a month (us-east-1, 2025 list price)."""
SQS_REQUEST = 0.40 / 1e6
IDLE_RECEIVES_A_MONTH = 650_000
"""Lambda's pollers on one idle queue: about 5 pollers x 3 receives a minute (an estimate)."""
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


METRIC_MONTH = 0.30
"""$ per custom metric series a month (first 10,000), prorated by the hours it is put."""
LAMBDA_REQUEST = 0.20 / 1_000_000
LAMBDA_ARM_GB_SECOND = 0.0000133334
"""arm64 (Graviton) duration price, $ per GB-s: every Vigil function is arm64 (``infra.function``)."""
XRAY_TRACE = 5.00 / 1_000_000
"""$ per trace recorded (active tracing on every function; at an idle stack's rate of about one
invocation a minute per schedule, the default sampling rule, the first request each second,
records every one)."""
ASSUMED_SECONDS = 0.3
"""A resync's or an idle tick's duration on AWS (the emulator's is not Lambda's): an estimate."""
IDLE_HOURS = 3
HOURS_A_MONTH = 730


@dataclass(frozen=True)
class Idle:
    """What the idle app did in :data:`IDLE_HOURS` simulated hours."""

    series_hours: dict[tuple[str, ...], int]
    """Each metric series (namespace, name, dimensions) -> the hours it was put in."""
    invocations: dict[str, int]
    """Function name -> invocations."""
    memory_mb: dict[str, int]
    hours: int

    @property
    def continuous(self) -> list[tuple[str, ...]]:
        """The series put in every hour: each a whole metric-month."""
        return sorted(s for s, hours in self.series_hours.items() if hours >= self.hours)

    def per_month(self, count: float) -> float:
        return count * HOURS_A_MONTH / self.hours


def measure_idle(synth: Synthesized, hours: int = IDLE_HOURS) -> Idle:
    """Deploy ``synth`` on a fresh emulator and leave it idle ``hours`` simulated hours: every
    schedule and the resync run; nothing is enqueued and no observer is created."""
    import boto3
    from freezegun import freeze_time
    from moto import mock_aws

    from vigil_tools.emulator.account import REGION, deploy_account
    from vigil_tools.testing.plugin import START
    from vigil_tools.testing.stack import VigilStack

    invocations: Counter[str] = Counter()
    default_session = boto3.DEFAULT_SESSION
    with tempfile.TemporaryDirectory() as logs, mock_aws(), freeze_time(START) as frozen:
        boto3.setup_default_session(
            region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
        )
        try:
            account = deploy_account(synth, boto3.DEFAULT_SESSION)
            stack = VigilStack(
                account, now=lambda: datetime.now(UTC), move_to=frozen.move_to, log_dir=Path(logs)
            )
            with _counted(stack.runtime, invocations):
                stack.advance(hours=hours)
            stack.close()
            series = series_hours(Path(logs))
        finally:
            boto3.DEFAULT_SESSION = default_session
    functions = {
        _label(logical_id, resource.get("Properties", {})): resource.get("Properties", {})
        for _, stack in synth.stacks()  # the parent and its shards
        for logical_id, resource in stack.resources("AWS::Lambda::Function").items()
    }

    def known(invoked: str) -> str:
        """The function's label: its fixed name, or the logical id its generated name holds."""
        return next((label for label in functions if label in invoked), invoked)

    counted = Counter[str]()
    for invoked, count in invocations.items():
        counted[known(invoked)] += count
    memory = {label: int(props.get("MemorySize", 128)) for label, props in functions.items()}
    return Idle(series, dict(counted), memory, hours)


def _label(logical_id: str, props: dict[str, Any]) -> str:
    name = props.get("FunctionName")
    return name if isinstance(name, str) else logical_id[:-8]  # less the CDK's hash


@contextmanager
def _counted(runtime: Any, counts: Counter[str]) -> Iterator[None]:
    """Count every invocation the runtime makes (schedules, rules, queues, async retries)."""
    invoke = runtime.invoke

    def counting(function: str, event: Any, request_id: str | None = None) -> Any:
        counts[function.rsplit(":", 1)[-1]] += 1
        return invoke(function, event, request_id)

    runtime.invoke = counting
    try:
        yield
    finally:
        runtime.invoke = invoke


def series_hours(logs: Path) -> dict[tuple[str, ...], int]:
    """Every EMF series in the functions' logs -> the distinct hours it was put in."""
    hours: dict[tuple[str, ...], set[int]] = defaultdict(set)
    for path in logs.glob("*.log"):
        for line in path.read_text().splitlines():
            if '"_aws"' not in line:
                continue
            record = json.loads(line)
            meta = record["_aws"]
            hour = int(meta["Timestamp"]) // 3_600_000
            for directive in meta["CloudWatchMetrics"]:
                for dimensions in directive["Dimensions"] or [[]]:
                    dims = tuple(f"{d}={record[d]}" for d in sorted(dimensions))
                    for metric in directive["Metrics"]:
                        hours[(directive["Namespace"], metric["Name"], *dims)].add(hour)
    return {series: len(seen) for series, seen in hours.items()}


def measured_rows(idle: Idle) -> tuple[Row, ...]:
    """The custom metrics, Lambda and X-Ray rows, from what the idle app did."""
    series_month = sum(min(h, idle.hours) for h in idle.series_hours.values()) / idle.hours
    continuous = idle.continuous
    names = Counter(series[1] for series in continuous)
    named = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(names.items()))
    invocations = sum(idle.invocations.values())
    gb_seconds = sum(
        count * idle.memory_mb.get(function, 128) / 1024 * ASSUMED_SECONDS
        for function, count in idle.invocations.items()
    )
    by_function = ", ".join(
        f"{function} {count}" for function, count in sorted(idle.invocations.items())
    )
    return (
        Row(
            "Custom metrics (EMF)",
            f"${METRIC_MONTH:.2f} per metric-month, prorated hourly",
            f"{len(continuous)} series put every hour (measured: {named}); "
            f"{len(idle.series_hours) - len(continuous)} more now and then",
            series_month * METRIC_MONTH,
            approximate=False,
        ),
        Row(
            "Lambda (arm64)",
            f"$0.20 per million requests, ${LAMBDA_ARM_GB_SECOND:.10f} per GB-s",
            f"{idle.per_month(invocations):,.0f} invocations a month (measured in "
            f"{idle.hours} idle hours: {by_function}), ~{ASSUMED_SECONDS} s each",
            idle.per_month(invocations) * LAMBDA_REQUEST
            + idle.per_month(gb_seconds) * LAMBDA_ARM_GB_SECOND,
        ),
        Row(
            "X-Ray",
            "$5.00 per million traces recorded (first 100,000 a month free)",
            f"active tracing: a trace per invocation, {idle.per_month(invocations):,.0f} a month",
            idle.per_month(invocations) * XRAY_TRACE,
        ),
    )


ESTIMATED = (
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
        "VPC, SNS (e-mail), API Gateway, Container Insights, EventBridge",
        "per use only",
        "none while idle",
        0.0,
        approximate=False,
    ),
)


def counted(synth: Synthesized) -> tuple[Row, Row, Row]:
    """The dashboard, alarm and polled-queue rows, counted in the template and its shards
    (nested stacks)."""
    stacks = [stack for _, stack in synth.stacks()]
    dashboards = sum(len(s.resources("AWS::CloudWatch::Dashboard")) for s in stacks)
    alarms = [a for s in stacks for a in s.resources("AWS::CloudWatch::Alarm").values()]
    metrics = sum(len(alarm_series(alarm)) for alarm in alarms)
    polled = sum(_polls_a_queue(s, mapping) for s in stacks for mapping in _mappings(s))
    insights = sum(
        any(
            "SELECT" in str(query.get("Expression", ""))
            for query in alarm["Properties"].get("Metrics", [])
        )
        for alarm in alarms
    )
    return (
        Row(
            "CloudWatch dashboard",
            f"${DASHBOARD_MONTH:.2f} per dashboard-month (first 3 per account free)",
            f"{dashboards}: the stack's and one per shard",
            dashboards * DASHBOARD_MONTH,
            approximate=False,
        ),
        Row(
            "CloudWatch alarms",
            f"${ALARM_METRIC_MONTH:.2f} per standard alarm metric",
            f"{len(alarms)} alarms reading {metrics} metrics (counted in the synthesized "
            f"template; {insights} of them Metrics Insights alarms, billed per series their "
            "query analyses: a job's or task's exists only while it fails)",
            metrics * ALARM_METRIC_MONTH,
            approximate=False,
        ),
        Row(
            "SQS event source polling",
            "$0.40 per million requests (FIFO $0.50)",
            f"Lambda's pollers long-poll each of the {polled} queues with an event source "
            "(counted in the synthesized template: each task's, and each of its priority "
            "levels') even when "
            f"idle: about 5 pollers x 3 receives a minute, ~{IDLE_RECEIVES_A_MONTH:,} requests "
            "a month per queue (an estimate, not measured here)",
            polled * IDLE_RECEIVES_A_MONTH * SQS_REQUEST,
        ),
    )


def _mappings(stack: Synthesized) -> list[dict[str, Any]]:
    return list(stack.resources("AWS::Lambda::EventSourceMapping").values())


def _polls_a_queue(stack: Synthesized, mapping: dict[str, Any]) -> bool:
    """The mapping reads an SQS queue of its own stack (a stream's mapping reads a table)."""
    source = mapping["Properties"].get("EventSourceArn")
    target = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
    resource = stack.template["Resources"].get(target, {}) if target else {}
    return bool(resource.get("Type") == "AWS::SQS::Queue")


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
    app = synth or synthesize()
    rows = counted(app) + measured_rows(measure_idle(app)) + ESTIMATED
    return f"Prices: {PRICED}.\n\n{table(rows)}"


if __name__ == "__main__":
    print(run())
