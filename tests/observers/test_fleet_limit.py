"""The fleet maximum as an invariant: random operator sequences, and racing creates."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from tests.helpers.observers import create_registry_table
from vigil.clock import ManualClock
from vigil.observers.model import Desired
from vigil.observers.registry import FleetFull, ObserverExists, ObserverNotFound, ObserverRegistry

MAX = 3
NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
OPERATIONS = st.lists(st.tuples(st.sampled_from(["create", "stop", "restart"]), NAMES), max_size=25)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=OPERATIONS)
def test_given_any_operator_sequence_then_active_count_matches_desired_and_stays_under_max(
    operations: list[tuple[str, str]], clock: ManualClock
) -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_registry_table(client, "t")
        registry = ObserverRegistry(client, "t", clock=clock, max_observers=MAX)
        wanted: dict[str, Desired] = {}  # the model: each name's desired state

        for operation, name in operations:
            running = sum(d is Desired.RUNNING for d in wanted.values())
            adds = (operation == "create" and name not in wanted) or (
                operation == "restart" and wanted.get(name) is Desired.STOPPED
            )
            try:
                if operation == "create":
                    registry.create(name, "ticker", {})
                elif operation == "stop":
                    registry.request_stop(name)
                else:
                    registry.request_restart(name)
            except FleetFull:
                assert adds and running == MAX
                continue
            except ObserverExists:
                assert name in wanted
                continue
            except ObserverNotFound:
                assert name not in wanted
                continue
            assert not (adds and running == MAX), "the maximum was overshot"
            wanted[name] = Desired.STOPPED if operation == "stop" else Desired.RUNNING

        running = sum(d is Desired.RUNNING for d in wanted.values())
        assert registry.active_count() == running <= MAX
        assert {o.name: o.desired for o in registry.iter_all()} == wanted


def test_given_racing_creates_when_the_fleet_has_room_for_three_then_exactly_three_win(
    dynamodb: Any, registry_table: str, serialized: Any, clock: ManualClock
) -> None:
    registry = ObserverRegistry(serialized(dynamodb), registry_table, clock=clock, max_observers=3)
    outcomes: list[str] = []
    start = threading.Barrier(10)

    def create(i: int) -> None:
        start.wait()
        try:
            registry.create(f"obs-{i}", "ticker", {})
            outcomes.append("created")
        except FleetFull:
            outcomes.append("full")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcomes) == ["created"] * 3 + ["full"] * 7
    assert registry.active_count() == 3 and len(list(registry.iter_all())) == 3


@pytest.mark.parametrize("limit", [1, 2])
def test_given_a_small_fleet_when_full_then_the_refusal_names_the_limit(
    dynamodb: Any, registry_table: str, clock: ManualClock, limit: int
) -> None:
    registry = ObserverRegistry(dynamodb, registry_table, clock=clock, max_observers=limit)
    for i in range(limit):
        registry.create(f"o{i}", "ticker", {})

    with pytest.raises(FleetFull, match=f"maximum of {limit}"):
        registry.create("extra", "ticker", {})
