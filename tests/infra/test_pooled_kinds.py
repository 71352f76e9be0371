"""Pooled kinds at synth: their parameters reach the functions and containers; bad ones fail."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk.assertions import Match, Template

from infra.errors import ConfigurationError
from infra.observer_fleet import HOST_BASE_MEMORY_MIB, ObserverFleet, ObserverKind
from tests.helpers.monitoring import stack_dashboard
from tests.helpers.templates import catalog_of
from vigil.contract.hosts import (
    HOST_EXPIRES,
    HOST_SLOTS_ENV,
    HOSTS_KEY,
    PLACEMENTS_ENV,
    WAITING_INDEX,
    host_id_pattern,
)
from vigil.contract.layout import CATALOG_DIGEST_ENV, Catalogued, KindField
from vigil.contract.observers import (
    CONDITION_ONLY,
    CONTAINER_UPDATE_ATTRIBUTES,
    RECONCILER_OWNED,
    REGISTRY_PARTITION,
    REGISTRY_SORT,
)

POOLED = ObserverKind(
    "observers.ticker.run",
    cpu=512,
    memory_mib=1024,
    placement="pooled",
    slots_per_host=10,
    observer_memory_mib=64,
    headroom=3,
)


def build(kinds: dict[str, str | ObserverKind]) -> tuple[Stack, ObserverFleet]:
    stack = Stack(App(), "Test", env=Environment(account="123456789012", region="us-east-1"))
    fleet = ObserverFleet(
        stack, "Observers", kinds=kinds, heartbeat_interval=Duration.seconds(20), max_observers=5
    )
    return stack, fleet


@pytest.fixture(scope="module")
def built() -> tuple[Template, ObserverFleet, Stack]:
    stack, fleet = build({"ticker": "observers.ticker.run", "pooled-ticker": POOLED})
    return Template.from_stack(stack), fleet, stack


def test_placements_reach_the_reconciler_and_the_api_and_slots_the_host_containers(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, fleet, _ = built
    rollout = {"max_unavailable": 10, "capacity": "on-demand"}
    expected = {
        "ticker": {"placement": "dedicated", **rollout},
        "pooled-ticker": {"placement": "pooled", "slots_per_host": 10, "headroom": 3, **rollout},
    }
    assert json.loads(fleet.placements_json) == expected
    # Each kind's options are in the kinds catalog (not the functions' environment, which grew
    # past Lambda's 4 KB near twenty kinds), and both the reconciler and the API read it.
    parameters = template.find_resources("AWS::SSM::Parameter").values()
    entries = catalog_of(parameters, Catalogued.KINDS)["entries"]
    assert {kind: e[KindField.OPTIONS] for kind, e in entries.items()} == expected
    functions = template.find_resources("AWS::Lambda::Function")
    reading = [
        f
        for f in functions.values()
        if f["Properties"].get("Environment", {}).get("Variables", {}).get(CATALOG_DIGEST_ENV)
    ]
    assert len(reading) == 2  # the reconciler and the API
    assert all(
        PLACEMENTS_ENV not in f["Properties"].get("Environment", {}).get("Variables", {})
        for f in functions.values()
    )
    definitions = template.find_resources("AWS::ECS::TaskDefinition")
    envs = {
        d["Properties"].get("Family", key): {
            e["Name"]: e["Value"] for e in d["Properties"]["ContainerDefinitions"][0]["Environment"]
        }
        for key, d in definitions.items()
    }
    slots = [env.get(HOST_SLOTS_ENV) for env in envs.values()]
    assert sorted(s for s in slots if s) == ["10"] and slots.count(None) == 1
    # Not the options themselves: a new rollout budget must not make a new task revision.
    assert all(PLACEMENTS_ENV not in env for env in envs.values())


def test_a_pooled_fleet_has_the_sparse_waiting_index_and_wakes_on_host_exits(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, _, _ = built
    template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [Match.object_like({"IndexName": WAITING_INDEX})]
            )
        },
    )
    (mapping,) = template.find_resources("AWS::Lambda::EventSourceMapping").values()
    patterns = [f["Pattern"] for f in mapping["Properties"]["FilterCriteria"]["Filters"]]
    assert any("host_exit" in p for p in patterns)


def test_the_api_reads_the_hosts_table(built: tuple[Template, ObserverFleet, Stack]) -> None:
    template, _, stack = built
    policies = template.find_resources("AWS::IAM::Policy")
    rendered = json.dumps(policies)
    assert "dynamodb:Scan" in rendered
    scans = [
        s
        for p in policies.values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == ["dynamodb:GetItem", "dynamodb:Scan"]  # reads; PutItem: markers only
    ]
    assert len(scans) == 1 and "Hosts" in json.dumps(stack.resolve(scans[0]["Resource"]))


def task_role_statements(
    template: Template, fleet: ObserverFleet, stack: Stack
) -> dict[str, list[dict[str, Any]]]:
    """Each kind -> the statements of the policies attached to its task role."""
    by_role = {
        stack.resolve(role.role_name)["Ref"]: kind for kind, role in fleet.task_roles.items()
    }
    found: dict[str, list[dict[str, Any]]] = {kind: [] for kind in fleet.task_roles}
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for role in policy["Properties"]["Roles"]:
            if role["Ref"] in by_role:
                found[by_role[role["Ref"]]] += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def test_each_kind_runs_under_its_own_task_role_knowing_only_its_own_kind(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, fleet, stack = built
    roles = {
        kind: stack.resolve(d.task_role.role_arn) for kind, d in fleet.task_definitions.items()
    }
    assert len({json.dumps(arn) for arn in roles.values()}) == len(roles) == 2
    for kind, definition in fleet.task_definitions.items():
        logical_id = stack.get_logical_id(definition.node.default_child)  # type: ignore[arg-type]
        (container,) = template.to_json()["Resources"][logical_id]["Properties"][
            "ContainerDefinitions"
        ]
        env = {e["Name"]: e["Value"] for e in container["Environment"]}
        # A container (a host's child too) refuses a record of another kind (BAD_CONFIGURATION).
        assert json.loads(env["VIGIL_OBSERVER_KINDS"]) == {kind: "observers.ticker.run"}
    # The reconciler may pass each of them, and the execution role, to ECS: nothing else.
    # (The kinds' own in managed policies a stable hash of the kind picks: they outgrew the
    # role's inline policies near twenty kinds.)
    policies = [
        *template.find_resources("AWS::IAM::Policy").values(),
        *template.find_resources("AWS::IAM::ManagedPolicy").values(),
    ]
    passed = [
        resource
        for p in policies
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "iam:PassRole"
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    ]
    own = [stack.resolve(r) for r in (fleet.execution_role.role_arn, *roles.values())]
    assert sorted(map(json.dumps, passed)) == sorted(map(json.dumps, own))


def test_a_kind_s_task_role_reaches_only_its_own_hosts(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, fleet, stack = built
    hosts = stack.resolve(fleet.hosts_table.table_arn)["Fn::GetAtt"][0]
    registry = stack.resolve(fleet.table.table_arn)["Fn::GetAtt"][0]
    statements = task_role_statements(template, fleet, stack)
    assert set(statements) == {"ticker", "pooled-ticker"}
    for kind, own in statements.items():
        on_hosts = [s for s in own if hosts in json.dumps(s["Resource"])]
        if kind == "ticker":  # dedicated: its containers never touch the hosts table
            assert on_hosts == []
        else:
            (grant,) = on_hosts
            assert grant["Action"] == ["dynamodb:GetItem", "dynamodb:UpdateItem"]
            assert grant["Condition"] == {
                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [host_id_pattern(kind)]},
                "Null": {"dynamodb:LeadingKeys": "false"},
            }
        # The registry's grants reach the kind's own partition only (reads and writes), and its
        # writes only the attributes a container writes or compares
        # (tests/observers/test_registry_access.py); tests/infra/test_kind_roles.py evaluates
        # them against every other kind's keys.
        on_registry = {s["Action"]: s for s in own if registry in json.dumps(s["Resource"])}
        assert set(on_registry) == {"dynamodb:GetItem", "dynamodb:UpdateItem"}, kind
        own_partition = {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [kind]},
            "Null": {"dynamodb:LeadingKeys": "false"},
        }
        assert on_registry["dynamodb:GetItem"]["Condition"] == own_partition
        write = on_registry["dynamodb:UpdateItem"]["Condition"]
        assert write["ForAllValues:StringLike"] == own_partition["ForAllValues:StringLike"]
        allowed = write["ForAllValues:StringEquals"]["dynamodb:Attributes"]
        assert allowed == list(CONTAINER_UPDATE_ATTRIBUTES)
        assert {REGISTRY_PARTITION, REGISTRY_SORT} <= set(allowed)
        assert write["Null"] == {"dynamodb:Attributes": "false", "dynamodb:LeadingKeys": "false"}
        assert not set(allowed) & {"config", "task_arn", "restart_generation"}
        keys = {REGISTRY_PARTITION, REGISTRY_SORT}
        assert not set(allowed) - keys & (set(RECONCILER_OWNED) - set(CONDITION_ONLY))


def test_the_default_headroom_is_half_a_host() -> None:
    kind = ObserverKind(
        "observers.ticker.run",
        cpu=512,
        memory_mib=1024,
        placement="pooled",
        slots_per_host=10,
        observer_memory_mib=64,
    )
    assert kind.options_json()["headroom"] == 5


def pooled(**changes: Any) -> ObserverKind:
    values: dict[str, Any] = {
        "handler": "observers.ticker.run",
        "cpu": 512,
        "memory_mib": 1024,
        "placement": "pooled",
        "slots_per_host": 10,
        "observer_memory_mib": 64,
    }
    values.update(changes)
    return ObserverKind(**values)


@pytest.mark.parametrize(
    ("kind", "parameter"),
    [
        (pooled(slots_per_host=0), "slots_per_host"),
        (pooled(slots_per_host=None), "slots_per_host"),
        (pooled(observer_memory_mib=None), "observer_memory_mib"),
        (pooled(observer_memory_mib=0), "observer_memory_mib"),
        (pooled(slots_per_host=13), "slots_per_host"),  # 13 x 64 + 256 > 1024
        (pooled(headroom=-1), "headroom"),
        (pooled(placement="shared"), "placement"),
        (ObserverKind("observers.ticker.run", slots_per_host=4), "slots_per_host"),
        (ObserverKind("observers.ticker.run", observer_memory_mib=64), "observer_memory_mib"),
        (ObserverKind("observers.ticker.run", headroom=2), "headroom"),
    ],
)
def test_bad_placement_parameters_fail_synth_naming_kind_and_parameter(
    kind: ObserverKind, parameter: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build({"pk": kind})
    assert raised.value.parameter == f"kinds['pk'].{parameter}"
    assert "'pk'" in str(raised.value) and parameter in str(raised.value)


def test_the_memory_rule_counts_the_host_base() -> None:
    fits = (1024 - HOST_BASE_MEMORY_MIB) // 64
    build({"pk": pooled(slots_per_host=fits)})  # exactly fits: no error
    with pytest.raises(ConfigurationError, match="does not fit memory_mib=1024"):
        build({"pk": pooled(slots_per_host=fits + 1)})


def test_the_reconciler_may_query_the_waiting_index(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, _, stack = built
    queries = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "dynamodb:Query" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    assert any(WAITING_INDEX in json.dumps(stack.resolve(s["Resource"])) for s in queries)


def test_each_pooled_kind_alarms_on_lost_and_stuck_hosts_telling_what_to_type(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, _, _ = built
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    by_metric = {
        props["Properties"].get("MetricName"): props["Properties"]
        for props in alarms.values()
        if {"Name": "kind", "Value": "pooled-ticker"} in props["Properties"].get("Dimensions", [])
    }
    lost, stuck = by_metric["HostLost"], by_metric["HostsStuckStarting"]
    for alarm in (lost, stuck):
        assert alarm["Namespace"] == "Vigil"
        assert {"Name": "service", "Value": "vigil"} in alarm["Dimensions"]
        assert "vigil hosts list --kind pooled-ticker" in alarm["AlarmDescription"]
    assert lost["Statistic"] == "Sum" and lost["TreatMissingData"] == "notBreaching"
    assert stuck["Statistic"] == "Maximum" and stuck["TreatMissingData"] == "ignore"
    # A dedicated kind has no hosts, so no host alarm (its only alarm: ObserverUncertain)
    assert [
        a["Properties"]["MetricName"]
        for a in alarms.values()
        if {"Name": "kind", "Value": "ticker"} in a["Properties"].get("Dimensions", [])
    ] == ["ObserverUncertain"]


def test_the_dashboard_shows_lost_and_stuck_hosts_per_pooled_kind(synthesized: Any) -> None:
    dashboard = stack_dashboard(synthesized)
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "HostLost" in body and "HostsStuckStarting" in body


def test_dead_hosts_expire_through_the_hosts_table_ttl(
    built: tuple[Template, ObserverFleet, Stack],
) -> None:
    template, _, _ = built
    (hosts,) = [
        t
        for t in template.find_resources("AWS::DynamoDB::Table").values()
        if t["Properties"]["KeySchema"] == [{"AttributeName": HOSTS_KEY, "KeyType": "HASH"}]
    ]
    ttl = hosts["Properties"]["TimeToLiveSpecification"]
    assert ttl == {"AttributeName": HOST_EXPIRES, "Enabled": True}
    assert HOST_EXPIRES == "expiration"  # the name the other tables' TTL uses
