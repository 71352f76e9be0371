"""Deploy a synthesized stack onto the emulator the way ``cdk deploy`` would: bootstrap, publish
file assets, create the CloudFormation stack (or update it with a newer template), and report its
physical resources."""

from __future__ import annotations

import io
import json
import re
import warnings
import zipfile
from dataclasses import dataclass
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

    def physical_id(self, logical_id: str) -> str:
        return self.physical[logical_id]


def deploy(synth: Synthesized, session: Any, *, stack_name: str = STACK_NAME) -> Deployed:
    account = session.client("sts").get_caller_identity()["Account"]
    region = session.region_name
    _bootstrap(session, account, region)
    return _apply(synth, session, stack_name, "create_stack", "CREATE_COMPLETE")


def update(synth: Synthesized, session: Any, *, stack_name: str = STACK_NAME) -> Deployed:
    """Deploy ``synth`` over the stack an earlier :func:`deploy` created, as ``cdk deploy`` of a
    new version does: CloudFormation adds, changes and removes resources; data in tables it keeps
    stays. Resources moto's CloudFormation skips are not changed (``complete`` creates them)."""
    from vigil_tools.emulator.moto_updates import install

    install()
    return _apply(synth, session, stack_name, "update_stack", "UPDATE_COMPLETE")


def _apply(
    synth: Synthesized, session: Any, stack_name: str, operation: str, complete: str
) -> Deployed:
    account = session.client("sts").get_caller_identity()["Account"]
    region = session.region_name
    _publish_file_assets(synth, session, account, region)
    cloudformation = session.client("cloudformation")
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        try:
            getattr(cloudformation, operation)(
                StackName=stack_name,
                TemplateBody=json.dumps(
                    _with_fifo_queue_names(
                        _with_public_parameters(synth, session, region), stack_name
                    )
                ),
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
            )
        except ClientError as refused:
            unsupported = {str(w.message) for w in skipped}
            raise DeployFailed.of(synth, stack_name, _message(refused), unsupported) from None
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    if stack["StackStatus"] != complete:
        failed = [
            f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', e['ResourceStatus'])}"
            for e in cloudformation.describe_stack_events(StackName=stack_name)["StackEvents"]
            if e["ResourceStatus"].endswith("FAILED")
        ]
        reason = "; ".join(failed) or stack.get("StackStatusReason") or stack["StackStatus"]
        raise DeployFailed.of(synth, stack_name, reason, set())
    physical: dict[str, str] = {}
    paginator = cloudformation.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=stack_name):
        for resource in page["StackResourceSummaries"]:
            physical[resource["LogicalResourceId"]] = resource.get("PhysicalResourceId", "")
    return Deployed(stack_name=stack_name, physical=physical)


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


def _with_public_parameters(synth: Synthesized, session: Any, region: str) -> dict[str, Any]:
    """Stand in for the public SSM parameters AWS provides in every account (the Powertools layer).

    A template parameter typed ``AWS::SSM::Parameter::Value<String>`` resolves at deploy time. moto
    resolves it too, but cannot hold names under ``/aws`` (and resolves a parameter's default even
    when a value is passed): the emulator stores its own copy under another name and deploys the
    template with that name as the parameter's default; nothing else in the template changes. The handlers run in-process on the
    virtualenv's Powertools (the version requirements.txt pins, the one the layer is chosen by), so
    the layer ARN is recorded on the function and never loaded.
    """
    layers: dict[str, tuple[str, str]] = {}
    for key, parameter in synth.template.get("Parameters", {}).items():
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
    parameters = dict(synth.template.get("Parameters", {}))
    for key, (path, layer) in layers.items():
        local = f"{LOCAL_PUBLIC_PREFIX}{path}"
        session.client("ssm").put_parameter(Name=local, Value=layer, Type="String", Overwrite=True)
        parameters[key] = {**parameters[key], "Default": local}
    return {**synth.template, "Parameters": parameters}


def _with_fifo_queue_names(template: dict[str, Any], stack_name: str) -> dict[str, Any]:
    """Name the FIFO queues CloudFormation would name: AWS generates ``<stack>-<id>-<suffix>.fifo``
    for a FIFO queue without ``QueueName``; moto generates a name without ``.fifo`` and then refuses
    it ("Queue name must end in .fifo for FIFO queues")."""
    resources = dict(template.get("Resources", {}))
    for logical_id, resource in resources.items():
        props = resource.get("Properties", {})
        if (
            resource.get("Type") == "AWS::SQS::Queue"
            and props.get("FifoQueue")
            and ("QueueName" not in props)
        ):
            name = f"{stack_name}-{logical_id}"[:75] + ".fifo"
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


def _publish_file_assets(synth: Synthesized, session: Any, account: str, region: str) -> None:
    s3 = session.client("s3")
    for asset in synth.assets.get("files", {}).values():
        source = synth.outdir / asset["source"]["path"]
        body = (
            _zip_dir(source) if asset["source"].get("packaging") == "zip" else source.read_bytes()
        )
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
