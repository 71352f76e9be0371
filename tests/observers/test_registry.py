"""The registry on moto: conditions, the fleet counter, fencing by generation, pagination."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.helpers.observers import raw_item, registry_key, scan_all
from vigil.clock import ManualClock
from vigil.dynamo import to_wire
from vigil.observers.model import FLEET_COUNTER_NAME, Desired, InvalidObserver, Status
from vigil.observers.registry import (
    Fenced,
    FleetFull,
    InvalidCursor,
    ObserverExists,
    ObserverNotFound,
    ObserverRegistry,
    StopRequested,
    VersionConflict,
)


def start_generation(client: Any, table: str, name: str, generation: int, task: str) -> None:
    """What the reconciler writes when it starts a task: a new generation and its task ARN."""
    client.update_item(
        TableName=table,
        Key=registry_key(client, table, name),
        UpdateExpression=(
            "SET generation = :gen, task_arn = :task, #s = :starting, version = version + :one"
        ),
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=to_wire(
            {":gen": generation, ":task": task, ":starting": "STARTING", ":one": 1}
        ),
    )


def test_given_a_new_name_when_created_then_pending_desired_running_and_counted(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    observer = registry.create("btc-usd", "ticker", {"symbol": "BTC"})

    assert observer.status is Status.PENDING
    assert observer.desired is Desired.RUNNING
    assert registry.get("btc-usd") == observer
    item = raw_item(dynamodb, registry_table, "btc-usd")
    assert item["fleet"] == "observers" and item["config"] == {"symbol": "BTC"}
    assert item["version"] == 1 and item["generation"] == 0
    assert registry.active_count() == 1


def test_given_an_existing_name_when_created_again_then_refused_and_nothing_changes(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    registry.create("a", "ticker", {"n": 1})
    before = scan_all(dynamodb, registry_table)

    with pytest.raises(ObserverExists):
        registry.create("a", "ticker", {"n": 2})

    assert scan_all(dynamodb, registry_table) == before
    assert registry.active_count() == 1


def test_given_a_full_fleet_when_created_then_fleet_full_and_nothing_written(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    for name in ("a", "b", "c"):
        registry.create(name, "ticker", {})
    before = scan_all(dynamodb, registry_table)

    with pytest.raises(FleetFull) as raised:
        registry.create("d", "ticker", {})

    assert raised.value.limit == 3 and raised.value.active == 3
    assert scan_all(dynamodb, registry_table) == before


def test_given_a_full_fleet_when_one_stops_then_another_fits(registry: ObserverRegistry) -> None:
    for name in ("a", "b", "c"):
        registry.create(name, "ticker", {})

    registry.request_stop("b")
    registry.create("d", "ticker", {})

    assert registry.active_count() == 3
    with pytest.raises(FleetFull):
        registry.request_restart("b")  # restarting a stopped observer takes a place again


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("Bad_Name", {}),
        ("", {}),
        ("x" * 64, {}),
        ("ok", ["not", "a", "dict"]),
        ("ok", {"x": "y" * 33_000}),
    ],
)
def test_given_invalid_input_when_created_then_rejected_before_any_write(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str, name: str, config: Any
) -> None:
    with pytest.raises(InvalidObserver):
        registry.create(name, "ticker", config)

    assert scan_all(dynamodb, registry_table) == []


def test_given_an_unknown_name_when_read_or_changed_then_not_found(
    registry: ObserverRegistry,
) -> None:
    for action in (registry.get, registry.request_stop, registry.request_restart):
        with pytest.raises(ObserverNotFound):
            action("ghost")


def test_given_a_pending_observer_when_stopped_then_stopped_at_once_and_idempotent(
    registry: ObserverRegistry, clock: ManualClock
) -> None:
    created = registry.create("a", "ticker", {})
    clock.advance(5)

    stopped = registry.request_stop("a")
    again = registry.request_stop("a")

    assert stopped.desired is Desired.STOPPED and stopped.status is Status.STOPPED
    assert stopped.version == created.version + 1 and stopped.updated_at > created.updated_at
    assert again == stopped
    assert registry.active_count() == 0


def test_given_a_running_task_when_stopped_then_stopping_until_the_reconciler_acts(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")
    registry.claim_generation("a", 1)

    stopped = registry.request_stop("a")

    assert (stopped.desired, stopped.status) == (Desired.STOPPED, Status.STOPPING)


def test_given_a_failed_observer_when_restarted_then_rearmed_with_backoff_cleared(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 4, "arn:task/4")
    dynamodb.update_item(
        TableName=registry_table,
        Key=registry_key(dynamodb, registry_table, "a"),
        UpdateExpression=(
            "SET #s = :failed, consecutive_failures = :five, failure_reason = :why, "
            "next_start_at_ms = :ms, next_start_at = :at"
        ),
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=to_wire(
            {
                ":failed": "FAILED",
                ":five": 5,
                ":why": "crashed 5 times",
                ":ms": 1,
                ":at": "1970-01-01T00:00:00.001Z",
            }
        ),
    )

    restarted = registry.request_restart("a")

    assert restarted.status is Status.PENDING and restarted.desired is Desired.RUNNING
    assert restarted.restart_generation == 4
    assert restarted.consecutive_failures == 0
    assert restarted.failure_reason is None and restarted.next_start_at is None
    assert registry.active_count() == 1  # it was already counted: desired never left RUNNING


def test_given_a_stopped_observer_when_restarted_then_wanted_again_and_counted(
    registry: ObserverRegistry,
) -> None:
    registry.create("a", "ticker", {})
    registry.request_stop("a")

    restarted = registry.request_restart("a")

    assert (restarted.desired, restarted.status) == (Desired.RUNNING, Status.PENDING)
    assert registry.active_count() == 1


def test_given_a_writer_that_always_wins_when_stopping_then_version_conflict_after_retries(
    registry_table: str, dynamodb: Any, clock: ManualClock
) -> None:
    class Meddler:
        """Bumps the version between every read and write, as a busy reconciler could."""

        def __init__(self, client: Any) -> None:
            self._client = client

        def get_item(self, **kwargs: Any) -> Any:
            answer = self._client.get_item(**kwargs)
            self._client.update_item(
                TableName=registry_table,
                Key=registry_key(dynamodb, registry_table, "a"),
                UpdateExpression="SET version = version + :one",
                ExpressionAttributeValues=to_wire({":one": 1}),
            )
            return answer

        def __getattr__(self, name: str) -> Any:
            return getattr(self._client, name)

    ObserverRegistry(dynamodb, registry_table, clock=clock).create("a", "ticker", {})
    meddled = ObserverRegistry(Meddler(dynamodb), registry_table, clock=clock)

    with pytest.raises(VersionConflict):
        meddled.request_stop("a")

    assert raw_item(dynamodb, registry_table, "a")["desired"] == "RUNNING"


def test_given_the_current_generation_when_claimed_then_running_with_a_heartbeat(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str, clock: ManualClock
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")

    claimed = registry.claim_generation("a", 1)

    assert claimed.status is Status.RUNNING and claimed.heartbeat_at == clock()
    assert claimed.task_arn == "arn:task/1"


def test_given_a_replaced_generation_when_claiming_or_writing_then_fenced(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")
    registry.claim_generation("a", 1)
    start_generation(dynamodb, registry_table, "a", 2, "arn:task/2")
    before = raw_item(dynamodb, registry_table, "a")

    with pytest.raises(Fenced) as raised:
        registry.claim_generation("a", 1)
    assert raised.value.current == 2
    with pytest.raises(Fenced):
        registry.heartbeat("a", 1)
    with pytest.raises(Fenced):
        registry.checkpoint("a", 1, {"n": 1})
    with pytest.raises(Fenced):
        registry.report_exit("a", 1, exit_code=0, reason="x", task_arn=None, stopped=False)

    assert raw_item(dynamodb, registry_table, "a") == before


def set_status(client: Any, table: str, name: str, status: str) -> None:
    """What the reconciler writes when it gives up on a generation without replacing it yet."""
    client.update_item(
        TableName=table,
        Key=registry_key(client, table, name),
        UpdateExpression="SET #s = :status, version = version + :one",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=to_wire({":status": status, ":one": 1}),
    )


@pytest.mark.parametrize("status", ["PENDING", "FAILED", "STOPPED", "STOPPING"])
def test_given_a_generation_given_up_when_its_late_container_claims_then_fenced_unchanged(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str, status: str
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")
    set_status(dynamodb, registry_table, "a", status)  # backoff, gave up, ... desired RUNNING
    before = raw_item(dynamodb, registry_table, "a")

    with pytest.raises(Fenced) as raised:
        registry.claim_generation("a", 1)

    assert status in str(raised.value)
    assert raw_item(dynamodb, registry_table, "a") == before


def test_given_a_stop_request_when_claiming_then_stop_requested(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")
    registry.request_stop("a")

    with pytest.raises(StopRequested):
        registry.claim_generation("a", 1)


def test_given_a_deleted_record_when_heartbeating_then_fenced(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    with pytest.raises(Fenced) as raised:
        registry.heartbeat("gone", 1)
    assert raised.value.current is None


def test_given_a_running_container_when_heartbeating_then_heartbeat_moves_and_stop_is_visible(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str, clock: ManualClock
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")
    claimed = registry.claim_generation("a", 1)
    clock.advance(10)

    beat = registry.heartbeat("a", 1)
    assert beat.heartbeat_at == clock() and beat.version == claimed.version + 1
    registry.request_stop("a")
    assert registry.heartbeat("a", 1).desired is Desired.STOPPED


def test_given_a_checkpoint_when_saved_then_read_back_and_left_out_of_lists(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str
) -> None:
    registry.create("a", "ticker", {"x": 1})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")

    registry.checkpoint("a", 1, {"count": 7, "price": 1.5, "nested": {"k": [1, "two"]}})

    assert registry.get("a").checkpoint == {"count": 7, "price": 1.5, "nested": {"k": [1, "two"]}}
    listed = registry.list_page().observers
    assert [o.name for o in listed] == ["a"]
    assert listed[0].checkpoint is None and listed[0].config == {"x": 1}
    with pytest.raises(InvalidObserver):
        registry.checkpoint("a", 1, {"blob": "z" * 70_000})


@pytest.mark.parametrize(
    "number", [float("nan"), float("inf"), float("-inf"), 10**41, 1e-200, 1e126]
)
def test_given_a_checkpoint_number_dynamodb_cannot_store_when_saved_then_a_clear_error(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str, number: float
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")
    registry.checkpoint("a", 1, {"count": 1})

    with pytest.raises(InvalidObserver) as raised:
        registry.checkpoint("a", 1, {"count": 2, "price": {"last": [number]}})

    assert raised.value.field == "checkpoint" and "number" in raised.value.problem
    assert registry.get("a").checkpoint == {"count": 1}


def test_given_a_stop_when_the_container_reports_then_stopped_with_its_exit(
    registry: ObserverRegistry, dynamodb: Any, registry_table: str, clock: ManualClock
) -> None:
    registry.create("a", "ticker", {})
    start_generation(dynamodb, registry_table, "a", 1, "arn:task/1")
    registry.claim_generation("a", 1)
    registry.request_stop("a")

    registry.report_exit(
        "a", 1, exit_code=0, reason="stop requested", task_arn="arn:task/1", stopped=True
    )

    observer = registry.get("a")
    assert observer.status is Status.STOPPED
    assert observer.last_exit is not None
    assert (observer.last_exit.exit_code, observer.last_exit.reason) == (0, "stop requested")
    assert observer.last_exit.task_arn == "arn:task/1" and observer.last_exit.at == clock()


def test_given_many_observers_when_listed_then_paged_in_name_order_with_a_status_filter(
    dynamodb: Any, registry_table: str, clock: ManualClock
) -> None:
    registry = ObserverRegistry(dynamodb, registry_table, clock=clock)
    names = [f"obs-{i:03d}" for i in range(25)]
    for name in names:
        registry.create(name, "ticker", {})
    for name in names[::5]:
        registry.request_stop(name)

    first = registry.list_page(limit=10)
    second = registry.list_page(limit=10, cursor=first.cursor)
    stopped = list(registry.iter_all(status=Status.STOPPED))
    pending = registry.list_page(status=Status.PENDING, limit=7)

    assert [o.name for o in first.observers] == names[:10]
    assert [o.name for o in second.observers] == names[10:20]
    assert [o.name for o in stopped] == names[::5]
    assert len(pending.observers) == 7 and pending.cursor is not None
    assert all(o.status is Status.PENDING for o in pending.observers)
    assert [o.name for o in registry.iter_all()] == names
    assert FLEET_COUNTER_NAME not in [o.name for o in registry.iter_all()]


def test_given_a_forged_cursor_when_listing_then_invalid_cursor(
    registry: ObserverRegistry,
) -> None:
    with pytest.raises(InvalidCursor):
        registry.list_page(cursor="not-base64-json!")


def _cursor(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode()


@pytest.mark.parametrize(
    "key",
    [
        {"name": "a", "fleet": "observers"},
        {"name": {"S": "a"}, "fleet": {"N": "1"}},
        {"name": {"S": 1}, "fleet": {"S": "observers"}},
        {"name": {"S": "a", "N": "1"}, "fleet": {"S": "observers"}},
        {"name": {"S": "a"}, "fleet": {"S": "someone-else"}},
        {"name": {"S": "#fleet"}, "fleet": {"S": "observers"}},
        {"name": {"S": ""}, "fleet": {"S": "observers"}},
        ["name", "fleet"],
    ],
)
def test_given_a_well_formed_but_forged_cursor_when_listing_then_invalid_cursor(
    registry: ObserverRegistry, key: Any
) -> None:
    registry.create("a", "ticker", {})

    with pytest.raises(InvalidCursor):
        registry.list_page(cursor=_cursor(key))


def test_given_a_cursor_dynamodb_refuses_when_listing_then_invalid_cursor(
    registry_table: str, dynamodb: Any, clock: ManualClock
) -> None:
    class Refusing:
        def query(self, **kwargs: Any) -> Any:
            assert ":after" in kwargs["ExpressionAttributeValues"]
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "bad start key"}}, "Query"
            )

        def __getattr__(self, name: str) -> Any:
            return getattr(dynamodb, name)

    registry = ObserverRegistry(Refusing(), registry_table, clock=clock)
    cursor = _cursor({"name": {"S": "a"}, "fleet": {"S": "observers"}})

    with pytest.raises(InvalidCursor):
        registry.list_page(cursor=cursor)
