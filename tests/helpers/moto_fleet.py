"""An observer fleet on moto, shaped as the ObserverFleet construct deploys it (tests and benchmarks).

moto needs: a real VPC (DNS hostnames on), subnet and security group for Fargate RunTask, container
memory on the task definition, and manual ``ecs::task`` transitions (or tasks die on DescribeTasks).
It does not send ECS events: :func:`task_event` builds them as AWS documents them.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import boto3
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.moto_api import state_manager

from tests.helpers.observers import REGISTRY_PATH
from vigil.clock import ManualClock, iso
from vigil.contract.hosts import Capacity
from vigil.contract.observers import NAMED_KIND, NAMES_PARTITION
from vigil.dynamo import from_wire, to_wire
from vigil.leases import LeaseTable
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import GENERATION_ENV, NAME_ENV, EcsTasks
from vigil.observers.fleet_store import FleetStore
from vigil.observers.model import Desired, Observer, Status, to_item
from vigil.observers.reconciler import Notices, Reconciler, assemble
from vigil_tools.emulator.template import create_table, synthesized_app

REGION = "us-east-1"
TABLE = "vigil-observers"
CONTAINER = "observer"
KIND = "ticker"


def manual_task_transitions() -> None:
    """Tasks keep their status until stopped: a status moves only after ``times`` describes."""
    state_manager.set_transition(
        model_name="ecs::task", transition={"progression": "manual", "times": 10**9}
    )


def default_task_transitions() -> None:
    state_manager.unset_transition(model_name="ecs::task")


def create_registry_table(client: Any) -> None:
    """The registry exactly as the synthesized template defines it."""
    create_table(synthesized_app(), client, REGISTRY_PATH, TABLE)


class CallCounter:
    """Counts AWS API calls by operation through botocore's ``before-call`` hook."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1

    def reset(self) -> None:
        self.calls.clear()


@dataclass
class MotoFleet:
    """Clients and resources of one emulated fleet (call inside ``mock_aws``)."""

    clock: ManualClock
    dynamodb: Any = None
    ecs_client: Any = None
    sqs: Any = None
    cluster_arn: str = ""
    task_definition_arn: str = ""
    subnet_id: str = ""
    security_group_id: str = ""
    dlq_url: str = ""
    counter: CallCounter = field(default_factory=CallCounter)
    settings: d.Settings = field(default_factory=d.Settings)
    sleeps: list[float] = field(default_factory=list)
    metrics: list[tuple[str, str | None, float]] = field(default_factory=list)
    capacities: dict[str, Capacity] = field(default_factory=dict)
    """Kind -> capacity for the reconciler's RunTask (none: on-demand)."""

    def __post_init__(self) -> None:
        manual_task_transitions()
        session = boto3.session.Session(region_name=REGION)
        self.dynamodb = session.client("dynamodb")
        self.ecs_client = session.client("ecs")
        self.sqs = session.client("sqs")
        ec2 = session.client("ec2")
        for client in (self.dynamodb, self.ecs_client, self.sqs):
            self.counter.attach(client)
        create_registry_table(self.dynamodb)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
        ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsSupport={"Value": True})
        self.subnet_id = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20")["Subnet"]["SubnetId"]
        self.security_group_id = ec2.create_security_group(
            GroupName="observers", Description="observers", VpcId=vpc
        )["GroupId"]
        self.cluster_arn = self.ecs_client.create_cluster(clusterName="vigil-observers")["cluster"][
            "clusterArn"
        ]
        self.task_definition_arn = self.register_revision("vigil/observer:test")
        self.dlq_url = self.sqs.create_queue(QueueName="vigil-observers-dlq")["QueueUrl"]

    def register_revision(
        self,
        image: str,
        *,
        family: str = "vigil-observer-ticker",
        cpu: int = 256,
        memory: int = 512,
    ) -> str:
        """A revision of a kind's task definition family (a deploy registers the next one)."""
        return str(
            self.ecs_client.register_task_definition(
                family=family,
                requiresCompatibilities=["FARGATE"],
                networkMode="awsvpc",
                cpu=str(cpu),
                memory=str(memory),
                containerDefinitions=[
                    {"name": CONTAINER, "image": image, "memory": memory, "essential": True}
                ],
            )["taskDefinition"]["taskDefinitionArn"]
        )

    # The system under test -------------------------------------------------------------------

    def task_definitions(self) -> dict[str, str]:
        return {KIND: self.task_definition_arn}

    def ecs(self, client: Any = None) -> EcsTasks:
        return EcsTasks(
            client or self.ecs_client,
            cluster=self.cluster_arn,
            task_definitions=self.task_definitions(),
            container_name=CONTAINER,
            subnets=[self.subnet_id],
            security_groups=[self.security_group_id],
            assign_public_ip=True,
            capacities=self.capacities,
        )

    def reconciler(
        self, *, ecs_client: Any = None, dynamodb: Any = None, **options: Any
    ) -> Reconciler:
        table_client = dynamodb or self.dynamodb
        return assemble(
            store=FleetStore(table_client, TABLE),
            ecs=self.ecs(ecs_client),
            notices=Notices(self.sqs, self.dlq_url),
            leases=LeaseTable(table_client, TABLE, self.clock),
            settings=self.settings,
            clock=self.clock,
            sleeper=options.pop("sleeper", self.sleeps.append),
            metric=options.pop(
                "metric",
                lambda metric, kind, value: self.metrics.append((metric.value, kind, value)),
            ),
            **options,
        )

    # Registry fixtures (inserted directly, as the registry would write them) ------------------

    def observer(self, name: str, **fields: Any) -> Observer:
        now = self.clock()
        values: dict[str, Any] = {
            "name": name,
            "kind": KIND,
            "config": {"every": 5},
            "desired": Desired.RUNNING,
            "status": Status.PENDING,
            "created_at": now - timedelta(hours=1),
            "updated_at": now,
        }
        values.update(fields)
        return Observer(**values)

    def put(self, observer: Observer, **tracking: Any) -> None:
        """The observer's record as given, with its name's claim (as ``create`` writes it)."""
        self.put_many([observer], **tracking)

    def put_many(self, observers: list[Observer], **tracking: Any) -> None:
        items: list[dict[str, Any]] = []
        for observer in observers:
            item = to_item(observer)
            item.update(tracking)
            claim = {"kind": NAMES_PARTITION, "name": observer.name, NAMED_KIND: observer.kind}
            items += [item, claim]
        for start in range(0, len(items), 24):
            batch = [{"PutRequest": {"Item": to_wire(item)}} for item in items[start : start + 24]]
            self.dynamodb.batch_write_item(RequestItems={TABLE: batch})

    def item(self, name: str) -> dict[str, Any]:
        """An observer's record as the registry holds it, read from the emulator's table itself:
        what GetItem answers, without a request through botocore and moto's dispatch (the tests
        look at records several hundred times a module; the code under test still makes its
        own requests, counted by :attr:`counter`). KeyError: no such record."""
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION]
        claim = backend.get_item(TABLE, {"kind": {"S": NAMES_PARTITION}, "name": {"S": name}})
        if claim is None:
            raise KeyError(name)
        kind = claim.to_json()["Attributes"][NAMED_KIND]["S"]
        stored = backend.get_item(TABLE, {"kind": {"S": kind}, "name": {"S": name}})
        if stored is None:
            raise KeyError(name)
        item = from_wire(stored.to_json()["Attributes"])
        assert item is not None
        return item

    def run_observer_task(self, name: str, generation: int) -> str:
        """Start a task with an observer's marks, as a (possibly earlier) reconciler would."""
        return self.ecs().run(
            name=name, kind=KIND, generation=generation, incarnation=f"test-{generation}"
        )

    def running_task(self, name: str, generation: int, **fields: Any) -> tuple[Observer, str]:
        """An observer RUNNING on a real moto task, heartbeat fresh."""
        arn = self.run_observer_task(name, generation)
        observer = self.observer(
            name,
            status=Status.RUNNING,
            generation=generation,
            task_arn=arn,
            heartbeat_at=self.clock(),
            **fields,
        )
        self.put(
            observer, started_at_ms=int((self.clock() - timedelta(hours=1)).timestamp() * 1000)
        )
        return observer, arn

    def describe(self, arn: str) -> dict[str, Any]:
        tasks = self.ecs_client.describe_tasks(
            cluster=self.cluster_arn, tasks=[arn], include=["TAGS"]
        )
        return dict(tasks["tasks"][0])

    def dlq_messages(self) -> list[dict[str, Any]]:
        answer = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10)
        return [json.loads(m["Body"]) for m in answer.get("Messages", [])]


