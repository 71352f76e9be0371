"""Finding a resource in a synthesized app whose jobs and tasks live in nested stacks (shards), and
reading what a role may do, inline policies included."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from vigil_tools.emulator.template import Synthesized


def find(synthesized: Synthesized, resource_type: str, part: str) -> dict[str, Any]:
    """The one resource of a type whose construct path holds ``part``, in the stack or any nested
    one: its entry, with ``id`` (its logical id, in its own template) and ``stack`` (that
    template)."""
    found = [
        {"id": logical_id, "stack": stack, **resource}
        for _, stack in synthesized.stacks()
        for logical_id, resource in stack.resources(resource_type).items()
        if part in resource.get("Metadata", {}).get("aws:cdk:path", "")
    ]
    assert len(found) == 1, f"{len(found)} {resource_type} under {part!r}"
    return found[0]


def everywhere(synthesized: Synthesized, resource_type: str) -> list[dict[str, Any]]:
    """Every resource of a type in the stack and its nested ones (each with ``id`` and ``stack``)."""
    return [
        {"id": logical_id, "stack": stack, **resource}
        for _, stack in synthesized.stacks()
        for logical_id, resource in stack.resources(resource_type).items()
    ]


def role_statements(stack: Synthesized, role: str) -> list[dict[str, Any]]:
    """Every statement a role of ``stack`` is allowed by: its inline policies and each
    ``AWS::IAM::Policy`` that names it."""
    inline = stack.template["Resources"][role]["Properties"].get("Policies", [])
    statements = [s for policy in inline for s in policy["PolicyDocument"]["Statement"]]
    statements += [
        statement
        for policy in stack.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    return statements


def function_role(found: dict[str, Any]) -> str:
    """The logical id of a found function's role (in the function's own template)."""
    return str(found["Properties"]["Role"]["Fn::GetAtt"][0])


def actions(statement: dict[str, Any]) -> list[str]:
    found = statement["Action"]
    return found if isinstance(found, list) else [found]


def from_parent(synthesized: Synthesized, stack: Synthesized, value: Any) -> Any:
    """What a nested stack's value is in its parent: a reference to one of its parameters is the
    value the parent passes (the CDK turns each reference across stacks into one)."""
    if not (isinstance(value, dict) and set(value) == {"Ref"}):
        return value
    for _, parent in synthesized.stacks():
        for logical_id, nested in parent.nested.items():
            if nested is stack:
                resource = parent.template["Resources"][logical_id]
                passed = resource["Properties"].get("Parameters", {})
                if value["Ref"] in passed:
                    return passed[value["Ref"]]
    return value


def catalog(synthesized: Synthesized, entity: str) -> dict[str, Any]:
    """A catalog as its parts hold it in the template (each value CloudFormation fills in left as
    ``"ref"``): ``{"entries": {...}, "shared": {...}}``."""
    return catalog_of(synthesized.resources("AWS::SSM::Parameter").values(), entity)


def catalog_of(parameters: Iterable[dict[str, Any]], entity: str) -> dict[str, Any]:
    """:func:`catalog` from a template's ``AWS::SSM::Parameter`` resources."""
    entries: dict[str, Any] = {}
    shared: dict[str, Any] = {}
    for resource in parameters:
        name = resource["Properties"]["Name"]
        if not name.startswith("/vigil/") or f"/{entity}/" not in name:
            continue
        value = resource["Properties"]["Value"]
        text = value if isinstance(value, str) else _joined(value)
        part = json.loads(text)
        if name.endswith("/stack"):
            shared.update(part)
        else:
            entries.update(part)
    return {"entries": entries, "shared": shared}


def _joined(value: Any) -> str:
    separator, parts = value["Fn::Join"]
    return str(separator).join(p if isinstance(p, str) else "ref" for p in parts)


class Stacks:
    """A construct test's stack and its shards (nested stacks) as templates: resources found in
    any of them, a nested stack's parameter read as what its parent passes."""

    def __init__(self, stack: Any) -> None:
        from aws_cdk.assertions import Template

        from infra.layout import Layout

        self.parent = Template.from_stack(stack).to_json()
        self.nested: dict[str, dict[str, Any]] = {}
        for shard in Layout.of(stack).shards.values():
            logical_id = stack.resolve(shard.nested_stack_resource.logical_id)  # type: ignore[union-attr]
            self.nested[logical_id] = Template.from_stack(shard).to_json()

    def templates(self) -> list[dict[str, Any]]:
        return [self.parent, *self.nested.values()]

    def find_resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for template in self.templates()
            for logical_id, resource in template.get("Resources", {}).items()
            if resource["Type"] == resource_type
        }

    def in_parent(self, value: Any) -> Any:
        """``value`` with each reference to a nested stack's parameter replaced by what the
        parent passes it."""
        if isinstance(value, list):
            return [self.in_parent(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            for logical_id, template in self.nested.items():
                if value["Ref"] in template.get("Parameters", {}):
                    passed = self.parent["Resources"][logical_id]["Properties"]["Parameters"]
                    return passed[value["Ref"]]
        return {k: self.in_parent(v) for k, v in value.items()}

    def role_statements(self, role_prefix: str) -> list[dict[str, Any]]:
        """Every statement of the roles (and their policies) whose logical id starts so."""
        found: list[dict[str, Any]] = []
        for template in self.templates():
            for logical, resource in template.get("Resources", {}).items():
                if not logical.startswith(role_prefix):
                    continue
                props = resource["Properties"]
                if resource["Type"] == "AWS::IAM::Policy":
                    found += props["PolicyDocument"]["Statement"]
                elif resource["Type"] == "AWS::IAM::Role":
                    found += [
                        s
                        for p in props.get("Policies", [])
                        for s in p["PolicyDocument"]["Statement"]
                    ]
        return [self.in_parent(s) for s in found]
