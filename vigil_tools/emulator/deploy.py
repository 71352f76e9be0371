"""Deploy a synthesized stack onto the emulator the way ``cdk deploy`` would: bootstrap, publish
file assets, create the CloudFormation stack (or update it with a newer template), and report its
physical resources."""

from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from vigil_tools.emulator.template import STACK_NAME, Synthesized

BOOTSTRAP_QUALIFIER = "hnb659fds"
POWERTOOLS_PARAMETERS = re.compile(
    r"^/aws/service/powertools/python/(?P<arch>[\w-]+)/python(?P<major>\d+)\.(?P<minor>\d+)/(?P<version>[\w.]+)$"
)
POWERTOOLS_ACCOUNT = "017000801446"
LOCAL_PUBLIC_PREFIX = "/vigil-emulator/public"
"""Where the emulator keeps its copies of AWS's public parameters (moto refuses names under /aws)."""


@dataclass(frozen=True)
class Deployed:
    stack_name: str
    physical: dict[str, str]
    """Logical id -> physical id, as CloudFormation reports them."""
    nested: dict[str, Deployed] = field(default_factory=dict)
    """Each nested stack, by its logical id in this one."""
    parameters: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)

    def physical_id(self, logical_id: str) -> str:
        return self.physical[logical_id]

    def stacks(self) -> Iterator[tuple[tuple[str, ...], Deployed]]:
        """This stack and every nested one, each with the logical ids that lead to it."""
        yield (), self
        for logical_id, nested in self.nested.items():
            for path, inner in nested.stacks():
                yield (logical_id, *path), inner

    @property
    def resource_count(self) -> int:
        return sum(len(stack.physical) for _, stack in self.stacks())


def deploy(synth: Synthesized, session: Any, *, stack_name: str = STACK_NAME) -> Deployed:
    account = session.client("sts").get_caller_identity()["Account"]
    _bootstrap(session, account, session.region_name)
    return _apply(synth, session, stack_name, update=False)


def update(synth: Synthesized, session: Any, *, stack_name: str = STACK_NAME) -> Deployed:
    """Deploy ``synth`` over the stack an earlier :func:`deploy` created, as ``cdk deploy`` of a
    new version does: CloudFormation adds, changes and removes resources (keeping those it
    retains); data in tables it keeps stays. Resources moto's CloudFormation skips are not changed
    (``complete`` creates them)."""
    from vigil_tools.emulator.moto_updates import install

    install()
    return _apply(synth, session, stack_name, update=True)


def _apply(synth: Synthesized, session: Any, stack_name: str, *, update: bool) -> Deployed:
    """The stack created from ``synth`` (or updated to it), as CloudFormation would;
    :class:`DeployFailed` naming what moto refused."""
    account = session.client("sts").get_caller_identity()["Account"]
    region = session.region_name
    install_nested_stack_outputs()
    _publish_file_assets(synth, session, account, region, stack_name)
    cloudformation = session.client("cloudformation")
    apply = cloudformation.update_stack if update else cloudformation.create_stack
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        try:
            apply(
                StackName=stack_name,
                TemplateBody=json.dumps(deployable(synth.template, session, region, stack_name)),
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
            )
        except ClientError as refused:
            unsupported = {str(w.message) for w in skipped}
            raise DeployFailed.of(synth, stack_name, _message(refused), unsupported) from None
    _check_complete(
        cloudformation, synth, stack_name, "UPDATE_COMPLETE" if update else "CREATE_COMPLETE"
    )
    return deployed_stack(cloudformation, stack_name)


def deployable(
    template: dict[str, Any], session: Any, region: str, name: str, *, nested: bool = False
) -> dict[str, Any]:
    """A template as moto can deploy it: AWS's public parameters stood in for, queues named
    where moto would not (every queue of a nested stack)."""
    return _with_parameter_tags(
        _with_queue_names(_with_public_parameters(template, session, region), name, nested)
    )


def _with_parameter_tags(template: dict[str, Any]) -> dict[str, Any]:
    """An ``AWS::SSM::Parameter``'s ``Tags`` is a map in CloudFormation (the catalogs' parts carry
    the stack's tag); moto reads it as PutParameter's list of ``Key``/``Value`` and fails."""
    resources = dict(template.get("Resources", {}))
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        if resource.get("Type") == "AWS::SSM::Parameter" and isinstance(props.get("Tags"), dict):
            tags = [{"Key": k, "Value": v} for k, v in props["Tags"].items()]
            resources[logical_id] = {**resource, "Properties": {**props, "Tags": tags}}
    return {**template, "Resources": resources}


