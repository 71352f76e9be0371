"""The key pattern of a kind's task role against the keys the runtime really makes, and a kind's
grants on the registry evaluated against every other kind's keys.

A pooled kind's task role reaches the hosts table only for keys matching ``host_id_pattern(kind)``
(``dynamodb:LeadingKeys``; the synthesized grants are checked in ``test_pooled_kinds``). No IAM
policy simulator runs here, so the pattern is matched with IAM's ``StringLike`` rules against host
ids the reconciler makes, for kinds whose names are prefixes of each other. Cost: milliseconds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from tests.helpers.observers import REGISTRY_PATH
from vigil.contract.hosts import LIVE_INDEX_MARKER, REBALANCE_PREFIX, host_id_pattern
from vigil.contract.observers import (
    FLEET_COUNTER_KEY,
    MIGRATION_KEY,
    NAMES_PARTITION,
    RESYNC_LEASE,
)
from vigil.observers.ecs_tasks import MAX_CLIENT_TOKEN, MAX_STARTED_BY, shortened, started_by
from vigil.observers.reconciler.placer import random_host_id
from vigil_tools.emulator.template import Synthesized


def string_like(pattern: str, value: str) -> bool:
    """IAM's StringLike: case-sensitive, ``*`` any run of characters, ``?`` one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


@pytest.mark.parametrize("kind", ["tick", "ticker", "tick-a", "t" * 63])
def test_a_kind_s_pattern_matches_its_own_host_ids_and_no_other_key(kind: str) -> None:
    others = {"tick", "ticker", "tick-a", "t" * 63, "t"} - {kind}
    pattern = host_id_pattern(kind)
    for _ in range(20):
        assert string_like(pattern, random_host_id(kind)), pattern
        for other in others:
            assert not string_like(pattern, random_host_id(other)), (pattern, other)
    markers = [LIVE_INDEX_MARKER, *(REBALANCE_PREFIX + k for k in (kind, *others))]
    assert not any(string_like(pattern, marker) for marker in markers)


def test_the_matcher_follows_iam_string_like() -> None:
    assert string_like("tick_*", "tick_") and string_like("a?c", "abc")
    assert not string_like("tick_*", "Tick_1") and not string_like("tick_*", "xtick_1")


def test_a_long_kind_s_hosts_keep_distinct_client_tokens_within_ecs_limits() -> None:
    """The whole kind is in the id now (63 + 13 characters): ECS's limits are met by a hash."""
    first, second = (random_host_id("k" * 63) for _ in range(2))
    tokens = {shortened(first, MAX_CLIENT_TOKEN), shortened(second, MAX_CLIENT_TOKEN)}
    assert len(tokens) == 2 and all(len(t) <= MAX_CLIENT_TOKEN for t in tokens)
    assert len(started_by(first)) <= MAX_STARTED_BY


# A kind's role on the registry, evaluated ----------------------------------------------------------

CONTAINER_ACTIONS = ("GetItem", "UpdateItem")
OTHER_ACTIONS = (
    "Query",
    "Scan",
    "BatchGetItem",
    "PutItem",
    "DeleteItem",
    "BatchWriteItem",
    "ConditionCheckItem",
    "PartiQLSelect",
    "PartiQLUpdate",
)
HEARTBEAT = {
    "kind",
    "name",
    "heartbeat_at",
    "heartbeat_at_ms",
    "updated_at",
    "version",
    "generation",
}
"""What a spoofed heartbeat (or a stolen generation) names: all of it a container may write."""


@dataclass(frozen=True)
class Request:
    """One DynamoDB request as IAM sees it: the action, the table's logical id, and the two
    condition keys Vigil's grants read (None: the request carries no such key, as a Scan
    carries no leading key)."""

    action: str
    table: str
    leading_keys: tuple[str, ...] | None
    attributes: frozenset[str] | None = None


