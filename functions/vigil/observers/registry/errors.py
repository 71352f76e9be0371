"""The registry's domain errors: AWS error codes become these in the adapters, and the API maps
each to an HTTP answer in one table (:mod:`vigil.observers.api`)."""

from __future__ import annotations

from typing import Any

MAX_OPTIMISTIC_ATTEMPTS = 5


class RegistryError(Exception):
    """Base of the registry's domain errors."""


class ObserverExists(RegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(f"an observer named {name!r} already exists")
        self.name = name


class ObserverNotFound(RegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no observer named {name!r}")
        self.name = name


class FleetFull(RegistryError):
    def __init__(self, limit: int, active: int | None) -> None:
        super().__init__(
            f"the fleet is at its maximum of {limit} running observers"
            + (f" ({active} active)" if active is not None else "")
        )
        self.limit = limit
        self.active = active


class Fenced(RegistryError):
    """The container's generation is no longer the observer's current one: it was replaced."""

    def __init__(self, name: str, generation: int, current: int | None) -> None:
        super().__init__(
            f"observer {name!r} generation {generation} was replaced"
            + (f" by generation {current}" if current is not None else " (record gone)")
        )
        self.name = name
        self.generation = generation
        self.current = current


class GivenUp(Fenced):
    """The generation is still current but the reconciler gave up on it before it claimed
    (FAILED, a backoff, a stop): a late container must not bring it back to RUNNING."""

    def __init__(self, name: str, generation: int, status: str) -> None:
        super().__init__(name, generation, generation)
        self.args = (
            f"observer {name!r} generation {generation} was given up before it claimed "
            f"(status {status})",
        )
        self.status = status


class PlacedElsewhere(Fenced):
    """The generation is current but the record places it on another host (or none): a pooled
    host must not run it."""

    def __init__(self, name: str, generation: int, host: str, current: Any) -> None:
        super().__init__(name, generation, generation)
        self.args = (
            f"observer {name!r} generation {generation} is placed on {current!r}, not {host!r}",
        )
        self.host = host


class StopRequested(RegistryError):
    """A container's write was refused because the observer's desired state is STOPPED."""

    def __init__(self, name: str, seen: dict[str, Any] | None = None) -> None:
        super().__init__(f"observer {name!r} was asked to stop")
        self.name = name
        self.seen = seen
        """The record the refused write saw."""


class VersionConflict(RegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"observer {name!r} kept changing under {MAX_OPTIMISTIC_ATTEMPTS} attempts; retry"
        )
        self.name = name


class InvalidCursor(RegistryError):
    def __init__(self) -> None:
        super().__init__("the pagination cursor is not one this API returned")
