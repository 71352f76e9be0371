"""Dedicated observers under faults: nothing sticks in silence, no second task per generation, and a
pass costs the same whatever else the cluster and the registry hold (issue 21)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

from tests.helpers.moto_fleet import KIND, TABLE, MotoFleet, running, stream
from vigil.contract.hosts import Capacity
from vigil.dynamo import to_wire
from vigil.leases import LeaseTable
from vigil.observers import decisions as d
from vigil.observers.model import Desired, Status, to_item
from vigil.observers.reconciler import RESYNC_LEASE_KEY, changed_records

NO_SPOT = {"reason": "Capacity is unavailable at this time"}


def throttled(operation: str) -> ClientError:
    error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
    return ClientError({"Error": error}, operation)


class Wrapped:
    """A moto client with some operations replaced (subclasses define them); the rest pass."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class ThrottledRelease(Wrapped):
    """moto's DynamoDB, with the resync lease's release throttled ``times`` times."""

    def __init__(self, client: Any, times: int) -> None:
        super().__init__(client)
        self.times = times

    def update_item(self, **request: Any) -> Any:
        releasing = request["Key"] == to_wire(RESYNC_LEASE_KEY) and request[
            "UpdateExpression"
        ].startswith("REMOVE")
        if releasing and self.times > 0:
            self.times -= 1
            raise throttled("UpdateItem")
        return self._client.update_item(**request)


# 1. The resync lease ----------------------------------------------------------------------------


def test_a_throttled_release_of_the_resync_lease_is_retried(fleet: MotoFleet) -> None:
    # Given a release throttled twice (past botocore's own retries)
    dynamodb = ThrottledRelease(fleet.dynamodb, times=2)
    # When a resync runs, and another a minute later
    first = fleet.reconciler(dynamodb=dynamodb).resync("first")
    fleet.clock.advance(60)
    second = fleet.reconciler().resync("second")
    # Then the release was retried after pauses, and the next minute's resync ran
    assert first is not None and second is not None
    assert dynamodb.times == 0 and len(fleet.sleeps) == 2


def test_a_release_throttled_past_the_lease_gives_up_and_the_lease_expires(
    fleet: MotoFleet,
) -> None:
    dynamodb = ThrottledRelease(fleet.dynamodb, times=10**6)

    def sleep(seconds: float) -> None:
        fleet.clock.advance(seconds + 10)

    reconciler = fleet.reconciler(dynamodb=dynamodb, sleeper=sleep)
    assert reconciler.resync("first") is not None
    # It gave up within the lease (no endless loop), and a later resync takes the lease over.
    assert dynamodb.times > 10**6 - 100
    fleet.clock.advance(timedelta(minutes=5))
    assert fleet.reconciler().resync("later") is not None


def test_a_skipped_resync_is_counted(fleet: MotoFleet) -> None:
    LeaseTable(fleet.dynamodb, TABLE, fleet.clock).acquire(
        RESYNC_LEASE_KEY, "someone", timedelta(minutes=4)
    )
    assert fleet.reconciler().resync("skipped") is None
    assert ("ResyncSkipped", None, 1) in fleet.metrics


# 2. A stop that does not complete; errors a pass caught --------------------------------------------


class StopFails(Wrapped):
    """moto's ECS with every StopTask refused."""

    def stop_task(self, **request: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "StopTask")


