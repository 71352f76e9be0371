"""The ObserverFleet as the emulator deployed it: its functions, tables, cluster and resync rule.

Read from the deployed functions' configuration, for whatever drives the fleet locally: the demo,
``vigil local up`` and the testing kit's ``vigil_stack``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vigil.contract.hosts import HOSTS_TABLE_ENV
from vigil.observers.registry.layout import RegistryRef, registry_ref
from vigil.settings import Environment
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.rules import scheduled_rules

API_HANDLER = "handlers.observers_api.handler"
RECONCILER_HANDLER = "handlers.reconciler.handler"


@dataclass(frozen=True)
class DeployedFleet:
    """The ObserverFleet's physical resources, read from the deployed functions' configuration."""

    api_function: str
    reconciler: str
    registry: RegistryRef
    """The registry (how it is keyed: a deployment from before it was keyed by kind has one
    keyed by name)."""
    idempotency_table: str
    cluster: str
    container: str
    resync_rule: str
    """The ARN of the minute's resync rule."""
    hosts_table: str = ""
    """The pooled hosts' table (empty: no pooled kind)."""

    @classmethod
    def of(cls, account: LocalAccount) -> DeployedFleet:
        client = account.session.client("lambda")
        by_handler: dict[str, dict[str, Any]] = {}
        for logical_id in account.synth.resources("AWS::Lambda::Function"):
            config = client.get_function_configuration(FunctionName=account.physical_id(logical_id))
            by_handler[config["Handler"]] = config
        api, reconciler = by_handler[API_HANDLER], by_handler[RECONCILER_HANDLER]
        api_env = api["Environment"]["Variables"]
        reconciler_env = reconciler["Environment"]["Variables"]
        return cls(
            api_function=api["FunctionName"],
            reconciler=reconciler["FunctionName"],
            registry=registry_ref(Environment(reconciler_env)),
            idempotency_table=api_env["VIGIL_IDEMPOTENCY_TABLE"],
            cluster=reconciler_env["VIGIL_CLUSTER_ARN"],
            container=reconciler_env["VIGIL_CONTAINER_NAME"],
            resync_rule=_resync_rule(account, reconciler["FunctionArn"]),
            hosts_table=api_env.get(HOSTS_TABLE_ENV, ""),
        )

    @property
    def registry_table(self) -> str:
        return self.registry.table


def _resync_rule(account: LocalAccount, function_arn: str) -> str:
    """The ARN of the deployed scheduled rule that targets the reconciler."""
    for rule in scheduled_rules(account.session):
        if function_arn in rule.targets:
            return rule.arn
    raise LookupError(f"no scheduled rule targets {function_arn}")
