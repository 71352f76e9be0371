"""Fargate Spot with an on-demand fallback: RunTask's answers, and the record of what was got."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from tests.helpers.moto_fleet import KIND, MotoFleet, stream
from vigil.contract.hosts import Capacity
from vigil.observers.ecs_tasks import SPOT_STRATEGY, EcsTasks, RunTaskFailed, client_token
from vigil.observers.model import Status, to_item
from vigil.observers.reconciler import changed_records

NO_SPOT = {
    "reason": "Capacity is unavailable at this time. Please try again later or in a "
    "different availability zone"
}
TASK_DEFINITION = "arn:aws:ecs:us-east-1:123456789012:task-definition/vigil-ticker:7"


class FakeEcs:
    """Answers RunTask from a script, one answer (a dict or an exception) per call."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []

    def run_task(self, **request: Any) -> dict[str, Any]:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)


def started(arn: str = "arn:aws:ecs:us-east-1:123456789012:task/c/abc") -> dict[str, Any]:
    return {"tasks": [{"taskArn": arn}], "failures": []}


def refused(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "RunTask")


def tasks(client: FakeEcs, capacity: Capacity) -> EcsTasks:
    return EcsTasks(
        client,
        cluster="vigil",
        task_definitions={KIND: TASK_DEFINITION},
        container_name="observer",
        subnets=["subnet-1"],
        security_groups=["sg-1"],
        assign_public_ip=True,
        capacities={KIND: capacity},
    )


def launch(ecs: EcsTasks) -> Any:
    return ecs.launch(name="btc", kind=KIND, generation=3, incarnation="2026-11-23T00:00:00Z")


def test_a_spot_kind_asks_fargate_spot_and_records_it() -> None:
    client = FakeEcs(started())
    launched = launch(tasks(client, Capacity.SPOT))
    assert launched.capacity is Capacity.SPOT and launched.task_definition == TASK_DEFINITION
    (request,) = client.requests
    assert request["capacityProviderStrategy"] == SPOT_STRATEGY and "launchType" not in request


@pytest.mark.parametrize(
    "spot_answer",
    [
        {"tasks": [], "failures": [NO_SPOT]},
        refused("InvalidParameterException"),
        refused("PlatformTaskDefinitionIncompatibilityException"),
    ],
    ids=["no-capacity", "refused", "incompatible"],
)
def test_spot_without_capacity_falls_back_to_on_demand_at_once(spot_answer: Any) -> None:
    client = FakeEcs(spot_answer, started())
    launched = launch(tasks(client, Capacity.SPOT))
    assert launched.capacity is Capacity.ON_DEMAND
    spot, on_demand = client.requests
    assert on_demand["launchType"] == "FARGATE" and "capacityProviderStrategy" not in on_demand
    # ECS refuses a token reused with other parameters: the fallback has its own
    assert on_demand["clientToken"] != spot["clientToken"]
    assert len(on_demand["clientToken"]) <= 64


@pytest.mark.parametrize(
    "spot_answer",
    [refused("ThrottlingException"), ReadTimeoutError(endpoint_url="https://ecs")],
    ids=["throttled", "timeout"],
)
def test_a_spot_answer_that_may_have_started_a_task_is_retried_not_doubled(
    spot_answer: Any,
) -> None:
    client = FakeEcs(spot_answer)
    with pytest.raises(RunTaskFailed) as failed:
        launch(tasks(client, Capacity.SPOT))
    assert failed.value.transient and len(client.requests) == 1


def test_when_on_demand_fails_too_the_start_fails_as_before() -> None:
    client = FakeEcs({"tasks": [], "failures": [NO_SPOT]}, {"tasks": [], "failures": [NO_SPOT]})
    with pytest.raises(RunTaskFailed, match="Capacity is unavailable"):
        launch(tasks(client, Capacity.SPOT))


def test_an_on_demand_kind_keeps_its_request_and_token() -> None:
    client = FakeEcs(started())
    launched = launch(tasks(client, Capacity.ON_DEMAND))
    assert launched.capacity is Capacity.ON_DEMAND
    (request,) = client.requests
    assert request["launchType"] == "FARGATE"
    assert request["clientToken"] == client_token("btc", "2026-11-23T00:00:00Z", 3)


class NoSpot:
    """moto's ECS, with FARGATE_SPOT out of capacity (moto does not model capacity providers)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.spot_asked = 0

    def run_task(self, **request: Any) -> dict[str, Any]:
        if "capacityProviderStrategy" in request:
            self.spot_asked += 1
            return {"tasks": [], "failures": [NO_SPOT]}
        return dict(self._client.run_task(**request))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_the_starter_records_the_capacity_and_revision_it_got(fleet: MotoFleet) -> None:
    # Given a Spot kind, Spot out of capacity, and a created observer
    fleet.capacities[KIND] = Capacity.SPOT
    ecs = NoSpot(fleet.ecs_client)
    created = fleet.observer("btc-usd")
    fleet.put(created)
    # When the reconciler starts it
    fleet.reconciler(ecs_client=ecs).on_records(changed_records([stream(to_item(created))]))
    # Then it runs on-demand at once (no retry wait), and the record says so
    item = fleet.item("btc-usd")
    assert ecs.spot_asked == 1 and fleet.sleeps == []
    assert item["status"] == Status.STARTING.value and item["task_arn"]
    assert item["capacity"] == "on-demand"
    assert item["task_definition"] == fleet.task_definition_arn
    assert fleet.describe(item["task_arn"])["launchType"] == "FARGATE"
