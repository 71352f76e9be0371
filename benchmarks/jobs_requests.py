"""DynamoDB requests per delivery: the Vigil guard beside Powertools' idempotency utility.

Both run on moto and are counted from botocore's own ``before-call`` events, so a request is
counted whether it succeeds or is refused by its condition.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.offline import offline_aws
from vigil.clock import ManualClock
from vigil.jobs.control import PauseTerms
from vigil.jobs.control_store import ControlStore
from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard
from vigil.jobs.model import JobSettings, Overlap
from vigil.jobs.store import RunStore
from vigil_tools.emulator.template import Synthesized, create_tables, logical_id_of, synthesize

TICK = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
REPEATS = 50


class Calls:
    def __init__(self, client: Any) -> None:
        self.counts: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.counts[model.name] += 1

    def measure(self, action: Callable[[], Any]) -> int:
        before = sum(self.counts.values())
        with contextlib.suppress(Exception):  # a failing body still costs its requests
            action()
        return sum(self.counts.values()) - before


def _vigil_rows(synth: Synthesized) -> dict[str, float]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    table = create_tables(synth, client)[
        logical_id_of(synth, "AWS::DynamoDB::Table", "Vigil/JobRuns")
    ]
    calls = Calls(client)
    clock = ManualClock(TICK)
    guard = JobGuard(
        JobSettings(job="bench", table=table, overlap=Overlap.SKIP), RunStore(client, table), clock
    )

    def deliver(moment: datetime, body: Callable[[Any], Any] = lambda run: None) -> Any:
        tick = Tick(job="bench", scheduled_at=moment, source="scheduler")
        return guard.execute(tick, body, remaining_ms=lambda: 60_000, holder="bench")

    first, duplicate, retry, skipped, missed = [], [], [], [], []
    for i in range(REPEATS):
        moment = TICK + timedelta(minutes=10 * i)
        clock.set(moment + timedelta(seconds=1))
        first.append(calls.measure(lambda m=moment: deliver(m)))
        duplicate.append(calls.measure(lambda m=moment: deliver(m)))
        # a failed run, then its retry (Lambda's async retry of the same event)
        failed_at = moment + timedelta(minutes=1)
        clock.set(failed_at + timedelta(seconds=1))
        calls.measure(lambda m=failed_at: deliver(m, _raise))
        retry.append(calls.measure(lambda m=failed_at: deliver(m)))
        # a tick that overlaps a running one
        overlap_at = moment + timedelta(minutes=2)

        def overlapping(run: Any, at: datetime = overlap_at) -> None:
            clock.advance(60)
            skipped.append(calls.measure(lambda: deliver(at + timedelta(minutes=1))))

        clock.set(overlap_at)
        deliver(overlap_at, overlapping)
        late = moment + timedelta(minutes=4)
        clock.set(late + timedelta(minutes=30))
        missed.append(calls.measure(lambda m=late: deliver(m)))
    # The same job paused (open-ended): each delivery is refused by the claim's own condition.
    ControlStore(client, table).pause(
        "bench",
        PauseTerms("benchmark", clock(), None),
        "arn:aws:iam::000000000000:user/bench",
        timedelta(days=1),
    )
    paused, paused_duplicate = [], []
    for i in range(REPEATS):
        moment = TICK + timedelta(days=1, minutes=10 * i)
        clock.set(moment + timedelta(seconds=1))
        paused.append(calls.measure(lambda m=moment: deliver(m)))
        paused_duplicate.append(calls.measure(lambda m=moment: deliver(m)))
    return {
        "first delivery (claim + finish)": _mean(first),
        "duplicate delivery": _mean(duplicate),
        "retry of a failed tick": _mean(retry),
        "tick skipped by overlap": _mean(skipped),
        "late tick recorded MISSED": _mean(missed),
        "delivery to a paused job (recorded PAUSED)": _mean(paused),
        "duplicate of a PAUSED tick": _mean(paused_duplicate),
    }


def _raise(run: Any) -> None:
    raise RuntimeError("failing run")


def _powertools_rows() -> dict[str, float]:
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName="idempotency",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    calls = Calls(client)
    persistence = DynamoDBPersistenceLayer(table_name="idempotency", boto3_client=client)
    config = IdempotencyConfig(event_key_jmespath="vigil.scheduled_time")
    warnings.filterwarnings("ignore", message="Couldn't determine the remaining time")

    @idempotent_function(
        data_keyword_argument="event", persistence_store=persistence, config=config
    )
    def job(event: dict[str, Any]) -> dict[str, str]:
        return {"ok": "yes"}

    first, duplicate = [], []
    for i in range(REPEATS):
        event = {"vigil": {"scheduled_time": (TICK + timedelta(minutes=i)).isoformat()}}
        first.append(calls.measure(lambda e=event: job(event=e)))
        duplicate.append(calls.measure(lambda e=event: job(event=e)))
    return {"first delivery (claim + finish)": _mean(first), "duplicate delivery": _mean(duplicate)}


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else float("nan")


def run(synth: Synthesized | None = None) -> str:
    offline_aws()
    os.environ["POWERTOOLS_IDEMPOTENCY_DISABLED"] = "false"
    synth = synth or synthesize()
    with mock_aws():
        vigil = _vigil_rows(synth)
    with mock_aws():
        powertools = _powertools_rows()
    lines = [
        f"| DynamoDB requests per delivery (mean of {REPEATS}) | Vigil guard | Powertools idempotency |",
        "|---|---:|---:|",
    ]
    for case, value in vigil.items():
        other = powertools.get(case)
        lines.append(f"| {case} | {value:g} | {'n/a' if other is None else f'{other:g}'} |")
    lines.append(
        "\nPowertools has no overlap policy, lateness, fencing or run history, so its rows stop at "
        "the two cases it handles. A retry first tries to claim a new tick and learns the attempt "
        "count from the refusal, hence one request more than a first delivery. The pause is a condition "
        "on the head update the claim already makes, so an unpaused job's rows are unchanged; a paused "
        "delivery is the refused claim plus the PAUSED record. A Vigil claim or finish is one `TransactWriteItems` of two "
        "items, billed as 2 transactional writes per item (4 WCU for items under 1 KB)."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
