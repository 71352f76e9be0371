"""The host's writes on moto: its heartbeat on the hosts table, and the registry writes that are
fenced by host as well as generation (a pooled claim, the HOST_EXIT report)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.hosts import TASK_ARN, host_item, mark_host, place, put_host
from tests.helpers.moto_fleet import CallCounter
from tests.helpers.observers import HOSTS_TABLE, create_hosts_table
from vigil.clock import ManualClock, epoch_ms
from vigil.contract.hosts import HOST_EXIT, HostStatus, SlotState
from vigil.contract.observers import ExitCode
from vigil.observers.host_process.heartbeat_store import HeartbeatStore, HostFenced, Slot
from vigil.observers.registry import ObserverRegistry, PlacedElsewhere

from .test_registry import raw_item


@pytest.fixture
def hosts(dynamodb: Any) -> str:
    create_hosts_table(dynamodb)
    return HOSTS_TABLE


@pytest.fixture
def store(dynamodb: Any, hosts: str, clock: ManualClock) -> HeartbeatStore:
    return HeartbeatStore(dynamodb, hosts, host_id="h1", task_arn=TASK_ARN, clock=clock)


RUNNING = {"a": Slot(3, SlotState.RUNNING), "b": Slot(1, SlotState.STOPPING)}


@pytest.mark.parametrize("status", [HostStatus.STARTING, HostStatus.RUNNING, HostStatus.DRAINING])
def test_given_a_live_host_when_it_beats_then_one_write_records_it_and_answers_the_assignment(
    store: HeartbeatStore, dynamodb: Any, hosts: str, clock: ManualClock, status: HostStatus
) -> None:
    put_host(dynamodb, hosts, "h1", assigned={"a": 3, "c": 1}, status=status)
    counter = CallCounter()
    counter.attach(dynamodb)

    answer = store.beat(RUNNING)

    assert dict(counter.calls) == {"UpdateItem": 1}
    assert answer.assigned == {"a": 3, "c": 1} and answer.status is status
    item = host_item(dynamodb, hosts, "h1")
    assert item["heartbeat_at_ms"] == epoch_ms(clock())
    assert item["running"] == {
        "a": {"generation": 3, "state": "RUNNING"},
        "b": {"generation": 1, "state": "STOPPING"},
    }
    assert item["status"] == status.value and item["assigned"] == {"a": 3, "c": 1}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"status": HostStatus.LOST}, "status is LOST"),
        ({"status": HostStatus.STOPPED}, "status is STOPPED"),
        ({"task_arn": "arn:aws:ecs:us-east-1:123456789012:task/vigil/new"}, "names task"),
    ],
)
def test_given_a_replaced_host_when_it_beats_then_fenced_and_its_item_unchanged(
    store: HeartbeatStore, dynamodb: Any, hosts: str, change: dict[str, Any], why: str
) -> None:
    put_host(dynamodb, hosts, "h1", assigned={"a": 3})
    mark_host(dynamodb, hosts, "h1", **change)
    before = host_item(dynamodb, hosts, "h1")

    with pytest.raises(HostFenced, match=why) as raised:
        store.beat(RUNNING)

    assert host_item(dynamodb, hosts, "h1") == before
    assert raised.value.seen is not None and raised.value.host_id == "h1"


def test_given_no_item_when_a_host_beats_then_fenced_and_nothing_created(
    store: HeartbeatStore, dynamodb: Any, hosts: str
) -> None:
    with pytest.raises(HostFenced, match="item is gone"):
        store.beat({})

    assert dynamodb.scan(TableName=hosts)["Items"] == []


def test_given_an_empty_assignment_when_a_host_beats_then_it_runs_nothing(
    store: HeartbeatStore, dynamodb: Any, hosts: str
) -> None:
    put_host(dynamodb, hosts, "h1")

    assert store.beat({}).assigned == {}


# -- the registry writes a pooled observer and its host make ------------------------------------


@pytest.fixture
def placed(registry: ObserverRegistry, dynamodb: Any, registry_table: str) -> ObserverRegistry:
    registry.create("obs", "ticker", {})
    place(dynamodb, registry_table, "obs", 2, "h1")
    return registry


def test_given_a_placed_observer_when_its_host_reports_an_exit_then_host_exit_is_recorded(
    placed: ObserverRegistry, dynamodb: Any, registry_table: str, clock: ManualClock
) -> None:
    version = raw_item(dynamodb, registry_table, "obs")["version"]

    written = placed.report_host_exit(
        "obs", 2, host="h1", exit_code=ExitCode.CRASH, reason="killed by signal SIGSEGV"
    )

    item = raw_item(dynamodb, registry_table, "obs")
    assert written is True
    assert item[HOST_EXIT] == {
        "generation": 2,
        "exit_code": 1,
        "reason": "killed by signal SIGSEGV",
        "at_ms": epoch_ms(clock()),
    }
    assert item["version"] == version + 1  # the read-modify-write writers see it


@pytest.mark.parametrize(("generation", "host"), [(1, "h1"), (2, "h2"), (3, "h1")])
def test_given_an_observer_that_moved_on_when_an_exit_is_reported_then_refused_and_unchanged(
    placed: ObserverRegistry, dynamodb: Any, registry_table: str, generation: int, host: str
) -> None:
    before = raw_item(dynamodb, registry_table, "obs")

    written = placed.report_host_exit(
        "obs", generation, host=host, exit_code=ExitCode.CLEAN, reason="exited cleanly"
    )

    assert written is False
    assert raw_item(dynamodb, registry_table, "obs") == before


def test_given_a_missing_observer_when_an_exit_is_reported_then_refused_quietly(
    registry: ObserverRegistry,
) -> None:
    assert not registry.report_host_exit(
        "gone", 1, host="h1", exit_code=ExitCode.CLEAN, reason="exited cleanly"
    )


def test_given_a_placed_observer_when_its_host_claims_then_running(
    placed: ObserverRegistry,
) -> None:
    claimed = placed.claim_generation("obs", 2, host="h1")

    assert claimed.status.value == "RUNNING" and claimed.generation == 2


def test_given_an_observer_placed_elsewhere_when_a_host_claims_then_refused_and_unchanged(
    placed: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    before = raw_item(dynamodb, registry_table, "obs")

    with pytest.raises(PlacedElsewhere, match="placed on 'h1', not 'h2'"):
        placed.claim_generation("obs", 2, host="h2")

    assert raw_item(dynamodb, registry_table, "obs") == before
