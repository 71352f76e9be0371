"""Registry and idempotency tables with exactly the shape the CDK stack gives them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from handlers import observers_api
from vigil.clock import ManualClock
from vigil.observers.model import FLEET_INDEX, FLEET_INDEX_ATTRIBUTES
from vigil.observers.registry import ObserverRegistry

REGISTRY_TABLE = "vigil-observers"
IDEMPOTENCY_TABLE = "vigil-idempotency"


def create_registry_table(client: Any, name: str = REGISTRY_TABLE) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "name", "AttributeType": "S"},
            {"AttributeName": "fleet", "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "name", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": FLEET_INDEX,
                "KeySchema": [
                    {"AttributeName": "fleet", "KeyType": "HASH"},
                    {"AttributeName": "name", "KeyType": "RANGE"},
                ],
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": list(FLEET_INDEX_ATTRIBUTES),
                },
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )


def create_idempotency_table(client: Any, name: str = IDEMPOTENCY_TABLE) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )
    client.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"},
    )


def scan_all(client: Any, table: str) -> list[dict[str, Any]]:
    return list(client.scan(TableName=table, ConsistentRead=True).get("Items", []))


@pytest.fixture
def registry_table(dynamodb: Any) -> str:
    create_registry_table(dynamodb)
    return REGISTRY_TABLE


@pytest.fixture
def registry(dynamodb: Any, registry_table: str, clock: ManualClock) -> ObserverRegistry:
    return ObserverRegistry(dynamodb, registry_table, clock=clock, max_observers=3)


API_KINDS = {"ticker": "observers.ticker.run", "price-watch": "observers.price_watch.run"}


@pytest.fixture
def api_env(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tables on moto and the API function's environment; its app is rebuilt per test."""
    create_registry_table(dynamodb)
    create_idempotency_table(dynamodb)
    monkeypatch.setenv("VIGIL_OBSERVERS_TABLE", REGISTRY_TABLE)
    monkeypatch.setenv("VIGIL_IDEMPOTENCY_TABLE", IDEMPOTENCY_TABLE)
    monkeypatch.setenv("VIGIL_OBSERVER_KINDS", json.dumps(API_KINDS))
    monkeypatch.setenv("VIGIL_MAX_OBSERVERS", "2")
    monkeypatch.setattr(observers_api, "_app", None)
