"""Synthesize the app and read what the emulator needs from the template."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from vigil.contract.stages import stack_name
from vigil_tools.node import use_installed_node
from vigil_tools.project import Project, find_project

STACK_NAME = "Vigil"


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    template: dict[str, Any]
    assets: dict[str, Any]
    nested: dict[str, Synthesized] = field(default_factory=dict)
    """Each nested stack (a shard of jobs or tasks) by its logical id in this template."""
    file: str = ""
    """The template's file in the cloud assembly (a nested one's asset file)."""

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """This template's resources of a type (not its nested stacks': :meth:`stacks`)."""
        return {
            logical_id: resource
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == resource_type
        }

    def stacks(self) -> Iterator[tuple[tuple[str, ...], Synthesized]]:
        """This template and every nested one, each with the logical ids that lead to it."""
        yield (), self
        for logical_id, nested in self.nested.items():
            for path, inner in nested.stacks():
                yield (logical_id, *path), inner


Context = tuple[tuple[str, str], ...]
"""``-c KEY=VALUE`` options, in order (hashable: a synth is cached per context)."""


def synthesize(
    outdir: str | Path | None = None,
    stack: str = STACK_NAME,
    project: Project | None = None,
    stage: str | None = None,
    context: Context = (),
) -> Synthesized:
    """Synthesize the project's app.py in-process (jsii needs Node, not the CDK CLI, and no AWS
    credentials). Without ``project``, the one :func:`find_project` finds; with ``stage``, that
    named stage's app (``-c stage=NAME``) and its stack, ``stack`` then unused; ``context``: more
    ``-c`` options (``(("legacyRegistry", "true"),)``: the upgrade of a name-keyed registry)."""
    use_installed_node()
    (project or find_project()).importable()
    from app import build_app
    from infra.quotas import check_assembly

    target = Path(outdir or tempfile.mkdtemp(prefix="vigil-cdk-"))
    build_app(outdir=str(target), stage=stage, context=dict(context)).synth()
    name = stack if stage is None else stack_name(stage)
    check_assembly(target, name)  # what app.py checks: every deploy quota (infra.quotas)
    return load(target, name)


SHARED_SYNTH_ENV = "VIGIL_SYNTH_DIR"
"""A folder processes share their synth in (the suite's pytest-xdist workers): see
:func:`synthesized_app`."""
SYNTH_INPUTS = ("app.py", "cdk.json", "infra", "functions")
"""What the app's synth reads from the project (beside the CDK libraries and the environment)."""
SYNTH_ENVIRONMENT = ("CDK_CONTEXT_JSON", "CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION")
_COMPLETE = ".vigil-synth-complete"


def synthesized_app(stage: str | None = None, context: Context = ()) -> Synthesized:
    """The app synthesized once per process, for tests and benchmarks that need its template;
    with ``stage``, that named stage's app (the suite's ``staging`` fixture); with ``context``,
    the app under those ``-c`` options.

    With ``$VIGIL_SYNTH_DIR`` set, once for every process sharing that folder (the suite's xdist
    workers, each of which would otherwise pay ~15 CPU seconds for the same template, or ~5 for
    a second stage's): see :func:`shared_synth`.
    """
    return _synthesized_app(stage, context)  # one cache entry per stage and context


@functools.cache
def _synthesized_app(stage: str | None, context: Context) -> Synthesized:
    shared = os.environ.get(SHARED_SYNTH_ENV)
    if shared:
        return shared_synth(Path(shared), stage=stage, context=context)
    return synthesize(stage=stage, context=context)


def shared_synth(
    folder: Path,
    project: Project | None = None,
    stage: str | None = None,
    context: Context = (),
) -> Synthesized:
    """The project's app (of ``stage``) synthesized into ``folder``, once per state of its sources.

    The first process to get the folder's lock synthesizes, into a subfolder named for the stack
    and what the synth reads (:func:`synth_key`); the others wait on the lock, then load that cloud
    assembly. A subfolder without its completion mark (a process killed mid-synth) is synthesized
    again.
    """
    project = project or find_project()
    folder.mkdir(parents=True, exist_ok=True)
    stack = stack_name(stage)
    outdir = folder / f"{stack}-{synth_key(project, context)}"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (outdir / _COMPLETE).exists():
            shutil.rmtree(outdir, ignore_errors=True)
            synthesize(outdir, project=project, stage=stage, context=context)
            (outdir / _COMPLETE).touch()
    return load(outdir, stack)


def synth_key(project: Project, context: Context = ()) -> str:
    """A digest of what the synth reads: the project's app, constructs and Lambda asset, the CDK
    libraries' versions, the environment the app consults and the ``-c`` options given; another
    state, another key."""
    digest = hashlib.sha256()
    for key, value in context:
        digest.update(f"-c {key}={value}\n".encode())
    for package in ("aws-cdk-lib", "cdk-nag"):
        digest.update(f"{package}=={version(package)}\n".encode())
    for name in SYNTH_ENVIRONMENT:
        digest.update(f"{name}={os.environ.get(name)}\n".encode())
    for entry in SYNTH_INPUTS:
        top = project.root / entry
        files = sorted(top.rglob("*")) if top.is_dir() else [top]
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(f"{path.relative_to(project.root)}\n".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


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
    assets = json.loads((outdir / f"{stack}.assets.json").read_text())
    return _load_template(outdir, f"{stack}.template.json", assets)


def _load_template(outdir: Path, file: str, assets: dict[str, Any]) -> Synthesized:
    """A template and its nested stacks' (their asset files: ``infra.quotas``)."""
    from infra.quotas import nested_template_file

    template = json.loads((outdir / file).read_text())
    nested = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") == "AWS::CloudFormation::Stack":
            nested_file = nested_template_file(assets, resource)
            if nested_file:
                nested[logical_id] = _load_template(outdir, nested_file, assets)
    return Synthesized(outdir=outdir, template=template, assets=assets, nested=nested, file=file)


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