def _check_complete(cloudformation: Any, synth: Synthesized, stack_name: str, done: str) -> None:
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    if stack["StackStatus"] != done:
        failed = [
            f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', e['ResourceStatus'])}"
            for e in cloudformation.describe_stack_events(StackName=stack_name)["StackEvents"]
            if e["ResourceStatus"].endswith("FAILED")
        ]
        reason = "; ".join(failed) or stack.get("StackStatusReason") or stack["StackStatus"]
        raise DeployFailed.of(synth, stack_name, reason, set())


def deployed_stack(cloudformation: Any, stack_name: str) -> Deployed:
    """What CloudFormation reports of a stack and, recursively, its nested stacks."""
    physical: dict[str, str] = {}
    nested: dict[str, Deployed] = {}
    paginator = cloudformation.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=stack_name):
        for resource in page["StackResourceSummaries"]:
            logical_id = resource["LogicalResourceId"]
            physical[logical_id] = resource.get("PhysicalResourceId", "")
            if resource["ResourceType"] == "AWS::CloudFormation::Stack":
                nested[logical_id] = deployed_stack(cloudformation, physical[logical_id])
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    return Deployed(
        stack_name=stack_name,
        physical=physical,
        nested=nested,
        parameters={p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])},
        outputs={o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", []) or []},
    )


def install_nested_stack_outputs() -> None:
    """moto creates a nested stack (``AWS::CloudFormation::Stack``, its template from S3) but has
    no ``Fn::GetAtt Stack.Outputs.NAME``: the parent reads its shards' outputs (the catalogs)."""
    from moto.cloudformation.models import Stack as MotoStack

    if getattr(MotoStack, "_vigil_outputs", False):
        return

    def get_cfn_attribute(self: Any, attribute_name: str) -> Any:
        if attribute_name.startswith("Outputs."):
            output = self.output_map[attribute_name.removeprefix("Outputs.")]
            if output is not None:
                return output.value
        raise UnformattedGetAttTemplateException()

    from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

    MotoStack.get_cfn_attribute = get_cfn_attribute  # type: ignore[attr-defined]
    MotoStack._vigil_outputs = True  # type: ignore[attr-defined]


class DeployFailed(Exception):
    """moto refused the template: names the resources its reason mentions and moto's reason."""

    @classmethod
    def of(cls, synth: Synthesized, stack: str, reason: str, unsupported: set[str]) -> DeployFailed:
        resources = synth.template.get("Resources", {})
        named = [
            logical_id
            for logical_id in resources
            if re.search(rf"\b{re.escape(logical_id)}\b", reason)
        ]
        lines = [f"the emulator (moto) could not deploy stack {stack}: {reason}"]
        for logical_id in named:
            resource = resources[logical_id]
            path = resource.get("Metadata", {}).get("aws:cdk:path", "")
            kind = resource.get("Type", "?")
            unknown = any(kind in warning for warning in unsupported)
            lines.append(
                f"  resource {logical_id} ({kind}{', ' + path if path else ''})"
                + (": moto's CloudFormation does not support this type" if unknown else "")
            )
        return cls("\n".join(lines))


def _message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message") or error)


