"""The reconciler on moto: DynamoDB registry, ECS Fargate tasks, the SQS dead-letter queue."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from tests.helpers.moto_fleet import TABLE, MotoFleet, running, stream, task_event
from vigil.dynamo import to_wire
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import started_by, task_state
from vigil.observers.model import Desired, Status, to_item
from vigil.observers.reconciler import changed_records


def crash(
    fleet: MotoFleet, arn: str, *, name: str, generation: int, exit_code: int = 1, version: int = 5
) -> dict[str, Any]:
    """Stop the task in moto and build the event ECS would send for a crashed container."""
    fleet.ecs_client.stop_task(cluster=fleet.cluster_arn, task=arn, reason="crashed")
    return task_event(
        fleet,
        arn,
        name=name,
        generation=generation,
        last_status="STOPPED",
        version=version,
        exit_code=exit_code,
    )


def on_event(fleet: MotoFleet, event: dict[str, Any]) -> d.PassReport:  # type: ignore[name-defined]
    return fleet.reconciler().on_task_event(task_state(event["detail"]))


# Starting ------------------------------------------------------------------------------------


def test_a_created_observer_starts_from_the_stream_with_its_marks(fleet: MotoFleet) -> None:
    # Given an observer just created (PENDING) and its stream record
    created = fleet.observer("btc-usd")
    fleet.put(created)
    # When the stream pass sees it
    fleet.reconciler().on_records(changed_records([stream(to_item(created))]))
    # Then generation 1 runs, named in startedBy, tags and overrides
    item = fleet.item("btc-usd")
    assert (item["status"], item["generation"]) == ("STARTING", 1)
    task = fleet.describe(item["task_arn"])
    assert task["startedBy"] == started_by("btc-usd")
    assert {"key": "vigil:observer", "value": "btc-usd"} in task["tags"]
    assert {"key": "vigil:generation", "value": "1"} in task["tags"]
    env = task["overrides"]["containerOverrides"][0]["environment"]
    assert {"name": "VIGIL_OBSERVER_GENERATION", "value": "1"} in env
    assert "next_start_at_ms" not in item and item["version"] == 3


def test_resync_starts_what_is_missing_and_a_second_pass_starts_nothing(fleet: MotoFleet) -> None:
    fleet.put(fleet.observer("a"))
    fleet.put(fleet.observer("b"))
    reconciler = fleet.reconciler()
    report = reconciler.resync("pass-1")
    assert report is not None and report.started == 2
    assert len(running(fleet)) == 2
    fleet.clock.advance(timedelta(minutes=2))
    fleet.counter.reset()
    again = reconciler.resync("pass-2")
    assert again is not None and again.started == 0
    assert fleet.counter.calls["RunTask"] == 0 and len(running(fleet)) == 2


def test_a_mass_start_is_spread_over_passes(fleet: MotoFleet) -> None:
    for index in range(5):
        fleet.put(fleet.observer(f"o-{index}"))
    first = fleet.reconciler(max_starts_per_pass=3).resync("one")
    assert first is not None and first.started == 3 and len(running(fleet)) == 3
    second = fleet.reconciler(max_starts_per_pass=3).resync("two")
    assert second is not None and second.started == 2 and len(running(fleet)) == 5


def test_the_stream_ignores_heartbeats(fleet: MotoFleet) -> None:
    observer, _ = fleet.running_task("a", 1)
    before = to_item(observer)
    after = {**before, "heartbeat_at_ms": before["heartbeat_at_ms"] + 30_000, "version": 2}
    assert changed_records([stream(after, before)]) == []


# Restarts, backoff, failure ------------------------------------------------------------------


def test_a_crash_restarts_at_once_then_backs_off_then_fails_with_a_notice(
    fleet: MotoFleet,
) -> None:
    fleet.settings = d.Settings(failure_threshold=3)
    _, arn = fleet.running_task("eth", 1)
    # First crash after a long healthy run: restart at once.
    on_event(fleet, crash(fleet, arn, name="eth", generation=1))
    item = fleet.item("eth")
    assert (item["status"], item["generation"], item["restarts"]) == ("STARTING", 2, 1)
    assert item["consecutive_failures"] == 1 and item["last_exit"]["exit_code"] == 1
    assert item["task_arn"] != arn and item["task_arn"] in running(fleet)
    # Second crash 10 s after starting: quick, so it backs off.
    fleet.clock.advance(10)
    on_event(fleet, crash(fleet, item["task_arn"], name="eth", generation=2))
    item = fleet.item("eth")
    assert (item["status"], item["consecutive_failures"]) == ("PENDING", 2)
    backoff_until = item["next_start_at_ms"]
    assert running(fleet) == []
    fleet.reconciler().resync("early")
    assert fleet.item("eth")["status"] == "PENDING"
    # After the backoff the resync starts generation 3.
    fleet.clock.advance(fleet.settings.backoff_base + timedelta(seconds=1))
    assert backoff_until < fleet.clock().timestamp() * 1000
    fleet.reconciler().resync("later")
    item = fleet.item("eth")
    assert (item["status"], item["generation"]) == ("STARTING", 3)
    # Third quick crash reaches the threshold: FAILED, with a notice on the DLQ.
    fleet.clock.advance(5)
    on_event(fleet, crash(fleet, item["task_arn"], name="eth", generation=3))
    item = fleet.item("eth")
    assert item["status"] == "FAILED" and "3 consecutive quick failures" in item["failure_reason"]
    (notice,) = fleet.dlq_messages()
    assert notice["name"] == "eth" and notice["reason"] == item["failure_reason"]
    assert ("ObserverFailed", "ticker", 1) in fleet.metrics
    assert running(fleet) == []


def test_a_bad_config_exit_fails_at_once(fleet: MotoFleet) -> None:
    _, arn = fleet.running_task("bad", 1)
    on_event(fleet, crash(fleet, arn, name="bad", generation=1, exit_code=2))
    item = fleet.item("bad")
    assert item["status"] == "FAILED" and "bad config" in item["failure_reason"]
    assert [m["name"] for m in fleet.dlq_messages()] == ["bad"]


def test_a_stale_heartbeat_is_described_once_and_the_task_replaced(fleet: MotoFleet) -> None:
    _, arn = fleet.running_task("quiet", 4)
    fleet.running_task("chatty", 1)
    fleet.clock.advance(3 * fleet.settings.heartbeat_interval + timedelta(seconds=1))
    # chatty heartbeats in time; quiet does not
    chatty = fleet.item("chatty")
    fleet.dynamodb.put_item(
        TableName=TABLE,
        Item=to_wire({**chatty, "heartbeat_at_ms": int(fleet.clock().timestamp() * 1000)}),
    )
    fleet.counter.reset()
    report = fleet.reconciler().resync("pass")
    assert report is not None
    assert fleet.counter.calls["DescribeTasks"] == 1
    assert fleet.describe(arn)["lastStatus"] == "STOPPED"
    item = fleet.item("quiet")
    assert (item["generation"], item["status"]) == (5, "STARTING")
    assert item["last_exit"]["reason"] == "no heartbeat"
    assert fleet.item("chatty")["generation"] == 1


def test_fresh_heartbeats_cost_no_describe(fleet: MotoFleet) -> None:
    fleet.clock.advance(60)  # an ordinary minute (a sweep's also counts the stopped index)
    for index in range(5):
        fleet.running_task(f"obs-{index}", 1)
    fleet.counter.reset()
    report = fleet.reconciler().resync("pass")
    assert report is not None and report.observers == 5
    calls = fleet.counter.calls
    assert calls["DescribeTasks"] == 0 and calls["RunTask"] == 0 and calls["StopTask"] == 0
    assert calls["ListTasks"] == 1 and calls["Query"] == 1


# Events --------------------------------------------------------------------------------------


def test_stale_and_out_of_order_events_change_nothing(fleet: MotoFleet) -> None:
    _, current = fleet.running_task("sol", 2)
    old = fleet.run_observer_task("sol", 1)
    fleet.ecs_client.stop_task(cluster=fleet.cluster_arn, task=old, reason="replaced")
    on_event(
        fleet,
        task_event(fleet, current, name="sol", generation=2, last_status="RUNNING", version=4),
    )
    seen = fleet.item("sol")
    assert seen["task_version"] == 4
    # A STOPPED event for the previous task, and an older event for the current one.
    on_event(
        fleet,
        task_event(
            fleet, old, name="sol", generation=1, last_status="STOPPED", version=9, exit_code=1
        ),
    )
    report = on_event(
        fleet,
        task_event(fleet, current, name="sol", generation=2, last_status="PENDING", version=3),
    )
    assert fleet.item("sol") == seen
    assert all(isinstance(a, d.Ignore) and a.stale for _, a in report.actions)
    assert ("ObserverStaleEventIgnored", "ticker", 1) in fleet.metrics


def test_an_event_from_a_live_task_that_is_not_current_stops_it(fleet: MotoFleet) -> None:
    fleet.running_task("ada", 3)
    orphan = fleet.run_observer_task("ada", 2)
    on_event(
        fleet, task_event(fleet, orphan, name="ada", generation=2, last_status="RUNNING", version=2)
    )
    assert fleet.describe(orphan)["lastStatus"] == "STOPPED"
    assert fleet.item("ada")["generation"] == 3


# Orphans -------------------------------------------------------------------------------------


def test_the_sweep_stops_orphans_and_adopts_a_start_in_flight(fleet: MotoFleet) -> None:
    _, current = fleet.running_task("live", 2)
    superseded = fleet.run_observer_task("live", 1)
    ghost = fleet.run_observer_task("ghost", 1)
    in_flight = fleet.run_observer_task("new", 1)
    fleet.put(
        fleet.observer(
            "new",
            status=Status.STARTING,
            generation=1,
            next_start_at=fleet.clock() + timedelta(seconds=15),
        ),
        started_at_ms=int(fleet.clock().timestamp() * 1000),
    )
    report = fleet.reconciler().resync("pass")
    assert report is not None and report.orphans_stopped == 2
    assert fleet.describe(superseded)["lastStatus"] == "STOPPED"
    assert fleet.describe(ghost)["lastStatus"] == "STOPPED"
    assert fleet.describe(current)["lastStatus"] == "RUNNING"
    assert fleet.item("new")["task_arn"] == in_flight
    assert fleet.describe(in_flight)["lastStatus"] == "RUNNING"


# Stopping ------------------------------------------------------------------------------------


def test_desired_stopped_stops_the_task_then_marks_stopped(fleet: MotoFleet) -> None:
    observer, arn = fleet.running_task("feed", 1)
    before = to_item(observer)
    # The API asks for a stop: desired STOPPED, status STOPPING.
    after = {**before, "desired": "STOPPED", "status": "STOPPING", "version": 2}
    fleet.dynamodb.put_item(TableName=TABLE, Item=to_wire(after))
    fleet.reconciler().on_records(changed_records([stream(after, before)]))
    assert fleet.describe(arn)["lastStatus"] == "STOPPED"
    assert fleet.item("feed")["status"] == "STOPPING"
    on_event(
        fleet,
        task_event(
            fleet,
            arn,
            name="feed",
            generation=1,
            last_status="STOPPED",
            version=6,
            exit_code=0,
            stop_code="UserInitiated",
        ),
    )
    item = fleet.item("feed")
    assert item["status"] == "STOPPED" and item["last_exit"]["stop_code"] == "UserInitiated"
    assert item["consecutive_failures"] == 0 and running(fleet) == []


def test_a_restart_request_replaces_the_running_task(fleet: MotoFleet) -> None:
    observer, arn = fleet.running_task("tick", 2)
    before = to_item(observer)
    after = {**before, "restart_generation": 2, "version": 2}
    fleet.dynamodb.put_item(TableName=TABLE, Item=to_wire(after))
    fleet.reconciler().on_records(changed_records([stream(after, before)]))
    item = fleet.item("tick")
    assert item["generation"] == 3 and item["task_arn"] != arn
    assert running(fleet) == [item["task_arn"]]


# RunTask failures ----------------------------------------------------------------------------


class FlakyEcs:
    """The moto ECS client, with RunTask failing as scripted (error codes or a failures list)."""

    def __init__(self, client: Any, script: list[str], on_run: Any = None) -> None:
        self._client = client
        self._script = list(script)
        self._on_run = on_run

    def run_task(self, **kwargs: Any) -> Any:
        step = self._script.pop(0) if self._script else "ok"
        if step == "throttle":
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "RunTask"
            )
        if step == "capacity":
            return {"tasks": [], "failures": [{"reason": "Capacity is unavailable at this time"}]}
        answer = self._client.run_task(**kwargs)
        if self._on_run:
            self._on_run()
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_throttled_run_task_is_retried_within_the_pass(fleet: MotoFleet) -> None:
    fleet.put(fleet.observer("a"))
    flaky = FlakyEcs(fleet.ecs_client, ["throttle", "capacity"])
    fleet.reconciler(ecs_client=flaky).resync("pass")
    assert fleet.sleeps == [0.5, 1.0]
    assert fleet.item("a")["task_arn"] in running(fleet)


def test_a_failing_run_task_keeps_the_observer_and_retries_later(fleet: MotoFleet) -> None:
    fleet.put(fleet.observer("a"))
    flaky = FlakyEcs(fleet.ecs_client, ["capacity"] * 3)
    fleet.reconciler(ecs_client=flaky).resync("pass-1")
    item = fleet.item("a")
    assert (item["status"], item["generation"], item["start_attempts"]) == ("STARTING", 1, 1)
    assert "Capacity is unavailable" in item["last_start_error"] and "task_arn" not in item
    assert ("ObserverRunTaskFailed", "ticker", 1) in fleet.metrics
    # Before the retry time nothing is tried; after it, the same generation starts.
    fleet.counter.reset()
    fleet.reconciler(ecs_client=flaky).resync("pass-2")
    assert fleet.counter.calls["RunTask"] == 0
    fleet.clock.advance(fleet.settings.run_task_retry_base + timedelta(seconds=1))
    fleet.reconciler(ecs_client=flaky).resync("pass-3")
    item = fleet.item("a")
    assert item["generation"] == 1 and item["task_arn"] in running(fleet)
    assert item["start_attempts"] == 0


def test_a_task_started_for_a_generation_stopped_meanwhile_is_stopped(fleet: MotoFleet) -> None:
    fleet.put(fleet.observer("a"))

    def stop_requested() -> None:
        item = fleet.item("a")
        item.update(
            desired=Desired.STOPPED.value, status=Status.STOPPED.value, version=item["version"] + 1
        )
        fleet.dynamodb.put_item(TableName=TABLE, Item=to_wire(item))

    flaky = FlakyEcs(fleet.ecs_client, [], on_run=stop_requested)
    fleet.reconciler(ecs_client=flaky).resync("pass")
    assert running(fleet) == []
    assert "task_arn" not in fleet.item("a")


# The resync lease ----------------------------------------------------------------------------


def test_only_one_resync_runs_at_a_time(fleet: MotoFleet) -> None:
    fleet.put(fleet.observer("a"))
    overlapping: list[Any] = []

    class Overlap:
        """While the first pass lists tasks, a second pass starts."""

        def list_tasks(self, **kwargs: Any) -> Any:
            overlapping.append(fleet.reconciler().resync("second"))
            return fleet.ecs_client.list_tasks(**kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(fleet.ecs_client, name)

    first = fleet.reconciler(ecs_client=Overlap()).resync("first")
    assert first is not None and first.started == 1
    assert overlapping == [None]
    # The lease was released: the next pass runs.
    assert fleet.reconciler().resync("third") is not None


# Errors of one observer ----------------------------------------------------------------------


class FailingFor:
    """The moto ECS client, with one call failing (any error) whenever it names one observer."""

    def __init__(self, client: Any, operation: str, name: str, error: Exception) -> None:
        self._client = client
        self._operation = operation
        self._name = name
        self._error = error
        self.arns: set[str] = set()

    def __getattr__(self, operation: str) -> Any:
        real = getattr(self._client, operation)
        if operation != self._operation:
            return real

        def call(**kwargs: Any) -> Any:
            if kwargs.get("startedBy") == self._name or kwargs.get("task") in self.arns:
                raise self._error
            return real(**kwargs)

        return call


def test_a_run_task_timeout_for_one_observer_is_a_start_failure_and_the_pass_goes_on(
    fleet: MotoFleet,
) -> None:
    for name in ("a", "b", "c"):
        fleet.put(fleet.observer(name))
    timing_out = FailingFor(
        fleet.ecs_client, "run_task", "b", ReadTimeoutError(endpoint_url="https://ecs")
    )

    report = fleet.reconciler(ecs_client=timing_out).resync("pass")

    assert report is not None
    assert {fleet.item("a")["task_arn"], fleet.item("c")["task_arn"]} <= set(running(fleet))
    failed = fleet.item("b")
    assert (failed["status"], failed["start_attempts"]) == ("STARTING", 1)
    assert "task_arn" not in failed and "Read timeout" in failed["last_start_error"]


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="https://ecs"),
        ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "StopTask"),
    ],
)
def test_an_aws_error_for_one_observer_is_counted_and_the_pass_goes_on(
    fleet: MotoFleet, error: Exception
) -> None:
    arns = {}
    for name in ("a", "b", "c"):
        observer, arns[name] = fleet.running_task(name, 1)
        fleet.put(replace(observer, desired=Desired.STOPPED))
    failing = FailingFor(fleet.ecs_client, "stop_task", "b", error)
    failing.arns.add(arns["b"])

    report = fleet.reconciler(ecs_client=failing).resync("pass")

    assert report is not None and report.errors == 1
    assert running(fleet) == [arns["b"]]
    # b's record was written first (the commit point): the next pass asks ECS again.
    assert [fleet.item(n)["status"] for n in ("a", "b", "c")] == ["STOPPING"] * 3
