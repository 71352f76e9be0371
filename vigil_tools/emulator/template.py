"""Synthesize the app and read what the emulator needs from the template."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vigil_tools.project import Project, find_project

STACK_NAME = "Vigil"


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    template: dict[str, Any]
    assets: dict[str, Any]

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == resource_type
        }


def synthesize(
    outdir: str | Path | None = None, stack: str = STACK_NAME, project: Project | None = None
) -> Synthesized:
    """Synthesize the project's app.py in-process (jsii needs Node, not the CDK CLI, and no AWS
    credentials). Without ``project``, the one :func:`find_project` finds."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    (project or find_project()).importable()
    from app import build_app

    target = Path(outdir or tempfile.mkdtemp(prefix="vigil-cdk-"))
    build_app(outdir=str(target)).synth()
    return load(target, stack)


@functools.cache
def synthesized_app() -> Synthesized:
    """The app synthesized once per process, for tests and benchmarks that need its tables."""
    return synthesize()


def create_table(synth: Synthesized, client: Any, path_prefix: str, name: str) -> str:
    """Create one of the template's tables (found by construct path) under another name."""
    logical_id = logical_id_of(synth, "AWS::DynamoDB::Table", path_prefix)
    client.create_table(**{**table_definitions(synth)[logical_id], "TableName": name})
    ttl = synth.template["Resources"][logical_id]["Properties"].get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
        )
    return name


def load(outdir: Path, stack: str = STACK_NAME) -> Synthesized:
    template = json.loads((outdir / f"{stack}.template.json").read_text())
    assets = json.loads((outdir / f"{stack}.assets.json").read_text())
    return Synthesized(outdir=outdir, template=template, assets=assets)


def table_definitions(synth: Synthesized) -> dict[str, dict[str, Any]]:
    """``create_table`` arguments for each AWS::DynamoDB::Table, keyed by logical id.

    For tests that need the tables but not the whole stack: the same key schema, indexes, billing
    and stream as the template, with the logical id as the table name.
    """
    definitions: dict[str, dict[str, Any]] = {}
    for logical_id, resource in synth.resources("AWS::DynamoDB::Table").items():
        props = resource["Properties"]
        args: dict[str, Any] = {
            "TableName": logical_id,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        if "GlobalSecondaryIndexes" in props:
            args["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
        if "StreamSpecification" in props:
            args["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
        definitions[logical_id] = args
    return definitions


def create_tables(synth: Synthesized, client: Any) -> dict[str, str]:
    """Create the template's tables on an emulator; returns logical id -> table name."""
    return {
        logical_id: create_table(synth, client, _path(synth, logical_id), logical_id)
        for logical_id in table_definitions(synth)
    }


def _path(synth: Synthesized, logical_id: str) -> str:
    return str(synth.template["Resources"][logical_id]["Metadata"]["aws:cdk:path"])


def logical_id_of(synth: Synthesized, resource_type: str, path_prefix: str) -> str:
    """The logical id of the one resource of a type whose construct path starts with a prefix."""
    matches = [
        logical_id
        for logical_id, resource in synth.resources(resource_type).items()
        if resource.get("Metadata", {}).get("aws:cdk:path", "").startswith(path_prefix)
    ]
    if len(matches) != 1:
        raise LookupError(f"{len(matches)} {resource_type} under {path_prefix!r}: {matches}")
    return matches[0]
