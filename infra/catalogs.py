"""``Catalogs``: the stack's catalogs of jobs and tasks, as SSM parameters (``vigil.catalog``).

Each entry's values CloudFormation fills in (a queue's URL, a role's ARN) come from the entity's
shard; the parts are packed here, in name order, at the longest those values can be
(:mod:`infra.quotas`), so every part fits a standard parameter at any size of the app. The digest
of what the entries declare (everything but those values) goes into the environment of the
functions that read a catalog, so a change of declarations replaces their warm containers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.quotas import CATALOG_PART
from vigil.contract.layout import CATALOG_SHARED_PART as SHARED_PART
from vigil.contract.layout import Catalogued, catalog_path


@dataclass(frozen=True)
class Filled:
    """A value CloudFormation fills in at deploy (a token), and the longest it can be."""

    token: str
    longest: int


Entry = Mapping[str, Any]
"""A catalog entry: plain values and :class:`Filled` ones."""


def rendered(entry: Entry) -> dict[str, Any]:
    return {k: _fill(v, lambda f: f.token) for k, v in entry.items()}


def longest(name: str, entry: Entry) -> int:
    """The entry's length in its part, ``"name":{...}``, at its values' longest."""
    shadow = {k: _fill(v, lambda f: "x" * f.longest) for k, v in entry.items()}
    return len(json.dumps({name: shadow}, separators=(",", ":"))) - 2


def declared(entries: Mapping[str, Entry]) -> dict[str, Any]:
    """What the entries declare: their plain values (a filled one is the resource's, not ours,
    and so is an object holding one, such as a task's priority levels' queue URLs)."""
    return {
        name: {k: v for k, v in entry.items() if not _holds_filled(v)}
        for name, entry in sorted(entries.items())
    }


def _fill(value: Any, filled: Callable[[Filled], Any]) -> Any:
    """``value`` with each :class:`Filled` in it (at any depth of objects) replaced."""
    if isinstance(value, Filled):
        return filled(value)
    if isinstance(value, Mapping):
        return {k: _fill(v, filled) for k, v in value.items()}
    return value


def _holds_filled(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(_holds_filled(v) for v in value.values())
    return isinstance(value, Filled)


def pack(entries: Mapping[str, Entry], limit: int = CATALOG_PART.limit) -> list[list[str]]:
    """The names of each part, in name order, each part's entries at their longest within
    ``limit`` characters (``{`` and ``}`` and a comma between entries)."""
    parts: list[list[str]] = []
    size = 2
    for name in sorted(entries):
        length = longest(name, entries[name])
        if length + 2 > limit:
            raise ValueError(f"catalog entry {name!r} alone is {length} characters, over {limit}")
        if parts and size + 1 + length <= limit:
            parts[-1].append(name)
            size += 1 + length
        else:
            parts.append([name])
            size = 2 + length
    return parts


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


class Catalog(Construct):
    """One catalog (the jobs' or the tasks') as parameters ``<path>/0``, ``<path>/1``, ..., and
    ``<path>/stack`` for what its entries share."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        catalogued: Catalogued,
        entries: Mapping[str, Entry],
        shared: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.path = catalog_path(stack.stack_name, catalogued)
        self.digest = digest({"entries": declared(entries), "shared": dict(shared or {})})
        self.parameters: list[ssm.StringParameter] = []
        for index, names in enumerate(pack(entries)):
            value = {name: rendered(entries[name]) for name in names}
            self.parameters.append(self._part(str(index), value))
        if shared:
            self.parameters.append(self._part(SHARED_PART, dict(shared)))

    def _part(self, name: str, value: Mapping[str, Any]) -> ssm.StringParameter:
        return ssm.StringParameter(
            self,
            f"Part{name.capitalize()}",
            parameter_name=f"{self.path}/{name}",
            string_value=Stack.of(self).to_json_string(value),
            tier=ssm.ParameterTier.STANDARD,
            description="Vigil catalog part (read by vigil.catalog)",
        )

    def grant_read(self, grantee: iam.IGrantable) -> None:
        """Listing the path and reading its parts: what ``vigil.catalog.read_catalog`` does."""
        grant_read_catalog(grantee, Stack.of(self), self.path)


def grant_read_catalog(grantee: iam.IGrantable, stack: Stack, path: str) -> None:
    """Read a catalog by its path: give it to an application's role (a web app of another stack
    finds the path from the stack's name: ``vigil.contract.layout.catalog_path``)."""
    parameter = stack.format_arn(service="ssm", resource="parameter", resource_name=path[1:])
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["ssm:GetParametersByPath"],
            resources=[parameter],
        )
    )
    grantee.grant_principal.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["ssm:GetParameter", "ssm:GetParameters"], resources=[f"{parameter}/*"]
        )
    )
