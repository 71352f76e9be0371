"""Today's runtime as a pooled child (``host`` given), in-process: the same author API, a claim
fenced by host, no heartbeat writes of its own and no self-fence deadline (the host's heartbeat is
its liveness), checkpoints still fenced by generation."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.helpers.hosts import place
from tests.helpers.moto_fleet import CallCounter
from vigil.clock import ManualClock
from vigil.observers.registry import ObserverRegistry
from vigil.observers.runtime import ExitCode, ObserverRuntime, StopReason

from .test_registry import raw_item

KINDS = {"ticker": "observers.ticker.run"}


class Pooled:
    """A pooled runtime whose sleeps advance the clock; ``on_sleep(n)`` acts at the n-th."""

    def __init__(self, registry: ObserverRegistry, clock: ManualClock, host: str) -> None:
        self.clock = clock
        self.sleeps = 0
        self.on_sleep: Any = lambda n: None
        self.runtime = ObserverRuntime(
            registry,
            name="obs",
            generation=2,
            kinds=KINDS,
            heartbeat_seconds=10,
            sleeper=self._sleep,
            monotonic=lambda: clock().timestamp(),
            host=host,
        )

    def _sleep(self, stopping: threading.Event, seconds: float) -> None:
        self.sleeps += 1
        self.clock.advance(seconds)
        self.on_sleep(self.sleeps)


@pytest.fixture
def placed(registry: ObserverRegistry, dynamodb: Any, registry_table: str) -> ObserverRegistry:
    registry.create("obs", "ticker", {"interval_seconds": 30})
    place(dynamodb, registry_table, "obs", 2, "h1")
    return registry


def test_given_a_pooled_observer_when_it_runs_long_then_only_claim_and_checkpoints_are_written(
    placed: ObserverRegistry, clock: ManualClock, dynamodb: Any
) -> None:
    counter = CallCounter()
    counter.attach(dynamodb)
    pooled = Pooled(placed, clock, "h1")
    # 5 sleeps of 30 s: far past the dedicated self-fence deadline (2 x 10 s)
    pooled.on_sleep = lambda n: pooled.runtime.request_stop(StopReason.SIGTERM) if n == 5 else None

    code = pooled.runtime.run()
    calls = dict(counter.calls)

    assert code is ExitCode.CLEAN and pooled.runtime.stop_reason is StopReason.SIGTERM
    observer = placed.get("obs")
    assert observer.checkpoint == {"count": 5} and observer.heartbeat_at is not None
    assert observer.last_exit is not None and observer.last_exit.reason == "SIGTERM"
    # get + claim + 5 checkpoints + its own exit report; no heartbeat writes
    assert calls == {"GetItem": 1, "UpdateItem": 7}


def test_given_an_observer_placed_on_another_host_when_a_pooled_child_starts_then_fenced_unchanged(
    placed: ObserverRegistry, clock: ManualClock, dynamodb: Any, registry_table: str
) -> None:
    before = raw_item(dynamodb, registry_table, "obs")

    code = Pooled(placed, clock, "h2").runtime.run()

    assert code is ExitCode.FENCED
    assert raw_item(dynamodb, registry_table, "obs") == before


def test_given_a_pooled_child_fenced_by_its_host_when_it_stops_then_it_writes_nothing_more(
    placed: ObserverRegistry, clock: ManualClock, dynamodb: Any, registry_table: str
) -> None:
    pooled = Pooled(placed, clock, "h1")
    written: dict[str, Any] = {}

    def after_first_checkpoint(n: int) -> None:
        written.update(raw_item(dynamodb, registry_table, "obs"))
        pooled.runtime.request_stop(StopReason.FENCED)

    pooled.on_sleep = after_first_checkpoint

    code = pooled.runtime.run()

    assert code is ExitCode.FENCED
    assert raw_item(dynamodb, registry_table, "obs") == written
