"""What the reconciler writes for pooled hosts, written by hand for the host-side tests and the
benchmark (the reconciler's own writers are built separately): a host item and a placement; and
fake children for stepping a host's supervisor without processes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.helpers.observers import registry_key
from vigil.contract.hosts import HOSTS_KEY, OBSERVER_HOST, HostStatus
from vigil.dynamo import Update, from_wire, to_wire

TASK_ARN = "arn:aws:ecs:us-east-1:123456789012:task/vigil/host-1"


def put_host(
    client: Any,
    table: str,
    host_id: str,
    *,
    assigned: Mapping[str, int] | None = None,
    status: HostStatus = HostStatus.RUNNING,
    task_arn: str = TASK_ARN,
    slots: int = 50,
) -> None:
    client.put_item(
        TableName=table,
        Item=to_wire(
            {
                HOSTS_KEY: host_id,
                "kind": "ticker",
                "status": status.value,
                "task_arn": task_arn,
                "slots": slots,
                "assigned": dict(assigned or {}),
                "version": 1,
            }
        ),
    )


def assign(client: Any, table: str, host_id: str, assigned: Mapping[str, int]) -> None:
    """Replace the host's ``assigned`` map."""
    client.update_item(
        TableName=table,
        Key=to_wire({HOSTS_KEY: host_id}),
        UpdateExpression="SET assigned = :a",
        ExpressionAttributeValues=to_wire({":a": dict(assigned)}),
    )


def mark_host(client: Any, table: str, host_id: str, **fields: Any) -> None:
    """Set ``status`` (LOST, STOPPED) or ``task_arn`` (a replacement task) on the host's item."""
    names = {f"#f{i}": k for i, k in enumerate(fields)}
    client.update_item(
        TableName=table,
        Key=to_wire({HOSTS_KEY: host_id}),
        UpdateExpression="SET " + ", ".join(f"{n} = :{n[1:]}" for n in names),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=to_wire(
            {
                f":{n[1:]}": getattr(v, "value", v)
                for n, v in zip(names, fields.values(), strict=True)
            }
        ),
    )


def host_item(client: Any, table: str, host_id: str) -> dict[str, Any]:
    item = from_wire(
        client.get_item(TableName=table, Key=to_wire({HOSTS_KEY: host_id})).get("Item")
    )
    assert item is not None
    return item


def place(client: Any, table: str, name: str, generation: int, host_id: str | None) -> None:
    """The reconciler places an observer: new generation, STARTING, ``host`` set (a dedicated
    observer, ``host_id`` None, gets no host)."""
    update = Update().set_all(
        {"generation": generation, "task_arn": TASK_ARN, "status": "STARTING"}
    )
    if host_id is not None:
        update.set(OBSERVER_HOST, host_id)
    client.update_item(
        TableName=table,
        Key=registry_key(client, table, name),
        **update.increment("version").request(),
    )


class FakeChild:
    def __init__(self, name: str, generation: int) -> None:
        self.name = name
        self.generation = generation
        self.exitcode: int | None = None
        self.signals: list[str] = []
        self.sentinel = -1

    def stop(self) -> None:
        self.signals.append("TERM")

    def fence(self) -> None:
        self.signals.append("USR1")

    def kill(self) -> None:
        self.signals.append("KILL")
        self.exitcode = -9


class FakeLauncher:
    def __init__(self) -> None:
        self.started: list[FakeChild] = []

    def start(self, name: str, generation: int) -> FakeChild:
        self.started.append(FakeChild(name, generation))
        return self.started[-1]

    def child(self, name: str) -> FakeChild:
        return [c for c in self.started if c.name == name][-1]

    def pairs(self) -> list[tuple[str, int]]:
        return [(c.name, c.generation) for c in self.started]
