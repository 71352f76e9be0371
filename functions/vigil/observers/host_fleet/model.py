"""A host item as the reconciler reads it, and a pooled kind's placement settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from vigil.clock import from_epoch_ms
from vigil.contract.hosts import HOSTS_KEY, Capacity, HostStatus
from vigil.contract.observers import HOST_REGISTRY_ATTRIBUTE

ACCEPTING = (HostStatus.STARTING, HostStatus.RUNNING)
"""Statuses that take new observers (a DRAINING host takes none)."""


@dataclass(frozen=True)
class BeatSeen:
    """The reconciler's own observation of a heartbeat value (``heartbeat_at``, on the host's
    clock) and when it first saw it (``at``, on its own clock)."""

    heartbeat_at: datetime
    at: datetime


@dataclass(frozen=True)
class Host:
    host_id: str
    kind: str
    status: HostStatus
    slots: int
    created_at: datetime
    version: int = 1
    assigned: dict[str, int] = field(default_factory=dict)
    running: dict[str, Any] = field(default_factory=dict)
    handover: dict[str, int] = field(default_factory=dict)
    task_arn: str | None = None
    task_definition: str | None = None
    task_started_at: datetime | None = None
    """When RunTask's success was recorded (the reconciler's clock): the start timeout's origin."""
    heartbeat_at: datetime | None = None
    status_reason: str | None = None
    start_attempts: int = 0
    retry_at: datetime | None = None
    """After a failed RunTask: not tried again before then (backoff, not a RunTask every pass)."""
    on_demand: bool = False
    """A Spot kind's on-demand fallback got no clear answer (it may have started the host's task):
    every retry asks on-demand under the fallback's token, never Spot again (a second task)."""
    beat_seen: BeatSeen | None = None
    """A heartbeat that looked off by the reconciler's clock, and when the reconciler saw it."""
    evacuated: bool = False
    """LOST or STOPPED, its task stopped and every observer it had moved: nothing left to do."""
    registry: str | None = None
    """How the registry its children write is keyed (``HOST_REGISTRY_ATTRIBUTE``): ``kind`` for a
    host the reconciler started since the registry is keyed by kind, None for an older one."""

    @property
    def used(self) -> int:
        return len(self.assigned)

    @property
    def free(self) -> int:
        return max(self.slots - self.used, 0)

    @property
    def started(self) -> bool:
        """RunTask started its task (a host without one, its RunTask refused, runs nothing)."""
        return self.task_arn is not None

    @property
    def accepting(self) -> bool:
        return self.status in ACCEPTING

    def runs(self, name: str, generation: int) -> bool:
        """Whether the host's last heartbeat said it runs this generation of ``name``."""
        entry = self.running.get(name)
        return isinstance(entry, Mapping) and int(entry.get("generation", -1)) == generation


def host_from_item(item: Mapping[str, Any]) -> Host:
    return Host(
        host_id=str(item[HOSTS_KEY]),
        kind=str(item.get("kind", "")),
        status=HostStatus(item.get("status", HostStatus.STARTING)),
        slots=int(item.get("slots", 1)),
        created_at=from_epoch_ms(int(item.get("created_at_ms", 0))),
        version=int(item.get("version", 1)),
        assigned={k: int(v) for k, v in (item.get("assigned") or {}).items()},
        running=dict(item.get("running") or {}),
        handover={k: int(v) for k, v in (item.get("handover") or {}).items()},
        task_arn=item.get("task_arn"),
        task_definition=item.get("task_definition"),
        task_started_at=from_epoch_ms(int(item["task_started_at_ms"]))
        if item.get("task_started_at_ms") is not None
        else None,
        heartbeat_at=from_epoch_ms(int(item["heartbeat_at_ms"]))
        if item.get("heartbeat_at_ms") is not None
        else None,
        status_reason=item.get("status_reason"),
        start_attempts=int(item.get("start_attempts", 0)),
        retry_at=from_epoch_ms(int(item["retry_at_ms"]))
        if item.get("retry_at_ms") is not None
        else None,
        beat_seen=_beat_seen(item.get("beat_seen")),
        evacuated=bool(item.get("evacuated", False)),
        on_demand=item.get("capacity") == Capacity.ON_DEMAND.value,
        registry=item.get(HOST_REGISTRY_ATTRIBUTE),
    )


def _beat_seen(value: Any) -> BeatSeen | None:
    if not isinstance(value, Mapping):
        return None
    return BeatSeen(
        heartbeat_at=from_epoch_ms(int(value["heartbeat_at_ms"])),
        at=from_epoch_ms(int(value["at_ms"])),
    )
