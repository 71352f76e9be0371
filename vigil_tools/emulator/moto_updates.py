"""Three narrow workarounds that let moto's (5.2.1) CloudFormation update a deployed stack as AWS does
(:func:`vigil_tools.emulator.deploy.update`, the upgrade tests).

* A Lambda function's update re-checks its layers: the emulator records the Powertools layer's ARN
  on each function (``deploy._with_public_parameters``) but never loads it, and moto knows no such
  layer, so every function update failed ("One or more LayerVersion does not exist"). A layer moto
  does not know is kept as named (its size unknown: 0).
* A task definition's update registers the new revision with the template's container
  definitions as they are (``Environment``, ``Name``...), where its create remaps them to the
  API's camelCase first: the new revision had no ``environment`` a reader could find. The update
  remaps them the same way.

* A resource the new template drops is deleted, where CloudFormation keeps (forgets, leaving it in
  the account) one whose ``DeletionPolicy`` is ``Retain``: the one-stack layout's queues, holding
  work in flight, on the upgrade to the shards (``vigil upgrade drain`` then moves it). Retained
  resources are no longer removed.

``tests/upgrade/test_registry_upgrade.py`` deploys today's template over an older one, and back to
the default, through them.
"""

from __future__ import annotations

from typing import Any

_installed: list[bool] = []


def install() -> None:
    """Apply all three (once; idempotent)."""
    if _installed:
        return
    from moto.awslambda.models import LambdaFunction, lambda_backends
    from moto.cloudformation.parsing import ResourceMap
    from moto.core.utils import pascal_to_camelcase, remap_nested_keys
    from moto.ecs.models import TaskDefinition

    def layers(function: Any, arns: list[str]) -> list[dict[str, Any]]:
        backend = lambda_backends[function.account_id][function.region]
        found = []
        for arn in arns:
            known = backend.layers_versions_by_arn(arn)
            found.append({"Arn": arn, "CodeSize": known.code_size if known else 0})
        return found

    update = TaskDefinition.update_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def remapped(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        properties = dict(cloudformation_json["Properties"])
        definitions = properties.get("ContainerDefinitions", [])
        properties["ContainerDefinitions"] = remap_nested_keys(definitions, pascal_to_camelcase)
        return update(
            cls,
            original_resource=original_resource,
            new_resource_name=new_resource_name,
            cloudformation_json={**cloudformation_json, "Properties": properties},
            account_id=account_id,
            region_name=region_name,
        )

    build_resource_diff = ResourceMap.build_resource_diff

    def kept_retained(self: Any, other: Any, parameters: Any = None) -> Any:
        diff = build_resource_diff(self, other, parameters)
        diff["Remove"] = [
            name
            for name in diff["Remove"]
            if self._resource_json_map[name].get("DeletionPolicy") != "Retain"
        ]
        return diff

    ResourceMap.build_resource_diff = kept_retained  # type: ignore[method-assign,assignment]
    LambdaFunction._get_layers_data = layers  # type: ignore[method-assign,assignment]
    TaskDefinition.update_from_cloudformation_json = classmethod(remapped)  # type: ignore[assignment]
    _installed.append(True)
