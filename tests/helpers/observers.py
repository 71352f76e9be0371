"""Tables created from the synthesized template (the deployed shape), and reading them back."""

from __future__ import annotations

from typing import Any

from vigil_tools.emulator.template import create_table, synthesized_app

REGISTRY_PATH = "Vigil/Observers/Registry"
IDEMPOTENCY_PATH = "Vigil/Observers/Idempotency"
HOSTS_PATH = "Vigil/Observers/Hosts"
REGISTRY_TABLE = "vigil-observers"
HOSTS_TABLE = "vigil-hosts"
IDEMPOTENCY_TABLE = "vigil-idempotency"


def create_registry_table(client: Any, name: str = REGISTRY_TABLE) -> None:
    create_table(synthesized_app(), client, REGISTRY_PATH, name)


def create_idempotency_table(client: Any, name: str = IDEMPOTENCY_TABLE) -> None:
    create_table(synthesized_app(), client, IDEMPOTENCY_PATH, name)


def create_hosts_table(client: Any, name: str = HOSTS_TABLE) -> None:
    """The pooled hosts' table exactly as the synthesized template defines it."""
    create_table(synthesized_app(), client, HOSTS_PATH, name)


def scan_all(client: Any, table: str) -> list[dict[str, Any]]:
    return list(client.scan(TableName=table, ConsistentRead=True).get("Items", []))
