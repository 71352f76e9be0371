"""The contract between the registry (API, container) and the reconciler, through one lifecycle."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.moto_fleet import TABLE, MotoFleet, running, stream, task_event
from vigil.observers.ecs_tasks import task_state
from vigil.observers.reconciler import changed_records
from vigil.observers.registry import Fenced, ObserverRegistry
from vigil.observers.registry.table import RegistryTable


def test_create_claim_restart_stop_through_the_registry(fleet: MotoFleet) -> None:
    registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=fleet.clock, max_observers=5)
    reconciler = fleet.reconciler()

    def act(change: Any) -> None:
        """Apply a registry write, then hand its stream record to the reconciler."""
        before = fleet.item("btc") if registry_has("btc") else None
        change()
        reconciler.on_records(changed_records([stream(fleet.item("btc"), before)]))

    def registry_has(name: str) -> bool:
        return RegistryTable(fleet.dynamodb, TABLE).kind_of(name) is not None

    # Created by the API: the stream starts generation 1, and its container claims it.
    act(lambda: registry.create("btc", "ticker", {"symbol": "BTC-USD"}))
    first = fleet.item("btc")
    assert (first["status"], first["generation"]) == ("STARTING", 1)
    registry.claim_generation("btc", 1)
    fleet.counter.reset()
    reconciler.resync("pass")
    assert fleet.counter.calls["DescribeTasks"] == 0 and fleet.counter.calls["RunTask"] == 0

    # Restart requested: the old task is stopped, generation 2 started, generation 1 fenced.
    act(lambda: registry.request_restart("btc"))
    second = fleet.item("btc")
    assert second["generation"] == 2 and second["task_arn"] != first["task_arn"]
    assert "restart_generation" not in second
    assert fleet.describe(first["task_arn"])["lastStatus"] == "STOPPED"
    with pytest.raises(Fenced):
        registry.heartbeat("btc", 1)
    registry.claim_generation("btc", 2)

    # Stop requested: the reconciler stops the task; the container reports, ECS confirms.
    act(lambda: registry.request_stop("btc"))
    assert fleet.describe(second["task_arn"])["lastStatus"] == "STOPPED"
    registry.report_exit(
        "btc", 2, exit_code=0, reason="stop requested", task_arn=second["task_arn"], stopped=True
    )
    event = task_event(
        fleet,
        second["task_arn"],
        name="btc",
        generation=2,
        last_status="STOPPED",
        version=6,
        exit_code=0,
        stop_code="UserInitiated",
    )
    reconciler.on_task_event(task_state(event["detail"]))
    final = fleet.item("btc")
    assert (final["status"], final["desired"]) == ("STOPPED", "STOPPED")
    assert running(fleet) == []