def test_a_stop_that_fails_every_pass_says_why_is_counted_and_clears_once_stopped(
    fleet: MotoFleet,
) -> None:
    # Given an observer asked to stop (the API set STOPPING) whose StopTask is refused
    observer, arn = fleet.running_task("a", 1)
    fleet.put(replace(observer, desired=Desired.STOPPED, status=Status.STOPPING))
    # When two passes run
    for holder in ("one", "two"):
        report = fleet.reconciler(ecs_client=StopFails(fleet.ecs_client)).resync(holder)
        assert report is not None and report.errors == 1
        fleet.clock.advance(60)
    # Then its record says why it still runs, written once, and each pass counted it
    item = fleet.item("a")
    assert item["status"] == "STOPPING" and "StopTask failed" in item["last_start_error"]
    assert "AccessDeniedException" in item["last_start_error"]
    assert item["version"] == observer.version + 1
    assert fleet.metrics.count(("ObserverStopFailed", KIND, 1)) == 2
    assert fleet.metrics.count(("ReconcilePassErrors", None, 1)) == 2
    # Once StopTask works, the observer stops and the reason goes
    fleet.reconciler().resync("three")
    fleet.clock.advance(60)
    fleet.reconciler().resync("four")
    item = fleet.item("a")
    assert arn not in running(fleet) and item["status"] == "STOPPED"
    assert "last_start_error" not in item


def test_a_clean_pass_reports_no_errors(fleet: MotoFleet) -> None:
    fleet.running_task("a", 1)
    fleet.reconciler().resync("pass")
    assert ("ReconcilePassErrors", None, 0) in fleet.metrics


# 3. A RUNNING record whose task died, every write to it throttled ---------------------------------


class ThrottledWrites(Wrapped):
    """moto's DynamoDB, with every write to one observer's record throttled."""

    def __init__(self, client: Any, name: str) -> None:
        super().__init__(client)
        self._name = name

    def update_item(self, **request: Any) -> Any:
        if request["Key"].get("name") == {"S": self._name}:
            raise throttled("UpdateItem")
        return self._client.update_item(**request)


def test_a_dead_task_whose_record_cannot_be_written_is_counted_stale_every_pass(
    fleet: MotoFleet,
) -> None:
    # Given a RUNNING observer whose task died (its event lost) and whose record refuses writes
    _, arn = fleet.running_task("a", 1)
    fleet.ecs_client.stop_task(cluster=fleet.cluster_arn, task=arn, reason="died")
    dynamodb = ThrottledWrites(fleet.dynamodb, "a")
    fleet.clock.advance(fleet.settings.stale_after + timedelta(seconds=1))
    # When three passes run
    for holder in ("one", "two", "three"):
        report = fleet.reconciler(dynamodb=dynamodb).resync(holder)
        assert report is not None and report.errors == 1
        fleet.clock.advance(60)
    # Then its record still says RUNNING (what the shortfall alarm counts), but every pass counted
    # a stale heartbeat and an error: the HeartbeatStale and ObserverErrors alarms read these
    assert fleet.item("a")["status"] == "RUNNING"
    assert fleet.metrics.count(("ObserverHeartbeatStale", None, 1)) == 3
    assert fleet.metrics.count(("ReconcilePassErrors", None, 1)) == 3


# 4. One task per generation ---------------------------------------------------------------------


class SpotThenTimeouts(Wrapped):
    """ECS as it answers for a token (a repeated token returns the task it started), with Spot out
    of capacity at first and on-demand answers lost to client-side timeouts ``timeouts`` times."""

    def __init__(self, client: Any, timeouts: int) -> None:
        super().__init__(client)
        self.timeouts = timeouts
        self.spot_refusals = 1
        self.by_token: dict[str, Any] = {}
        self.asked: list[str] = []

    def run_task(self, **request: Any) -> Any:
        spot = "capacityProviderStrategy" in request
        self.asked.append("spot" if spot else "on-demand")
        if spot and self.spot_refusals > 0:
            self.spot_refusals -= 1
            return {"tasks": [], "failures": [NO_SPOT]}
        token = request["clientToken"]
        if token not in self.by_token:
            plain = {k: v for k, v in request.items() if k != "capacityProviderStrategy"}
            self.by_token[token] = self._client.run_task(**plain | {"launchType": "FARGATE"})
        if not spot and self.timeouts > 0:
            self.timeouts -= 1
            raise ReadTimeoutError(endpoint_url="https://ecs")
        return self.by_token[token]


