"""Tables created from the synthesized template (the deployed shape), and reading them back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vigil.contract.effects import WRITES_ENV
from vigil.dynamo import from_wire, to_wire
from vigil_tools.emulator.template import create_table, synthesized_app

REGISTRY_PATH = "Vigil/Observers/KindRegistry"
IDEMPOTENCY_PATH = "Vigil/Observers/Idempotency"
HOSTS_PATH = "Vigil/Observers/Hosts"
REGISTRY_TABLE = "vigil-observers"
HOSTS_TABLE = "vigil-hosts"
IDEMPOTENCY_TABLE = "vigil-idempotency"
FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
TICKER_COUNTS_PATH = "Vigil/TickerCounts"
TICKER_COUNTS_TABLE = "ticker-counts"
TICKER_WRITES = {WRITES_ENV: json.dumps({"tables": {"TickerCounts": TICKER_COUNTS_TABLE}})}
"""What the example ticker's containers are granted (its ``writes=[...]``): its counts table."""


def create_registry_table(client: Any, name: str = REGISTRY_TABLE) -> None:
    create_table(synthesized_app(), client, REGISTRY_PATH, name)


def create_ticker_counts_table(client: Any, name: str = TICKER_COUNTS_TABLE) -> None:
    """The table the example ticker writes its count to through ``ctx.fenced`` (once per
    emulator: the tests sharing a server share it)."""
    if name not in client.list_tables()["TableNames"]:
        create_table(synthesized_app(), client, TICKER_COUNTS_PATH, name)


def create_idempotency_table(client: Any, name: str = IDEMPOTENCY_TABLE) -> None:
    create_table(synthesized_app(), client, IDEMPOTENCY_PATH, name)


def create_hosts_table(client: Any, name: str = HOSTS_TABLE) -> None:
    """The pooled hosts' table exactly as the synthesized template defines it."""
    create_table(synthesized_app(), client, HOSTS_PATH, name)


def registry_key(client: Any, table: str, name: str) -> dict[str, Any]:
    """The key of the observer named ``name`` (wire format): its kind from its name's claim, as
    the API and the reconciler find it."""
    from vigil.observers.registry.table import RegistryTable

    kind = RegistryTable(client, table).kind_of(name)
    assert kind is not None, f"no observer named {name!r} in {table}"
    return to_wire({"kind": kind, "name": name})


def raw_item(client: Any, table: str, name: str) -> dict[str, Any]:
    """The observer's whole item, as stored."""
    item = from_wire(
        client.get_item(
            TableName=table, Key=registry_key(client, table, name), ConsistentRead=True
        ).get("Item")
    )
    assert item is not None
    return item


def put_observer(client: Any, table: str, item: dict[str, Any]) -> None:
    """An observer's item written as it stands (plain attributes), with its name's claim, as
    ``create`` leaves them: for tests that start from a record in a given state."""
    from vigil.contract.observers import NAMED_KIND, NAMES_PARTITION

    client.put_item(TableName=table, Item=to_wire(item))
    claim = {"kind": NAMES_PARTITION, "name": item["name"], NAMED_KIND: item["kind"]}
    client.put_item(TableName=table, Item=to_wire(claim))


def scan_all(client: Any, table: str) -> list[dict[str, Any]]:
    return list(client.scan(TableName=table, ConsistentRead=True).get("Items", []))


def wait_for(
    condition: Callable[[], bool], process: subprocess.Popen[str], deadline_s: float = 20.0
) -> None:
    """Poll ``condition`` (a container's writes) until true; fail with the container's output if
    it exits first or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if condition():
            return
        if process.poll() is not None:
            pytest.fail(f"container exited early ({process.returncode}):\n{process.stdout.read()}")  # type: ignore[union-attr]
        time.sleep(0.1)
    process.kill()
    pytest.fail(f"condition not met within {deadline_s} s:\n{process.communicate()[0]}")


def start_container(
    endpoint: str, table: str, *, stdout: int = subprocess.PIPE, **variables: str
) -> subprocess.Popen[str]:
    """``python -m vigil.observers.main`` as ECS runs it (the image's files only), its AWS calls
    sent to a moto server; ``variables`` add to the task definition's environment (an empty
    value leaves the variable out)."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "VIGIL_REGISTRY_TABLE": table,
        "VIGIL_OBSERVER_KINDS": '{"ticker": "observers.ticker.run"}',
        "VIGIL_HEARTBEAT_SECONDS": "1",
        "POWERTOOLS_METRICS_DISABLED": "true",
        **TICKER_WRITES,
        **variables,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "vigil.observers.main"],
        cwd=FUNCTIONS,
        env={k: v for k, v in env.items() if v},
        stdout=stdout,
        stderr=subprocess.STDOUT,
        text=True,
    )


def leave_uncertain(
    client: Any, table: str, name: str, effect: str, *, generation: int = 1
) -> None:
    """What an observer's record holds once ``ctx.once`` stopped ``generation`` UNCERTAIN on
    ``effect`` (the container's mark) and the reconciler took its exit code 4 (FAILED): the
    effect's intent in the journal, without its completion."""
    from vigil.contract.observers import Status, status_fields
    from vigil.dynamo import Update

    status, unlisted = status_fields(Status.FAILED)
    update = Update().set_all(
        {
            **status,
            "generation": generation,
            "effects": {effect: {"state": "INTENT", "fence": generation - 1, "at": "then"}},
            "uncertain_effect": effect,
            "uncertain_reason": f"effect {effect!r} was begun and never recorded done",
            "failure_reason": "uncertain effect (exit code 4)",
        }
    )
    update.remove(*unlisted).increment("version")
    client.update_item(TableName=table, Key=registry_key(client, table, name), **update.request())
