"""A moto-backed observer fleet per test, with manual ECS task transitions restored afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.moto_fleet import MotoFleet, default_task_transitions
from tests.helpers.pooled_fleet import PooledFleet
from vigil.clock import ManualClock


@pytest.fixture
def fleet(aws: None, clock: ManualClock) -> Iterator[MotoFleet]:
    built = MotoFleet(clock)
    try:
        yield built
    finally:
        default_task_transitions()


@pytest.fixture
def pool(aws: None, clock: ManualClock) -> Iterator[PooledFleet]:
    """A fleet with the dedicated ``ticker`` and the pooled ``pooled-ticker`` (K = 3)."""
    built = PooledFleet(clock)
    try:
        yield built
    finally:
        default_task_transitions()


@pytest.fixture
def pooled_only(aws: None, clock: ManualClock) -> Iterator[PooledFleet]:
    """A fleet whose only kind is the pooled ``pooled-ticker`` (K = 3): its resync reads the
    fleet index only on sweep minutes, so what the manager misses waits for the sweep."""
    built = PooledFleet(clock, with_dedicated=False)
    try:
        yield built
    finally:
        default_task_transitions()
