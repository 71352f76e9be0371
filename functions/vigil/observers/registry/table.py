"""What both sides of the registry share: the table, the clock, and the consistent read."""

from __future__ import annotations

from typing import Any

from vigil.clock import Clock, system_clock
from vigil.dynamo import Item, from_wire, to_wire
from vigil.observers.model import Observer, from_item
from vigil.observers.registry.errors import ObserverNotFound


def key(name: str) -> dict[str, Any]:
    return to_wire({"name": name})


class RegistryTable:
    def __init__(self, client: Any, table: str, *, clock: Clock = system_clock) -> None:
        self._client = client
        self._table = table
        self._clock = clock

    def get(self, name: str) -> Observer:
        item = self._get_item(name)
        if item is None:
            raise ObserverNotFound(name)
        return from_item(item)

    def _get_item(self, name: str) -> Item | None:
        answer = self._client.get_item(TableName=self._table, Key=key(name), ConsistentRead=True)
        return from_wire(answer.get("Item"))
