"""Deploy a new template over a stack the emulator already holds, as ``cdk deploy`` updates it.

CloudFormation keeps a resource the new template drops when its ``DeletionPolicy`` is ``Retain``
(it forgets it and leaves it in the account): moto deletes it, so the emulator tells moto not to,
or an upgrade would lose what a retained queue holds. What ``complete`` created for the old template
through the services' own APIs (schedules, alarms) is removed and created again from the new one.
"""

from __future__ import annotations

import contextlib
from typing import Any

from botocore.exceptions import ClientError

from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.complete import complete
from vigil_tools.emulator.deploy import POWERTOOLS_ACCOUNT, apply_template
from vigil_tools.emulator.intrinsics import Resolver
from vigil_tools.emulator.template import Synthesized

KEPT = frozenset({"fleet"})
"""What readers derived from the deployment that an update leaves as it was."""


def update_account(account: LocalAccount, synth: Synthesized) -> LocalAccount:
    """The account with ``synth`` deployed over its stack (``cdk deploy`` of a new version)."""
    install_retain_on_update()
    install_public_layers()
    _forget_completed(account)
    deployed = apply_template(synth, account.session, account.deployed.stack_name, update=True)
    session = account.session
    resolver = Resolver(synth, deployed, session)
    created = complete(synth, resolver)
    # Its catalogs, schedules and rules are the new template's now; the fleet's functions (the
    # stack's own) are the same ones.
    derived = {key: value for key, value in account.derived.items() if key in KEPT}
    return LocalAccount(session, synth, deployed, resolver, created, account.requests, derived)


def _forget_completed(account: LocalAccount) -> None:
    """The schedules and alarms ``complete`` created for the stack as it was (moto's stack never
    held them): gone with the template that declared them, made again from the new one."""
    scheduler = account.resolver.client("scheduler")
    cloudwatch = account.resolver.client("cloudwatch")
    for synth, resolver in account.resolver.every_stack():
        for logical_id, resource in synth.resources("AWS::Scheduler::Schedule").items():
            props = resolver.resolve(resource["Properties"])
            with contextlib.suppress(ClientError):  # already gone
                scheduler.delete_schedule(
                    Name=props.get("Name", logical_id), GroupName=props.get("GroupName", "default")
                )
        alarms = [
            resolver.resolve(resource["Properties"]).get("AlarmName", logical_id)
            for logical_id, resource in synth.resources("AWS::CloudWatch::Alarm").items()
        ]
        for start in range(0, len(alarms), 100):
            cloudwatch.delete_alarms(AlarmNames=alarms[start : start + 100])


def install_public_layers() -> None:
    """An updated function's configuration names the public Powertools layer (AWS's account,
    ``deploy.POWERTOOLS_ACCOUNT``), which moto's update looks up among its own and refuses
    ("One or more LayerVersion does not exist"); its create never looked. The handlers run on
    the virtualenv's Powertools anyway: the layer is only recorded."""
    from moto.awslambda.models import LambdaFunction

    if getattr(LambdaFunction, "_vigil_public_layers", False):
        return
    original = LambdaFunction._get_layers_data

    def get_layers_data(self: Any, arns: list[str]) -> Any:
        own = [arn for arn in arns if f":{POWERTOOLS_ACCOUNT}:layer:" not in arn]
        public = [{"Arn": arn, "CodeSize": 0} for arn in arns if arn not in own]
        return [*original(self, own), *public]

    LambdaFunction._get_layers_data = get_layers_data
    LambdaFunction._vigil_public_layers = True


def install_retain_on_update() -> None:
    """moto's update deletes every resource the new template drops; CloudFormation keeps those
    whose ``DeletionPolicy`` is ``Retain`` (the queues and tables Vigil retains)."""
    from moto.cloudformation.parsing import ResourceMap

    if getattr(ResourceMap, "_vigil_retain", False):
        return
    original = ResourceMap.build_resource_diff

    def build_resource_diff(self: Any, other: Any, parameters: Any = None) -> Any:
        diff = original(self, other, parameters)
        diff["Remove"] = [
            name
            for name in diff["Remove"]
            if self._resource_json_map[name].get("DeletionPolicy") != "Retain"
        ]
        return diff

    ResourceMap.build_resource_diff = build_resource_diff
    ResourceMap._vigil_retain = True
