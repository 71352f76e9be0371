"""What both sides of the registry share: the table and its keys, the clock, the consistent read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vigil.clock import Clock, system_clock
from vigil.contract.observers import FLEET_COUNTER_KEY, NAMED_KIND
from vigil.dynamo import Item, Update, any_of, from_wire, to_wire
from vigil.observers.model import Observer, from_item
from vigil.observers.registry.errors import ObserverNotFound
from vigil.observers.registry.layout import RegistryRef


def put_new(table: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """A transaction's Put of a registry item that must not exist yet (an observer, a name's
    claim: both have a ``name``)."""
    return {
        "Put": {
            "TableName": table,
            "Item": to_wire(item),
            "ConditionExpression": "attribute_not_exists(#name)",
            "ExpressionAttributeNames": {"#name": "name"},
        }
    }


def count_update(ref: RegistryRef, delta: int, maximum: int | None = None) -> dict[str, Any]:
    """A transaction's move of the fleet's ``active`` count; with ``maximum``, an increase is
    refused there (the old count comes back: ALL_OLD)."""
    update = Update().add("active", delta)
    extra: dict[str, Any] = {}
    if delta > 0 and maximum is not None:
        below = update.lt("active", maximum - delta + 1)
        update.condition(any_of(update.absent("active"), below))
        extra["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    counter = to_wire(ref.special(FLEET_COUNTER_KEY))
    return {"Update": {"TableName": ref.table, "Key": counter, **update.request()} | extra}


def as_ref(table: str | RegistryRef) -> RegistryRef:
    """A table name alone is a registry keyed by kind, its side unrestricted."""
    return table if isinstance(table, RegistryRef) else RegistryRef(table)


class RegistryTable:
    def __init__(
        self, client: Any, table: str | RegistryRef, *, clock: Clock = system_clock
    ) -> None:
        self._client = client
        self._ref = as_ref(table)
        self._table = self._ref.table
        self._clock = clock
        self._kinds: dict[str, str] = {}
        """Name -> kind, as found: a name's kind never changes (names are never reused)."""

    @property
    def ref(self) -> RegistryRef:
        return self._ref

    @property
    def client(self) -> Any:
        return self._client

    def remember(self, name: str, kind: str) -> None:
        """A name's kind, as a record read showed it (the reconciler reads many)."""
        if kind:
            self._kinds[name] = kind

    def get(self, name: str) -> Observer:
        item = self._get_item(name)
        if item is None:
            raise ObserverNotFound(name)
        return from_item(item)

    def key(self, name: str) -> dict[str, Any]:
        """The observer's key (wire format); raises ObserverNotFound for a name no observer has."""
        kind = self.kind_of(name)
        if kind is None:
            raise ObserverNotFound(name)
        return self._ref.key(kind, name)

    def kind_of(self, name: str) -> str | None:
        """The kind of the observer named ``name``: a container's own kind; else its name's claim
        (one consistent read, then remembered); None when no observer has the name."""
        if not self._ref.by_kind:
            return ""  # the name alone is the key
        if self._ref.kind is not None:
            return self._ref.kind
        if name not in self._kinds:
            answer = self._client.get_item(
                TableName=self._table, Key=self._ref.claim_key(name), ConsistentRead=True
            )
            claim = from_wire(answer.get("Item"))
            if claim is None or not claim.get(NAMED_KIND):
                return None
            self._kinds[name] = str(claim[NAMED_KIND])
        return self._kinds[name]

    def _get_item(self, name: str) -> Item | None:
        kind = self.kind_of(name)
        if kind is None:
            return None
        answer = self._client.get_item(
            TableName=self._table, Key=self._ref.key(kind, name), ConsistentRead=True
        )
        return from_wire(answer.get("Item"))