def task_event(
    fleet: MotoFleet,
    arn: str,
    *,
    name: str,
    generation: int,
    last_status: str,
    version: int,
    stop_code: str | None = None,
    exit_code: int | None = None,
    stopped_reason: str | None = None,
    stopped_at: datetime | None = None,
) -> dict[str, Any]:
    """An EventBridge "ECS Task State Change" event, shaped as AWS documents it."""
    now = fleet.clock()
    container: dict[str, Any] = {
        "containerArn": arn.replace(":task/", ":container/") + "/c1",
        "lastStatus": last_status,
        "name": CONTAINER,
        "taskArn": arn,
    }
    if exit_code is not None:
        container["exitCode"] = exit_code
    detail: dict[str, Any] = {
        "clusterArn": fleet.cluster_arn,
        "taskArn": arn,
        "taskDefinitionArn": fleet.task_definition_arn,
        "lastStatus": last_status,
        "desiredStatus": "STOPPED" if last_status == "STOPPED" else "RUNNING",
        "launchType": "FARGATE",
        "cpu": "256",
        "memory": "512",
        "containers": [container],
        "overrides": {
            "containerOverrides": [
                {
                    "name": CONTAINER,
                    "environment": [
                        {"name": NAME_ENV, "value": name},
                        {"name": GENERATION_ENV, "value": str(generation)},
                    ],
                }
            ]
        },
        "startedBy": name[:36],
        "group": f"vigil:{KIND}",
        "createdAt": iso(now - timedelta(minutes=10)),
        "updatedAt": iso(now),
        "version": version,
    }
    if last_status == "STOPPED":
        detail["stopCode"] = stop_code or "EssentialContainerExited"
        detail["stoppedReason"] = stopped_reason or "Essential container in task exited"
        detail["stoppedAt"] = iso(stopped_at or now)
    return {
        "version": "0",
        "id": f"event-{version}",
        "detail-type": "ECS Task State Change",
        "source": "aws.ecs",
        "account": "123456789012",
        "time": iso(now),
        "region": REGION,
        "resources": [arn],
        "detail": detail,
    }


def running(fleet: MotoFleet) -> list[str]:
    return list(
        fleet.ecs_client.list_tasks(cluster=fleet.cluster_arn, desiredStatus="RUNNING")["taskArns"]
    )


def stream(new: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    change: dict[str, Any] = {"NewImage": to_wire(new)}
    if old is not None:
        change["OldImage"] = to_wire(old)
    return {
        "eventSource": "aws:dynamodb",
        "eventName": "MODIFY" if old else "INSERT",
        "dynamodb": change,
    }
