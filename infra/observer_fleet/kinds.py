"""The kinds a fleet runs: ``ObserverKind`` (handler, task size, rollout, capacity, placement,
writes) and its synth-time validation, so a wrong size or a pooled parameter on a dedicated kind
fails ``cdk synth`` with the parameter's name instead of a deploy."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.errors import ConfigurationError
from infra.function import FUNCTIONS_DIR
from infra.handler_paths import validate_handler
from vigil.contract.hosts import (
    DEFAULT_MAX_UNAVAILABLE,
    PLACEMENT_CAPACITY,
    PLACEMENT_MAX_UNAVAILABLE,
    Capacity,
    Placement,
)

OWNER = "ObserverFleet"
"""The construct a ``ConfigurationError`` names: the user's, whichever module checks."""
KIND_NAME = re.compile(r"^[a-z0-9-]{1,63}$")
FARGATE_MEMORY: dict[int, range] = {
    256: range(512, 2049, 512),
    512: range(1024, 4097, 1024),
    1024: range(2048, 8193, 1024),
    2048: range(4096, 16385, 1024),
    4096: range(8192, 30721, 1024),
    8192: range(16384, 61441, 4096),
    16384: range(32768, 122881, 8192),
}
"""Fargate's valid CPU units -> memory (MiB) combinations (256 CPU also allows 512 MiB)."""


HOST_BASE_MEMORY_MIB = 256
"""Memory a pooled host's own process takes before any observer (Python, boto3, Powertools)."""


@dataclass(frozen=True)
class ObserverKind:
    """One kind of observer: its ``module.function`` under ``functions/``, its task size, how a
    deploy rolls it and the capacity it runs on.

    ``placement="pooled"`` runs up to ``slots_per_host`` observers in one task (a *host*); the
    task must hold them: ``slots_per_host * observer_memory_mib + HOST_BASE_MEMORY_MIB`` at most
    ``memory_mib``. ``headroom`` free slots are kept so a failover never waits for a task to start
    (default: half a host). The three are pooled-only: a dedicated kind refuses them.
    """

    handler: str
    """``module.function`` under ``functions/`` that runs one observer."""
    cpu: int = 256
    """Fargate CPU units of the kind's task (256-16384)."""
    memory_mib: int = 512
    """The task's memory: one Fargate offers with ``cpu``."""
    max_unavailable: int = DEFAULT_MAX_UNAVAILABLE
    """Percent (1-100) of the kind's observers a rollout hands over at once (rounded up, >= 1)."""
    capacity: str = Capacity.ON_DEMAND.value
    """``"on-demand"``, or ``"spot"``: Fargate Spot, falling back to on-demand when it has none."""
    placement: str = Placement.DEDICATED
    """``"dedicated"``: a task per observer; ``"pooled"``: up to ``slots_per_host`` per task."""
    slots_per_host: int | None = None
    """Pooled only: how many observers one host (task) runs."""
    observer_memory_mib: int | None = None
    """Pooled only: the memory one observer needs on its host."""
    headroom: int | None = None
    """Pooled only: free slots kept ready so a failover never waits for a task to start
    (default: half a host)."""
    writes: tuple[Any, ...] = ()
    """Tables, buckets, queues and buses the kind writes through ``ctx.fenced``: named in its
    containers' environment and granted on the kind's own task role (no other kind gets them)."""

    @property
    def pooled(self) -> bool:
        return self.placement == Placement.POOLED

    def options_json(self) -> dict[str, Any]:
        """This kind's entry of ``PLACEMENTS_ENV`` (validated first): read by
        ``vigil.observers.kind_options`` in the reconciler, the API and the containers."""
        options: dict[str, Any] = {
            "placement": str(Placement.DEDICATED),
            PLACEMENT_MAX_UNAVAILABLE: self.max_unavailable,
            PLACEMENT_CAPACITY: Capacity(self.capacity).value,
        }
        if self.pooled:
            slots = self.slots_per_host or 1
            options |= {
                "placement": str(Placement.POOLED),
                "slots_per_host": slots,
                "headroom": self.headroom if self.headroom is not None else slots // 2,
            }
        return options


def construct_suffix(kind: str) -> str:
    """``pooled-ticker`` -> ``PooledTicker``: a kind's part of its constructs' ids."""
    return "".join(part.capitalize() for part in kind.split("-"))


