"""ObserverKind's rollout and capacity options: validated at synth, handed to the reconciler."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Template

from infra.errors import ConfigurationError
from infra.observer_fleet import ObserverFleet, ObserverKind
from tests.helpers.templates import catalog_of
from tests.infra.test_observer_fleet import build
from vigil.contract.hosts import Capacity
from vigil.contract.layout import CATALOG_DIGEST_ENV, Catalogued, KindField
from vigil.observers.kind_options import KindOptions, parse_kind_options

TICKER = "observers.ticker.run"


@pytest.mark.parametrize(
    ("spec", "parameter"),
    [
        (ObserverKind(TICKER, max_unavailable=0), "max_unavailable"),
        (ObserverKind(TICKER, max_unavailable=101), "max_unavailable"),
        (ObserverKind(TICKER, max_unavailable=-5), "max_unavailable"),
        (ObserverKind(TICKER, max_unavailable=12.5), "max_unavailable"),  # type: ignore[arg-type]
        (ObserverKind(TICKER, max_unavailable=True), "max_unavailable"),
        (ObserverKind(TICKER, capacity="spot-only"), "capacity"),
        (ObserverKind(TICKER, capacity="SPOT"), "capacity"),
    ],
)
def test_bad_rollout_or_capacity_fails_synth_naming_the_kind_and_parameter(
    spec: ObserverKind, parameter: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build(kinds={"ticker": spec})
    assert raised.value.parameter == f"kinds['ticker'].{parameter}"
    assert "ObserverFleet" in str(raised.value) and "ticker" in str(raised.value)


@pytest.fixture(scope="module")
def mixed() -> tuple[Stack, ObserverFleet, Template]:
    """A fleet of an on-demand kind and a spot kind with its own rollout, synthesized once for the
    tests that read it (each synth of a fleet costs about a CPU second)."""
    stack, fleet = build(
        kinds={
            "ticker": TICKER,
            "cheap": ObserverKind(TICKER, max_unavailable=25, capacity="spot"),
        }
    )
    return stack, fleet, Template.from_stack(stack)


def function_env(stack: Stack, template: Template, function: Any, name: str) -> Any:
    logical = stack.get_logical_id(function.node.default_child)
    variables = template.to_json()["Resources"][logical]["Properties"]["Environment"]["Variables"]
    return stack.resolve(variables[name])


def test_the_reconciler_and_the_api_get_each_kinds_options(
    mixed: tuple[Stack, ObserverFleet, Template],
) -> None:
    stack, fleet, template = mixed
    # As both read them: from the kinds catalog (``vigil.observers.kinds_catalog.with_kinds``).
    parameters = template.find_resources("AWS::SSM::Parameter").values()
    entries = catalog_of(parameters, Catalogued.KINDS)["entries"]
    text = json.dumps({kind: entry[KindField.OPTIONS] for kind, entry in entries.items()})
    parsed = parse_kind_options(text)
    assert parsed == {
        "ticker": KindOptions(),
        "cheap": KindOptions(max_unavailable=25, capacity=Capacity.SPOT),
    }
    for function in (fleet.reconciler, fleet.api_function):
        assert function_env(stack, template, function, CATALOG_DIGEST_ENV) is not None


def test_a_spot_kind_enables_the_fargate_capacity_providers(
    mixed: tuple[Stack, ObserverFleet, Template],
) -> None:
    associations = mixed[2].find_resources("AWS::ECS::ClusterCapacityProviderAssociations")
    (association,) = associations.values()
    assert set(association["Properties"]["CapacityProviders"]) == {"FARGATE", "FARGATE_SPOT"}


def test_an_on_demand_fleet_keeps_its_cluster_as_it_was() -> None:
    stack, _ = build(kinds={"ticker": TICKER})
    Template.from_stack(stack).resource_count_is("AWS::ECS::ClusterCapacityProviderAssociations", 0)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("not json", "not JSON"),
        ("[]", "JSON object"),
        ('{"k": 3}', "k: must be a JSON object"),
        ('{"k": {"max_unavailable": 0}}', "k.max_unavailable"),
        ('{"k": {"max_unavailable": "10"}}', "k.max_unavailable"),
        ('{"k": {"capacity": "cheap"}}', "k.capacity"),
    ],
)
def test_the_reconciler_refuses_bad_options_naming_them(raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_kind_options(raw)


def test_placement_keys_of_other_readers_are_left_alone() -> None:
    raw = '{"k": {"placement": "pooled", "slots_per_host": 50, "capacity": "spot"}}'
    assert parse_kind_options(raw)["k"].capacity.value == "spot"


def test_the_api_may_only_read_hosts_and_put_rebalance_requests_on_the_hosts_table() -> None:
    pooled = ObserverKind(TICKER, placement="pooled", slots_per_host=2, observer_memory_mib=64)
    stack, fleet = build(kinds={"k": pooled, "ticker": TICKER})
    template = Template.from_stack(stack)
    role = stack.get_logical_id(fleet.api_function.role.node.default_child)  # type: ignore[union-attr,arg-type]
    hosts = stack.get_logical_id(fleet.hosts_table.node.default_child)  # type: ignore[arg-type]
    granted: set[str] = set()
    for policy in template.find_resources("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if hosts in json.dumps(statement["Resource"]):
                actions = statement["Action"]
                granted.update(actions if isinstance(actions, list) else [actions])
                if "dynamodb:PutItem" in actions:
                    keys = statement["Condition"]["ForAllValues:StringEquals"]
                    assert keys == {"dynamodb:LeadingKeys": ["#rebalance#k"]}
    assert granted == {"dynamodb:GetItem", "dynamodb:Scan", "dynamodb:PutItem"}
