"""A moto-backed observer fleet per test, with manual ECS task transitions restored afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.moto_fleet import MotoFleet, default_task_transitions
from vigil.clock import ManualClock


@pytest.fixture
def fleet(aws: None, clock: ManualClock) -> Iterator[MotoFleet]:
    built = MotoFleet(clock)
    try:
        yield built
    finally:
        default_task_transitions()
