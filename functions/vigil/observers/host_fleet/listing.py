"""``GET /hosts``: the pooled hosts as operators read them (the API's and the CLI's shape)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from vigil.contract.hosts import LIVE_HOST_STATUSES
from vigil.observers.host_fleet.model import Host
from vigil.observers.kind_options import KindOptions
from vigil.observers.model import NAME_PATTERN


class UnknownHostKind(Exception):
    """A kind this fleet does not have; the message names those it has, and which have hosts."""

    def __init__(self, kind: str, kinds: Mapping[str, bool], problem: str = "") -> None:
        named = ", ".join(
            f"{k} ({'pooled' if pooled else 'dedicated'})" for k, pooled in sorted(kinds.items())
        )
        super().__init__(f"kind {kind!r} {problem or 'is unknown'}: this fleet's kinds are {named}")


class InvalidHostKind(UnknownHostKind):
    """Not even a kind name (so certainly not one of the fleet's)."""

    def __init__(self, kind: str, kinds: Mapping[str, bool]) -> None:
        super().__init__(kind, kinds, "is not a kind name ([a-z0-9-]{1,63})")


class NotPooled(Exception):
    def __init__(self, kind: str) -> None:
        super().__init__(f"kind {kind!r} is dedicated (one task per observer): it has no hosts")


def revision(task_definition: str | None) -> int | None:
    """The revision at the end of a task definition ARN (``...:task-definition/family:7``)."""
    if not task_definition or ":" not in task_definition:
        return None
    tail = task_definition.rsplit(":", 1)[1]
    return int(tail) if tail.isdigit() else None


def host_json(host: Host, now: datetime) -> dict[str, Any]:
    """A LOST or STOPPED host runs nothing and takes nothing: it shows no observers and no slots
    used or free, though its item keeps its last ``assigned`` map (the manager moves observers
    by their own records, which say where each one is now)."""
    age = (now - host.heartbeat_at).total_seconds() if host.heartbeat_at else None
    live = host.status in LIVE_HOST_STATUSES
    return {
        "id": host.host_id,
        "kind": host.kind,
        "status": host.status.value,
        "task_arn": host.task_arn,
        "task_definition": host.task_definition,
        "revision": revision(host.task_definition),
        "slots": host.slots,
        "used": host.used if live else 0,
        "free": host.free if live else 0,
        "heartbeat_age_seconds": round(age, 1) if age is not None else None,
        "observers": dict(sorted(host.assigned.items())) if live else {},
        "status_reason": host.status_reason,
    }


def list_hosts(
    hosts: Iterable[Host],
    placements: Mapping[str, KindOptions],
    kinds: Iterable[str],
    kind: str | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """Hosts in id order, of one kind if asked (an unknown or a dedicated kind is refused)."""
    if kind is not None:
        known = {k: k in placements and placements[k].pooled for k in kinds}
        if kind not in known:
            if not NAME_PATTERN.fullmatch(kind):
                raise InvalidHostKind(kind, known)
            raise UnknownHostKind(kind, known)
        placement = placements.get(kind)
        if placement is None or not placement.pooled:
            raise NotPooled(kind)
    chosen = [h for h in hosts if kind is None or h.kind == kind]
    return [host_json(h, now) for h in sorted(chosen, key=lambda h: h.host_id)]
