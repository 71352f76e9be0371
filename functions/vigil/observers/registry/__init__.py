"""The observer registry's data access, split by who writes:

- :mod:`.commands`: the operators (the API, the CLI) create, stop, restart and list. Their writes
  are read-modify-write under optimistic concurrency (``version = :expected``), retried a few
  times on a conflict with the reconciler, with the fleet counter in the same transaction;
- :mod:`.fenced`: the container claims its generation, heartbeats, checkpoints and reports its
  exit, every write fenced by ``generation`` so a replaced container learns it at its next write.

Every write is one conditional request (or one transaction), so a racing writer is refused by
DynamoDB rather than overwritten. AWS errors become the domain exceptions of :mod:`.errors` only
in the ``except`` blocks around those writes (reading the old item or the transaction's
cancellation reasons). :mod:`.cursor` encodes the list's pagination cursor; :mod:`.layout` makes
every key (the registry is keyed by kind, so a container's requests stay in its kind's partition).
"""

from __future__ import annotations

from vigil.observers.registry.commands import MAX_PAGE, ObserverCommands, Page
from vigil.observers.registry.errors import (
    MAX_OPTIMISTIC_ATTEMPTS,
    Fenced,
    FleetFull,
    GivenUp,
    InvalidCursor,
    ObserverExists,
    ObserverNotFound,
    PlacedElsewhere,
    RegistryError,
    StopRequested,
    VersionConflict,
)
from vigil.observers.registry.fenced import FencedWrites
from vigil.observers.registry.layout import Layout, RegistryRef

__all__ = [
    "MAX_OPTIMISTIC_ATTEMPTS",
    "MAX_PAGE",
    "Fenced",
    "FencedWrites",
    "FleetFull",
    "GivenUp",
    "InvalidCursor",
    "Layout",
    "ObserverCommands",
    "ObserverExists",
    "ObserverNotFound",
    "ObserverRegistry",
    "Page",
    "PlacedElsewhere",
    "RegistryError",
    "RegistryRef",
    "StopRequested",
    "VersionConflict",
]


class ObserverRegistry(ObserverCommands, FencedWrites):
    """Both sides on one table, for what plays the operator and the container in one process:
    the local emulator, the demo, benchmarks and tests. Functions use one side each."""
