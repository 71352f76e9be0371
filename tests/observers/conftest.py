"""Registry and idempotency tables created from the synthesized template: the deployed shape;
and a moto server for the tests that run the container's entry point as a process."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from handlers import observers_api
from tests.helpers.observers import (
    IDEMPOTENCY_TABLE,
    REGISTRY_TABLE,
    TICKER_WRITES,
    create_idempotency_table,
    create_registry_table,
    create_ticker_counts_table,
)
from vigil.clock import ManualClock
from vigil.observers.registry import ObserverRegistry

from .test_registry import raw_item, set_status, start_generation


@pytest.fixture
def registry_table(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The registry, and what the example ticker (which many tests run) writes to: its counts
    table, granted in the environment as its kind's ``writes=[...]`` grants it."""
    create_registry_table(dynamodb)
    create_ticker_counts_table(dynamodb)
    for variable, value in TICKER_WRITES.items():
        monkeypatch.setenv(variable, value)
    return REGISTRY_TABLE


@pytest.fixture
def registry(dynamodb: Any, registry_table: str, clock: ManualClock) -> ObserverRegistry:
    return ObserverRegistry(dynamodb, registry_table, clock=clock, max_observers=3)


class StoredObserver:
    """The observer ``obs``'s item as stored: what the reconciler writes to it (straight to the
    table, as the tests set the scene) and what is there afterwards (to see nothing was written)."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._dynamodb = dynamodb
        self._table = table

    def start(self, generation: int) -> None:
        """The reconciler starts generation ``generation``, in the task ``arn:task/<generation>``."""
        start_generation(self._dynamodb, self._table, "obs", generation, f"arn:task/{generation}")

    def set_status(self, status: str) -> None:
        set_status(self._dynamodb, self._table, "obs", status)

    def raw(self) -> dict[str, Any]:
        return raw_item(self._dynamodb, self._table, "obs")


@pytest.fixture
def stored(dynamodb: Any, registry_table: str) -> StoredObserver:
    return StoredObserver(dynamodb, registry_table)


API_KINDS = {"ticker": "observers.ticker.run", "price-watch": "observers.price_watch.run"}


@pytest.fixture
def api_env(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both tables on moto and the API function's environment; its app is rebuilt per test."""
    create_registry_table(dynamodb)
    create_idempotency_table(dynamodb)
    monkeypatch.setenv("VIGIL_REGISTRY_TABLE", REGISTRY_TABLE)
    monkeypatch.setenv("VIGIL_IDEMPOTENCY_TABLE", IDEMPOTENCY_TABLE)
    monkeypatch.setenv("VIGIL_OBSERVER_KINDS", json.dumps(API_KINDS))
    monkeypatch.setenv("VIGIL_MAX_OBSERVERS", "2")
    monkeypatch.setattr(observers_api, "_app", None)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _one_request_at_a_time(server)
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def _one_request_at_a_time(server: ThreadedMotoServer) -> None:
    """moto applies a request non-atomically (NOTES.md); DynamoDB applies each atomically. The
    container's heartbeat thread and the test write concurrently, so requests take a lock.
    moto offers no hook for this: wrap the WSGI app of its werkzeug server."""
    wsgi = server._server
    assert wsgi is not None
    app = wsgi.app
    lock = threading.Lock()

    def locked(environ: Any, start_response: Any) -> Any:
        with lock:
            return list(app(environ, start_response))

    wsgi.app = locked