def test_a_fallback_that_timed_out_is_retried_on_demand_never_on_spot(fleet: MotoFleet) -> None:
    # Given a Spot kind: Spot refuses, on-demand starts the task but the answer times out once
    fleet.capacities[KIND] = Capacity.SPOT
    ecs = SpotThenTimeouts(fleet.ecs_client, timeouts=1)
    created = fleet.observer("a")
    fleet.put(created)
    # When the observer starts (the starter retries within the pass)
    fleet.reconciler(ecs_client=ecs).on_records(changed_records([stream(to_item(created))]))
    # Then the retry asked on-demand under the same token: one task, recorded
    assert ecs.asked == ["spot", "on-demand", "on-demand"]
    assert running(fleet) == [fleet.item("a")["task_arn"]]
    assert fleet.item("a")["capacity"] == "on-demand"


def test_a_fallback_that_timed_out_all_pass_is_retried_on_demand_next_pass(
    fleet: MotoFleet,
) -> None:
    fleet.capacities[KIND] = Capacity.SPOT
    ecs = SpotThenTimeouts(fleet.ecs_client, timeouts=3)
    created = fleet.observer("a")
    fleet.put(created)
    fleet.reconciler(ecs_client=ecs).on_records(changed_records([stream(to_item(created))]))
    assert "task_arn" not in fleet.item("a")
    # The next pass after the retry time: on-demand again, the same token, the same task
    fleet.clock.advance(fleet.settings.run_task_retry_base + timedelta(seconds=1))
    fleet.reconciler(ecs_client=ecs).resync("later")
    assert ecs.asked == ["spot", *["on-demand"] * 4]
    assert running(fleet) == [fleet.item("a")["task_arn"]]


class YoungTasks(Wrapped):
    """moto's ECS, with every task described as created just now (moto stamps the wall clock)."""

    def __init__(self, client: Any, fleet: MotoFleet) -> None:
        super().__init__(client)
        self._fleet = fleet

    def describe_tasks(self, **request: Any) -> Any:
        answer = self._client.describe_tasks(**request)
        for task in answer["tasks"]:
            task["createdAt"] = self._fleet.clock() - timedelta(seconds=10)
        return answer


def test_a_young_second_task_of_the_recorded_generation_is_stopped_at_once(
    fleet: MotoFleet,
) -> None:
    # Given an observer whose record names its generation-1 task, and a second, young task of
    # generation 1 (a retry that started another)
    _, arn = fleet.running_task("a", 1)
    second = fleet.run_observer_task("a", 1)
    # When the resync sweeps
    report = fleet.reconciler(ecs_client=YoungTasks(fleet.ecs_client, fleet)).resync("pass")
    # Then the second is stopped at once, not spared for the orphan grace
    assert report is not None and report.orphans_stopped == 1
    assert running(fleet) == [arn] and second != arn


# 5. Costs ---------------------------------------------------------------------------------------


def test_foreign_tasks_are_described_once_not_every_pass(fleet: MotoFleet) -> None:
    # Given a cluster running an observer and 100 tasks that are not observers'
    fleet.settings = d.Settings(heartbeat_interval=timedelta(hours=1))
    fleet.running_task("a", 1)
    for _ in range(10):
        fleet.ecs_client.run_task(
            cluster=fleet.cluster_arn,
            taskDefinition=fleet.task_definition_arn,
            count=10,
            launchType="FARGATE",
            networkConfiguration={
                "awsvpcConfiguration": {
                    "subnets": [fleet.subnet_id],
                    "securityGroups": [fleet.security_group_id],
                }
            },
        )
    reconciler = fleet.reconciler()
    fleet.counter.reset()
    reconciler.resync("first")
    assert fleet.counter.calls["DescribeTasks"] == 1  # the first pass: one batch of 100
    # When later passes run
    fleet.counter.reset()
    for holder in ("second", "third"):
        fleet.clock.advance(60)
        reconciler.resync(holder)
    # Then the foreign tasks cost no DescribeTasks any more
    assert fleet.counter.calls["DescribeTasks"] == 0
