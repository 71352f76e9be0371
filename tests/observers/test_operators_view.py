"""Observers as operators see them: a pooled observer's ``heartbeat_at`` (``GET /observers``,
``vigil observers list``/``get``) is when its host last vouched for it, not its claim time, and
``vigil observers get`` shows its checkpoint. (moto, about 1 s.)"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

from handlers import observers_api
from tests.helpers.observers import HOSTS_TABLE, REGISTRY_TABLE, registry_key
from tests.observers.test_hosts_api import call, create_observer, hosts  # noqa: F401 (fixture)
from vigil.clock import ManualClock, epoch_ms, iso
from vigil.dynamo import to_wire
from vigil.observers.host_fleet.store import HostStore
from vigil_tools.api_client import InProcessTransport
from vigil_tools.cli import main

HOST = "pooled-ticker-h1"


def place(
    dynamodb: Any, name: str, claimed_at: Any, checkpoint: dict[str, Any] | None = None
) -> int:
    """``name`` RUNNING on h1 since ``claimed_at`` (its record's heartbeat), with a checkpoint."""
    generation = int(call(f"/observers/{name}")[1]["generation"])
    values = {
        ":h": HOST,
        ":s": "RUNNING",
        ":b": iso(claimed_at),
        ":bm": epoch_ms(claimed_at),
        ":c": checkpoint or {},
    }
    dynamodb.update_item(
        TableName=REGISTRY_TABLE,
        Key=registry_key(dynamodb, REGISTRY_TABLE, name),
        UpdateExpression="SET host = :h, #s = :s, heartbeat_at = :b, heartbeat_at_ms = :bm, "
        "checkpoint = :c",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=to_wire(values),
    )
    return generation


def beat(dynamodb: Any, at: Any, running: dict[str, int]) -> None:
    dynamodb.update_item(
        TableName=HOSTS_TABLE,
        Key=to_wire({"host_id": HOST}),
        UpdateExpression="SET heartbeat_at_ms = :t, running = :r",
        ExpressionAttributeValues=to_wire(
            {":t": epoch_ms(at), ":r": {n: {"generation": g} for n, g in running.items()}}
        ),
    )


def test_a_pooled_observers_heartbeat_is_its_hosts_last_beat_for_it(
    hosts: HostStore,  # noqa: F811
    dynamodb: Any,
    clock: ManualClock,
) -> None:
    create_observer("a", "pooled-ticker")
    claimed = clock() - timedelta(minutes=20)
    generation = place(dynamodb, "a", claimed)
    beat(dynamodb, clock() - timedelta(seconds=12), {"a": generation})

    vouched = iso(clock() - timedelta(seconds=12))
    assert call("/observers/a")[1]["heartbeat_at"] == vouched
    (listed,) = call("/observers")[1]["observers"]
    assert listed["heartbeat_at"] == vouched
    out = io.StringIO()
    transport = InProcessTransport(observers_api.handler)
    assert main(["observers", "list"], transport=transport, stdout=out) == 0
    assert vouched in out.getvalue() and iso(claimed) not in out.getvalue()

    # a host whose last beat did not name this generation vouches for nothing: the record's time
    beat(dynamodb, clock() - timedelta(seconds=5), {"a": generation + 1})
    assert call("/observers/a")[1]["heartbeat_at"] == iso(claimed)


def test_vigil_observers_get_shows_the_checkpoint(
    hosts: HostStore,  # noqa: F811
    dynamodb: Any,
    clock: ManualClock,
) -> None:
    create_observer("a", "pooled-ticker")
    place(dynamodb, "a", clock(), checkpoint={"offset": 42})
    assert call("/observers/a")[1]["checkpoint"] == {"offset": 42}
    out = io.StringIO()
    transport = InProcessTransport(observers_api.handler)
    assert main(["observers", "get", "a"], transport=transport, stdout=out) == 0
    assert '{"offset": 42}' in out.getvalue()
