"""Items past their TTL leave the local tables, as on AWS, on the emulator's clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers.tables import create_pk_sk_table
from vigil.clock import ManualClock
from vigil_tools.emulator.ttl import TtlSweep

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.fixture
def table(dynamodb: Any) -> str:
    create_pk_sk_table(dynamodb, "runs")
    dynamodb.update_time_to_live(
        TableName="runs",
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
    )
    dynamodb.create_table(  # no TTL: never swept
        TableName="plain",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return "runs"


def _put(dynamodb: Any, sk: str, expires: dict[str, str] | None) -> None:
    item: dict[str, Any] = {"pk": {"S": "p"}, "sk": {"S": sk}}
    if expires is not None:
        item["expires_at"] = expires
    dynamodb.put_item(TableName="runs", Item=item)


def _left(dynamodb: Any) -> set[str]:
    return {i["sk"]["S"] for i in dynamodb.scan(TableName="runs")["Items"]}


def _epoch(moment: datetime) -> dict[str, str]:
    return {"N": str(int(moment.timestamp()))}


def test_expired_items_leave_and_the_others_stay(dynamodb: Any, table: str) -> None:
    clock = ManualClock(NOW)
    _put(dynamodb, "expired", _epoch(NOW - timedelta(seconds=1)))
    _put(dynamodb, "later", _epoch(NOW + timedelta(hours=1)))
    _put(dynamodb, "text", {"S": "1"})  # not a number: AWS ignores it
    _put(dynamodb, "none", None)
    _put(dynamodb, "ancient", _epoch(NOW - timedelta(days=6 * 365)))  # > 5 years: AWS keeps it
    dynamodb.put_item(
        TableName="plain", Item={"pk": {"S": "x"}, "expires_at": _epoch(NOW - timedelta(days=1))}
    )
    sweep = TtlSweep(dynamodb)

    assert sweep.due(clock()) == 1
    assert _left(dynamodb) == {"later", "text", "none", "ancient"}
    assert dynamodb.scan(TableName="plain")["Count"] == 1

    clock.advance(timedelta(hours=2))
    assert sweep.due(clock()) == 1
    assert _left(dynamodb) == {"text", "none", "ancient"}


def test_the_sweep_runs_once_per_interval_of_the_clock(dynamodb: Any, table: str) -> None:
    clock = ManualClock(NOW)
    sweep = TtlSweep(dynamodb, every=timedelta(minutes=5))
    sweep.due(clock())
    _put(dynamodb, "soon", _epoch(NOW + timedelta(seconds=30)))
    clock.advance(timedelta(minutes=1))
    assert sweep.due(clock()) == 0  # expired, but the next sweep is not due yet
    assert _left(dynamodb) == {"soon"}
    clock.advance(timedelta(minutes=4))
    assert sweep.due(clock()) == 1
    assert _left(dynamodb) == set()