def _with_public_parameters(template: dict[str, Any], session: Any, region: str) -> dict[str, Any]:
    """Stand in for the public SSM parameters AWS provides in every account (the Powertools layer).

    A template parameter typed ``AWS::SSM::Parameter::Value<String>`` resolves at deploy time. moto
    resolves it too, but cannot hold names under ``/aws`` (and resolves a parameter's default even
    when a value is passed): the emulator stores its own copy under another name and deploys the
    template with that name as the parameter's default; nothing else in the template changes. The handlers run in-process on the
    virtualenv's Powertools (the version requirements.txt pins, the one the layer is chosen by), so
    the layer ARN is recorded on the function and never loaded.
    """
    layers: dict[str, tuple[str, str]] = {}
    for key, parameter in template.get("Parameters", {}).items():
        path = str(parameter.get("Default", ""))
        if not parameter.get("Type", "").startswith("AWS::SSM::Parameter::") or not path.startswith(
            "/aws/service/"
        ):
            continue
        match = POWERTOOLS_PARAMETERS.match(path)
        if match is None:
            raise ValueError(f"the emulator does not provide AWS's public parameter {path} ({key})")
        layers[key] = (
            path,
            f"arn:aws:lambda:{region}:{POWERTOOLS_ACCOUNT}:layer:AWSLambdaPowertoolsPythonV3-"
            f"python{match['major']}{match['minor']}-{match['arch']}:1",
        )
    parameters = dict(template.get("Parameters", {}))
    for key, (path, layer) in layers.items():
        local = f"{LOCAL_PUBLIC_PREFIX}{path}"
        session.client("ssm").put_parameter(Name=local, Value=layer, Type="String", Overwrite=True)
        parameters[key] = {**parameters[key], "Default": local}
    return {**template, "Parameters": parameters}


def _with_queue_names(template: dict[str, Any], stack_name: str, every: bool) -> dict[str, Any]:
    """Name the queues CloudFormation would name, where moto's own names fail: AWS generates
    ``<stack>-<id>-<suffix>[.fifo]`` for a queue without ``QueueName``; moto generates a FIFO
    queue's name without ``.fifo`` and then refuses it ("Queue name must end in .fifo for FIFO
    queues"), and cuts a nested stack's (``every``: its long generated name) at 80 characters
    before the logical id is told apart ("The specified queue already exists")."""
    resources = dict(template.get("Resources", {}))
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        if resource.get("Type") != "AWS::SQS::Queue" or "QueueName" in props:
            continue
        if not (every or props.get("FifoQueue")):
            continue
        base = f"{stack_name}-{logical_id}"
        if len(base) > 75:  # cut, and kept apart from its neighbours by a digest of the whole
            base = f"{base[:66]}-{hashlib.sha256(base.encode()).hexdigest()[:8]}"
        name = base + (".fifo" if props.get("FifoQueue") else "")
        resources[logical_id] = {**resource, "Properties": {**props, "QueueName": name}}
    return {**template, "Resources": resources}


def _bootstrap(session: Any, account: str, region: str) -> None:
    """What ``cdk bootstrap`` leaves behind that a CDK template relies on."""
    session.client("ssm").put_parameter(
        Name=f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version",
        Value="27",
        Type="String",
        Overwrite=True,
    )
    s3 = session.client("s3")
    bucket = _asset_bucket(account, region)
    if region == "us-east-1":
        s3.create_bucket(Bucket=bucket)
    else:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})


def _asset_bucket(account: str, region: str) -> str:
    return f"cdk-{BOOTSTRAP_QUALIFIER}-assets-{account}-{region}"


def _publish_file_assets(
    synth: Synthesized, session: Any, account: str, region: str, stack_name: str
) -> None:
    """Every file asset to the bootstrap bucket; a nested stack's template as moto can deploy it
    (moto reads it from S3 as it creates the nested stack)."""
    s3 = session.client("s3")
    nested = {inner.file: path for path, inner in synth.stacks() if path}
    for asset in synth.assets.get("files", {}).values():
        source = synth.outdir / asset["source"]["path"]
        if asset["source"]["path"] in nested:
            # Vigil-Jobs3: the shard's construct id, what its nested stack's logical id starts with
            shards = (
                logical_id.split("NestedStack", 1)[0]
                for logical_id in nested[asset["source"]["path"]]
            )
            name = "-".join((stack_name, *shards))[:60]
            body = json.dumps(
                deployable(json.loads(source.read_text()), session, region, name, nested=True)
            ).encode()
        elif asset["source"].get("packaging") == "zip":
            body = _zip_dir(source)
        else:
            body = source.read_bytes()
        for destination in asset["destinations"].values():
            s3.put_object(
                Bucket=destination["bucketName"]
                .replace("${AWS::AccountId}", account)
                .replace("${AWS::Region}", region),
                Key=destination["objectKey"],
                Body=body,
            )


def _zip_dir(directory: Path) -> bytes:
    if directory.is_file():
        return directory.read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(directory).as_posix())
    return buffer.getvalue()
