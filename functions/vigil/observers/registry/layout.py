"""How the registry's items are keyed: by kind (partition) and name (sort), or by name alone (the
registry of a deployment from before the registry was keyed by kind).

Keyed by kind, a kind's task role is held to its own partition (``dynamodb:LeadingKeys``) for every
request it makes: it can neither read nor write another kind's observers. What has no kind is in
partitions no kind can be named (``#`` is outside the kind pattern)::

    kind      name       what
    ticker    btc-usd    an observer (the fleet's indexes sort by name across kinds)
    #names    btc-usd    its name's claim: names stay unique across kinds; observer_kind = ticker
    #fleet    #fleet     the fleet's active counter
    #resync   #resync    the resync pass's lease
    #migration #migration the copy from a name-keyed registry, once done

Every key the code makes comes from here (:class:`RegistryRef`), so nothing else knows the shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from vigil.contract.observers import (
    NAME_KEYED_TABLE_ENV,
    NAMES_PARTITION,
    REGISTRY_KEY,
    REGISTRY_PARTITION,
    REGISTRY_SORT,
    REGISTRY_TABLE_ENV,
)
from vigil.dynamo import to_wire
from vigil.settings import Environment, SettingsError


class Layout(StrEnum):
    BY_KIND = "kind"
    """Partition key ``kind``, sort key ``name``."""
    BY_NAME = "name"
    """Partition key ``name`` only: a deployment from before the registry was keyed by kind."""


@dataclass(frozen=True)
class RegistryRef:
    """A registry table, how it is keyed and, for a container, the one kind it may address."""

    table: str
    layout: Layout = Layout.BY_KIND
    kind: str | None = None
    """A container's own kind: every key it makes is in this partition, and it looks no name up
    (its role reaches nothing else). None: the operators' and the reconciler's side, which find
    a name's kind through its claim (``NAMES_PARTITION``)."""

    @property
    def by_kind(self) -> bool:
        return self.layout is Layout.BY_KIND

    def key(self, kind: str, name: str) -> dict[str, Any]:
        """An observer's key (wire format)."""
        return to_wire(self.plain_key(kind, name))

    def plain_key(self, kind: str, name: str) -> dict[str, Any]:
        if not self.by_kind:
            return {REGISTRY_KEY: name}
        return {REGISTRY_PARTITION: kind, REGISTRY_SORT: name}

    def special(self, key: str) -> dict[str, Any]:
        """The key of one of the registry's own items (``#fleet``, ``#resync``, ``#migration``),
        plain (not wire): its partition and sort key are both ``key``."""
        return {REGISTRY_KEY: key} if not self.by_kind else self.plain_key(key, key)

    def claim_key(self, name: str) -> dict[str, Any]:
        """The key of a name's claim (wire format); the layout keyed by kind only."""
        assert self.by_kind, "a name-keyed registry has no claims: the name is the key"
        return self.key(NAMES_PARTITION, name)

    @property
    def key_attributes(self) -> tuple[str, ...]:
        return (REGISTRY_PARTITION, REGISTRY_SORT) if self.by_kind else (REGISTRY_KEY,)


def registry_ref(read: Environment, *, container: bool = False) -> RegistryRef:
    """The registry a function or container names in its environment: ``VIGIL_REGISTRY_TABLE``
    (keyed by kind), else ``VIGIL_OBSERVERS_TABLE`` (an older deployment's, keyed by name). A
    ``container`` whose ``VIGIL_OBSERVER_KINDS`` names one kind (as every task definition's does)
    keeps to that kind's partition."""
    table = read.text(REGISTRY_TABLE_ENV, "")
    if not table:
        older = read.text(NAME_KEYED_TABLE_ENV, "")
        if not older:
            raise SettingsError(f"environment variable {REGISTRY_TABLE_ENV} is required")
        return RegistryRef(older, Layout.BY_NAME)
    return RegistryRef(table, Layout.BY_KIND, _one_kind(read) if container else None)


def _one_kind(read: Environment) -> str | None:
    """The one kind ``VIGIL_OBSERVER_KINDS`` names, if it names exactly one (its own reader
    reports a malformed value)."""
    try:
        kinds = json.loads(read.text("VIGIL_OBSERVER_KINDS", "{}"))
    except ValueError:
        return None
    return next(iter(kinds)) if isinstance(kinds, Mapping) and len(kinds) == 1 else None
