"""CDK assertions on the ObserverFleet construct, and its synth-time validation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from infra.errors import ConfigurationError
from infra.observer_fleet import ObserverFleet, ObserverKind
from vigil.contract.observers import FLEET_INDEX_PROJECTION

KINDS: dict[str, str | ObserverKind] = {
    "ticker": "observers.ticker.run",
    "big-ticker": ObserverKind("observers.ticker.run", cpu=1024, memory_mib=2048),
}


def build(**overrides: Any) -> tuple[Stack, ObserverFleet]:
    stack = Stack(App(), "Test", env=Environment(account="123456789012", region="us-east-1"))
    params: dict[str, Any] = {
        "kinds": KINDS,
        "heartbeat_interval": Duration.seconds(20),
        "max_observers": 50,
    }
    params.update(overrides)
    return stack, ObserverFleet(stack, "Observers", **params)


@pytest.fixture(scope="module")
def built() -> tuple[Template, ObserverFleet, Stack]:
    stack, fleet = build()
    return Template.from_stack(stack), fleet, stack


def statements(template: Template) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    policies = [
        *template.find_resources("AWS::IAM::Policy").values(),
        *template.find_resources("AWS::IAM::ManagedPolicy").values(),  # the kinds' grants
    ]
    for policy in policies:
        found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def with_action(template: Template, action: str) -> list[dict[str, Any]]:
    def has(statement: dict[str, Any]) -> bool:
        actions = statement["Action"]
        return action in (actions if isinstance(actions, list) else [actions])

    return [s for s in statements(template) if has(s)]


def test_every_api_method_requires_iam(built: tuple[Template, ObserverFleet, Stack]) -> None:
    template, _, _ = built
    methods = template.find_resources("AWS::ApiGateway::Method")
    assert len(methods) >= 2  # the root and {proxy+}
    assert {m["Properties"]["AuthorizationType"] for m in methods.values()} == {"AWS_IAM"}


def test_run_task_is_scoped_to_the_fleet_task_definitions(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, fleet, stack = built
    run = with_action(template, "ecs:RunTask")  # in the managed policy each kind hashes to
    resources = [r for statement in run for r in statement["Resource"]]
    rendered = json.dumps(stack.resolve(resources))
    for definition in fleet.task_definitions.values():
        assert f"task-definition/{definition.family}:*" in rendered
    assert "*" not in resources and len(resources) == 2
    assert all("ecs:cluster" in statement["Condition"]["ArnEquals"] for statement in run)
    (stop,) = with_action(template, "ecs:StopTask")
    assert "ecs:cluster" in stop["Condition"]["ArnEquals"]


def test_pass_role_is_scoped_to_the_task_roles_for_ecs_tasks(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, _, _ = built
    passing = with_action(template, "iam:PassRole")  # the execution role's, the kinds' own
    for statement in passing:
        assert statement["Condition"] == {
            "StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}
        }
    refs = json.dumps([statement["Resource"] for statement in passing])
    assert "TaskRole" in refs and "ExecutionRole" in refs and '"*"' not in refs


def test_each_kind_has_a_task_definition_with_container_memory(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, _, _ = built
    definitions = template.find_resources("AWS::ECS::TaskDefinition")
    assert len(definitions) == 2
    sizes = set()
    for definition in definitions.values():
        props = definition["Properties"]
        (container,) = props["ContainerDefinitions"]
        assert container["Memory"] == int(props["Memory"])
        assert container["LogConfiguration"]["LogDriver"] == "awslogs"
        assert container["StopTimeout"] == 30
        sizes.add((props["Cpu"], props["Memory"]))
        env = {e["Name"] for e in container["Environment"]}
        assert {"VIGIL_REGISTRY_TABLE", "VIGIL_OBSERVER_KINDS", "VIGIL_HEARTBEAT_SECONDS"} <= env
        assert {"POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"} <= env
    assert sizes == {("256", "512"), ("1024", "2048")}


def test_queues_are_encrypted(built: tuple[Template, ObserverFleet, Stack]) -> None:
    template, _, _ = built
    queues = template.find_resources("AWS::SQS::Queue")
    assert len(queues) == 4  # observers, events, stream, reconciler failures
    assert all(q["Properties"]["SqsManagedSseEnabled"] is True for q in queues.values())


def test_the_registry_table_and_its_index(built: tuple[Template, ObserverFleet, Stack]) -> None:
    template, _, _ = built
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            # Keyed by kind: a kind's task role is held to its partition (dynamodb:LeadingKeys)
            "KeySchema": [
                {"AttributeName": "kind", "KeyType": "HASH"},
                {"AttributeName": "name", "KeyType": "RANGE"},
            ],
            "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "GlobalSecondaryIndexes": [
                Match.object_like(
                    {
                        "IndexName": "fleet-index",
                        "Projection": {
                            "ProjectionType": "INCLUDE",
                            "NonKeyAttributes": list(FLEET_INDEX_PROJECTION),
                        },
                    }
                ),
                # Sparse, STOPPED records only, their status alone: heartbeats never write it
                Match.object_like(
                    {
                        "IndexName": "stopped-index",
                        "KeySchema": [
                            {"AttributeName": "stopped_fleet", "KeyType": "HASH"},
                            {"AttributeName": "name", "KeyType": "RANGE"},
                        ],
                        "Projection": {
                            "ProjectionType": "INCLUDE",
                            "NonKeyAttributes": ["status"],
                        },
                    }
                ),
            ],
        },
    )
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True}},
    )


def test_the_reconciler_is_triggered_three_ways(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, fleet, stack = built
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BisectBatchOnFunctionError": True,
            "MaximumRetryAttempts": 5,
            "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}},
            "FilterCriteria": {"Filters": Match.any_value()},
        },
    )
    rules = template.find_resources("AWS::Events::Rule")
    patterns = [r["Properties"].get("EventPattern") for r in rules.values()]
    (ecs_pattern,) = [p for p in patterns if p]
    assert ecs_pattern["detail-type"] == ["ECS Task State Change"]
    assert stack.resolve(fleet.cluster.cluster_arn) == ecs_pattern["detail"]["clusterArn"][0]
    schedules = [r["Properties"].get("ScheduleExpression") for r in rules.values()]
    assert "rate(1 minute)" in schedules
    for rule in rules.values():
        (target,) = rule["Properties"]["Targets"]
        assert "DeadLetterConfig" in target


def test_the_default_vpc_is_public_only_without_nat(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, fleet, _ = built
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    assert fleet.assign_public_ip is True
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "handlers.reconciler.handler",
            "Environment": {
                "Variables": Match.object_like(
                    {"VIGIL_ASSIGN_PUBLIC_IP": "true", "VIGIL_HEARTBEAT_SECONDS": "20"}
                )
            },
        },
    )


def test_an_existing_vpc_can_be_passed() -> None:
    stack = Stack(App(), "Existing")
    vpc = ec2.Vpc(stack, "Shared", max_azs=2)
    fleet = ObserverFleet(stack, "Observers", kinds={"ticker": "observers.ticker.run"}, vpc=vpc)
    assert fleet.vpc is vpc and fleet.assign_public_ip is False
    Template.from_stack(stack).resource_count_is("AWS::EC2::VPC", 1)


@pytest.mark.parametrize(
    ("overrides", "parameter"),
    [
        ({"kinds": {}}, "kinds"),
        ({"kinds": {"Bad_Name": "observers.ticker.run"}}, "kinds"),
        ({"kinds": {"ticker": "observers.nowhere.run"}}, "kinds['ticker'].handler"),
        ({"kinds": {"ticker": "observers.ticker.absent"}}, "kinds['ticker'].handler"),
        (
            {"kinds": {"ticker": ObserverKind("observers.ticker.run", cpu=256, memory_mib=4096)}},
            "kinds['ticker'].memory_mib",
        ),
        (
            {"kinds": {"ticker": ObserverKind("observers.ticker.run", cpu=300)}},
            "kinds['ticker'].cpu",
        ),
        ({"heartbeat_interval": Duration.seconds(4)}, "heartbeat_interval"),
        ({"max_observers": 0}, "max_observers"),
        ({"vpc_id": "not-a-vpc"}, "vpc_id"),
    ],
)
def test_bad_parameters_fail_at_synth_naming_the_parameter(
    overrides: dict[str, Any], parameter: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(**overrides)
    assert raised.value.parameter == parameter
    assert "ObserverFleet" in str(raised.value)


def test_an_existing_vpc_can_be_looked_up_by_id() -> None:
    # Without credentials the lookup answers with CDK's placeholder VPC and records the question
    # in the app's missing context; `cdk synth` with credentials fills cdk.context.json.
    stack, fleet = build(vpc_id="vpc-0123456789abcdef0", assign_public_ip=True)
    assert fleet.assign_public_ip is True
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::EC2::VPC", 0)
    template.resource_count_is("AWS::ECS::Cluster", 1)


def test_the_api_gets_only_the_registry_actions_it_calls(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, fleet, stack = built
    assert fleet.api_function.role is not None
    role = stack.get_logical_id(fleet.api_function.role.node.default_child)  # type: ignore[arg-type]
    table = stack.get_logical_id(fleet.table.node.default_child)  # type: ignore[arg-type]
    granted: dict[str, set[str]] = {}
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                rendered = json.dumps(resource)
                if table not in rendered:
                    continue
                key = "index" if "/index/" in rendered else "table"
                actions = statement["Action"]
                granted.setdefault(key, set()).update(
                    actions if isinstance(actions, list) else [actions]
                )

    # GetItem (get, the fleet counter), BatchGetItem (list pages), PutItem and UpdateItem (the
    # transactions of create, stop and restart), Query on the fleet and stopped indexes (list):
    # nothing else.
    assert granted == {
        "table": {
            "dynamodb:GetItem",
            "dynamodb:BatchGetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        },
        "index": {"dynamodb:Query"},
    }
