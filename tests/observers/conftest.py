"""Registry and idempotency tables created from the synthesized template: the deployed shape."""

from __future__ import annotations

import json
from typing import Any

import pytest

from handlers import observers_api
from tests.helpers.observers import (
    IDEMPOTENCY_TABLE,
    REGISTRY_TABLE,
    create_idempotency_table,
    create_registry_table,
)
from vigil.clock import ManualClock
from vigil.observers.registry import ObserverRegistry


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
