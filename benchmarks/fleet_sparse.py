"""What a resync reads beside stopped records, and what a heartbeat writes (issue 21).

3 live (RUNNING, fresh heartbeats) and 600 STOPPED dedicated observers on moto, the registry as
the synthesized template defines it. For an ordinary minute's resync and a sweep minute's: Query
requests, items read (Query and BatchGetItem answers), the Query's read units (from the size of
the items it answered with) and DynamoDB requests in all. For one
heartbeat of a RUNNING observer and for the write that makes one STOPPED: write units, computed
from the item before and after the write and the table's indexes as DynamoDB bills them (the table
item's size in 1 KB units; per index, a put, a delete or an update of the index item when a key or
a projected attribute changes; moto does not bill indexes).

``python -m benchmarks.fleet_sparse`` prints it. It runs on any revision that has the moto fleet
helper, so the same script measured the fleet index before and after it became sparse.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta
from decimal import Decimal
from typing import Any

from moto import mock_aws

from tests.helpers.moto_fleet import TABLE, MotoFleet, default_task_transitions
from tests.helpers.observers import registry_key
from vigil.clock import ManualClock
from vigil.dynamo import from_wire
from vigil.observers.model import Desired, Status
from vigil.observers.registry import ObserverRegistry

LIVE = 3
STOPPED = 600
START = "2026-11-22T12:01:00+00:00"
"""Minute 1 of a 10: an ordinary minute (a sweep is every 10th)."""


class Reads:
    """Requests, Query pages and items a client's answers carried."""

    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.items = 0
        self.read_units = 0.0
        """Eventually consistent Query reads: half a unit per 4 KB of index items, per page."""
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, model: Any, parsed: Any, **_: Any) -> None:
        self.calls[model.name] += 1
        if model.name == "BatchGetItem":
            self.items += sum(len(v) for v in parsed.get("Responses", {}).values())
        elif model.name in ("Scan", "Query"):
            items = parsed.get("Items") or []
            self.items += len(items)
            read = sum(size(from_wire(item) or {}) for item in items)
            self.read_units += max(1, math.ceil(read / 4096)) / 2


def size(value: Any) -> int:
    """DynamoDB's item size rules, closely enough for sub-kilobyte items."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bool) or value is None:
        return 1
    if isinstance(value, int | float | Decimal):
        return len(str(abs(Decimal(str(value)))).replace(".", "").lstrip("0") or "0") // 2 + 2
    if isinstance(value, dict):
        return 3 + sum(len(k.encode()) + size(v) + 1 for k, v in value.items())
    if isinstance(value, list | tuple):
        return 3 + sum(size(v) + 1 for v in value)
    raise TypeError(type(value).__name__)


def units(item: dict[str, Any]) -> int:
    return max(1, math.ceil(size(item) / 1024))


def write_units(old: dict[str, Any], new: dict[str, Any], table: dict[str, Any]) -> dict[str, int]:
    """Write units of one UpdateItem that turned ``old`` into ``new``: the table's, each index's."""
    keys = [k["AttributeName"] for k in table["KeySchema"]]
    billed = {"table": units(old if size(old) > size(new) else new)}
    for index in table.get("GlobalSecondaryIndexes", []):
        own = [k["AttributeName"] for k in index["KeySchema"]]
        projection = index["Projection"]
        kept = {*own, *keys, *projection.get("NonKeyAttributes", [])}

        def view(item: dict[str, Any], kept: set[str] = kept, all_: bool = False) -> dict[str, Any]:
            return dict(item) if all_ else {k: v for k, v in item.items() if k in kept}

        everything = projection["ProjectionType"] == "ALL"
        before = view(old, all_=everything) if all(k in old for k in own) else None
        after = view(new, all_=everything) if all(k in new for k in own) else None
        if (before is None and after is None) or before == after:
            cost = 0
        elif before is None or after is None:
            cost = units(after or before or {})
        elif any(before[k] != after[k] for k in own):
            cost = units(before) + units(after)  # a key changed: a delete and a put
        else:
            cost = units(after if size(after) > size(before) else before)
        billed[index["IndexName"]] = cost
    return billed


def _item(fleet: MotoFleet, name: str) -> dict[str, Any]:
    raw = fleet.dynamodb.get_item(TableName=TABLE, Key=registry_key(fleet.dynamodb, TABLE, name))
    return from_wire(raw["Item"]) or {}


def measure() -> dict[str, Any]:
    from datetime import datetime

    clock = ManualClock(datetime.fromisoformat(START))
    with mock_aws():
        fleet = MotoFleet(clock)
        try:
            fleet.settings = type(fleet.settings)(heartbeat_interval=timedelta(hours=1))
            for i in range(LIVE):
                fleet.running_task(f"obs-{i}", 1)
            fleet.put_many(
                [
                    fleet.observer(f"old-{i:04d}", desired=Desired.STOPPED, status=Status.STOPPED)
                    for i in range(STOPPED)
                ]
            )
            reconciler = fleet.reconciler()
            reconciler.resync("settle")  # (a first pass after an upgrade moves records once)
            passes: dict[str, dict[str, float]] = {}
            for label, minutes in (("ordinary minute", 1), ("sweep minute", 8)):
                clock.advance(timedelta(minutes=minutes))
                reads = Reads(fleet.dynamodb)
                reconciler.resync(label)
                passes[label] = {
                    "Query": reads.calls["Query"],
                    "items read": reads.items,
                    "Query read units": reads.read_units,
                    "DynamoDB requests": sum(reads.calls.values()),
                }
                fleet.dynamodb.meta.events.unregister("after-call.dynamodb", reads._after)
            table = fleet.dynamodb.describe_table(TableName=TABLE)["Table"]
            registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=clock)
            old = _item(fleet, "obs-0")
            registry.heartbeat("obs-0", 1)
            heartbeat = write_units(old, _item(fleet, "obs-0"), table)
            registry.request_stop("obs-1")
            old = _item(fleet, "obs-1")
            registry.report_exit(
                "obs-1", 1, exit_code=0, reason="asked to stop", task_arn=None, stopped=True
            )
            stop = write_units(old, _item(fleet, "obs-1"), table)
        finally:
            default_task_transitions()
    return {"passes": passes, "heartbeat": heartbeat, "stopped": stop}


def main() -> None:
    figures = measure()
    print(f"{LIVE} live and {STOPPED} STOPPED observers")
    for label, counts in figures["passes"].items():
        print(f"  resync, {label}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for label in ("heartbeat", "stopped"):
        billed = figures[label]
        detail = ", ".join(f"{k} {v}" for k, v in billed.items())
        print(f"  write units, {label}: {sum(billed.values())} ({detail})")


if __name__ == "__main__":
    main()