def kind_failing(parameter: str) -> Callable[[str, str], ConfigurationError]:
    """``check_writes``'s failure for one kind: the parameter is the kind's ``writes``."""
    return lambda _, problem: ConfigurationError(OWNER, parameter, problem)


def validate_kinds(kinds: dict[str, str | ObserverKind]) -> dict[str, ObserverKind]:
    """Every kind as an ``ObserverKind`` (a bare handler path is one with the defaults), each
    checked: its name, handler, Fargate size, rollout budget, capacity and placement."""
    if not isinstance(kinds, dict) or not kinds:
        raise ConfigurationError(OWNER, "kinds", "needs at least one kind")
    checked: dict[str, ObserverKind] = {}
    for kind, value in kinds.items():
        if not isinstance(kind, str) or not KIND_NAME.fullmatch(kind):
            raise ConfigurationError(OWNER, "kinds", f"kind {kind!r} must match [a-z0-9-]{{1,63}}")
        spec = ObserverKind(handler=value) if isinstance(value, str) else value
        if not isinstance(spec, ObserverKind):
            raise ConfigurationError(
                OWNER, f"kinds[{kind!r}]", "must be a 'module.function' or an ObserverKind"
            )
        problem = validate_handler(spec.handler, FUNCTIONS_DIR)
        if problem:
            raise ConfigurationError(OWNER, f"kinds[{kind!r}].handler", problem)
        allowed = FARGATE_MEMORY.get(spec.cpu)
        if allowed is None:
            raise ConfigurationError(
                OWNER, f"kinds[{kind!r}].cpu", f"{spec.cpu} is not one of {sorted(FARGATE_MEMORY)}"
            )
        if spec.memory_mib not in allowed:
            raise ConfigurationError(
                OWNER,
                f"kinds[{kind!r}].memory_mib",
                f"{spec.memory_mib} MiB is not valid with {spec.cpu} CPU units on Fargate "
                f"({allowed.start}-{allowed.stop - 1} MiB in steps of {allowed.step})",
            )
        _validate_rollout(kind, spec)
        _validate_placement(kind, spec)
        checked[kind] = spec
    return checked


def _validate_rollout(kind: str, spec: ObserverKind) -> None:
    percent = spec.max_unavailable
    if isinstance(percent, bool) or not isinstance(percent, int) or not 1 <= percent <= 100:
        raise ConfigurationError(
            OWNER, f"kinds[{kind!r}].max_unavailable", f"{percent!r} is not a percent in 1-100"
        )
    if spec.capacity not in set(Capacity):
        raise ConfigurationError(
            OWNER,
            f"kinds[{kind!r}].capacity",
            f"{spec.capacity!r} is not one of {[c.value for c in Capacity]}",
        )


def _validate_placement(kind: str, spec: ObserverKind) -> None:
    """K >= 1 that fits the task's memory at the stated per-observer memory; headroom >= 0."""
    where = f"kinds[{kind!r}]"
    if spec.placement not in tuple(Placement):
        raise ConfigurationError(
            OWNER, f"{where}.placement", f"{spec.placement!r} is not 'dedicated' or 'pooled'"
        )
    pooled_only = {
        "slots_per_host": spec.slots_per_host,
        "observer_memory_mib": spec.observer_memory_mib,
        "headroom": spec.headroom,
    }
    if not spec.pooled:
        for parameter, value in pooled_only.items():
            if value is not None:
                raise ConfigurationError(
                    OWNER, f"{where}.{parameter}", "applies only to placement='pooled'"
                )
        return
    slots = spec.slots_per_host
    if not isinstance(slots, int) or slots < 1:
        raise ConfigurationError(OWNER, f"{where}.slots_per_host", f"{slots!r} must be at least 1")
    per = spec.observer_memory_mib
    if not isinstance(per, int) or per < 1:
        raise ConfigurationError(
            OWNER, f"{where}.observer_memory_mib", f"{per!r} must be a positive number of MiB"
        )
    needed = slots * per + HOST_BASE_MEMORY_MIB
    if needed > spec.memory_mib:
        raise ConfigurationError(
            OWNER,
            f"{where}.slots_per_host",
            f"{slots} x {per} MiB + {HOST_BASE_MEMORY_MIB} MiB host base = {needed} MiB does not "
            f"fit memory_mib={spec.memory_mib}",
        )
    if spec.headroom is not None and (not isinstance(spec.headroom, int) or spec.headroom < 0):
        raise ConfigurationError(OWNER, f"{where}.headroom", f"{spec.headroom!r} must be >= 0")