def task_role_policies(synth: Synthesized) -> dict[str, list[dict[str, Any]]]:
    """Kind -> every statement of its task role's policies, from the synthesized template."""
    resources = synth.template["Resources"]
    roles: dict[str, str] = {}
    for definition in synth.resources("AWS::ECS::TaskDefinition").values():
        props = definition["Properties"]
        (container,) = props["ContainerDefinitions"]
        env = {e["Name"]: e["Value"] for e in container["Environment"]}
        (kind,) = json.loads(env["VIGIL_OBSERVER_KINDS"])
        roles[props["TaskRoleArn"]["Fn::GetAtt"][0]] = kind
    statements: dict[str, list[dict[str, Any]]] = {kind: [] for kind in roles.values()}
    for policy in resources.values():
        if policy["Type"] != "AWS::IAM::Policy":
            continue
        for role in policy["Properties"]["Roles"]:
            if role.get("Ref") in roles:
                statements[roles[role["Ref"]]] += policy["Properties"]["PolicyDocument"][
                    "Statement"
                ]
    return statements


def registry_of(synth: Synthesized) -> str:
    (logical_id,) = [
        logical_id
        for logical_id, table in synth.resources("AWS::DynamoDB::Table").items()
        if table["Metadata"]["aws:cdk:path"].startswith(REGISTRY_PATH)
    ]
    return logical_id


def _covers(resource: Any, table: str) -> bool:
    """Whether a statement's resource (the CDK's shapes: the table's Arn, or ``*``) is the table
    itself (an index's ARN is another resource)."""
    if resource == "*":
        return True
    return resource == {"Fn::GetAtt": [table, "Arn"]}


def _holds(operator: str, key: str, wanted: Any, request: Request) -> bool:
    values = {
        "dynamodb:LeadingKeys": request.leading_keys,
        "dynamodb:Attributes": request.attributes,
    }
    if key not in values:
        raise NotImplementedError(f"condition key {key}")
    actual = values[key]
    wanted = [wanted] if isinstance(wanted, str) else list(wanted)
    if operator == "Null":
        return (actual is None) == (wanted == ["true"])
    set_operator, _, test = operator.partition(":")
    if set_operator != "ForAllValues" or test not in ("StringLike", "StringEquals"):
        raise NotImplementedError(f"condition operator {operator}")
    match = string_like if test == "StringLike" else (lambda p, v: p == v)
    return all(any(match(p, value) for p in wanted) for value in actual or ())


def allowed(statements: list[dict[str, Any]], request: Request) -> bool:
    """IAM's answer for one identity policy: some Allow statement names the action and the
    resource and every condition of it holds (these policies have no Deny and no Not*)."""
    for statement in statements:
        assert statement["Effect"] == "Allow" and not {"NotAction", "NotResource"} & set(statement)
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        if not any(string_like(a, f"dynamodb:{request.action}") for a in actions):
            continue
        if not any(_covers(r, request.table) for r in resources):
            continue
        conditions = statement.get("Condition", {})
        if all(
            _holds(operator, key, wanted, request)
            for operator, keys in conditions.items()
            for key, wanted in keys.items()
        ):
            return True
    return False


def test_a_kind_s_role_reaches_its_own_observers_and_no_other_kind_s_item(
    synthesized: Synthesized,
) -> None:
    """The issue's finding, by policy: another kind's observers (or the registry's own items:
    names' claims, the fleet counter, the resync lease) can be neither read nor written by a
    kind's task role, whatever attributes the write names; a Scan or an index Query (no leading
    key) is refused too. No IAM simulator runs here: the statements are evaluated with IAM's
    rules for the operators they use (an unknown one fails the test). Cost: milliseconds."""
    roles = task_role_policies(synthesized)
    registry = registry_of(synthesized)
    assert len(roles) >= 2
    partitions = [*roles, NAMES_PARTITION, FLEET_COUNTER_KEY, RESYNC_LEASE, MIGRATION_KEY]
    for kind, statements in roles.items():
        mine = (kind,)
        assert allowed(statements, Request("GetItem", registry, mine))
        assert allowed(statements, Request("UpdateItem", registry, mine, frozenset(HEARTBEAT)))
        assert not allowed(statements, Request("UpdateItem", registry, mine, frozenset({"config"})))
        for other in (p for p in partitions if p != kind):
            theirs = (other,)
            for action in CONTAINER_ACTIONS + OTHER_ACTIONS:
                attributes = frozenset(HEARTBEAT) if action == "UpdateItem" else None
                request = Request(action, registry, theirs, attributes)
                assert not allowed(statements, request), (kind, request)
            both = Request("BatchGetItem", registry, (kind, other))
            assert not allowed(statements, both), (kind, both)
        for action in ("Scan", "Query", "GetItem"):
            assert not allowed(statements, Request(action, registry, None)), (kind, action)
