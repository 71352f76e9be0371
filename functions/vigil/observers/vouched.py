"""What an operator reads as a pooled observer's ``heartbeat_at``: when its host last vouched for
it. A pooled observer's own record is written when it is claimed (and when its state changes);
while it runs, its liveness is its host's heartbeat, whose ``running`` names each child and its
generation. So the observer's heartbeat shown is the later of its record's and its host's last
beat that named this very generation (a beat naming another generation, or none, vouches for
nothing). Dedicated observers beat on their own record: shown as they are."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from vigil.observers.host_fleet.model import Host
from vigil.observers.model import Observer


def vouched(observer: Observer, host: Host | None) -> Observer:
    """``observer`` with the heartbeat its host gave it (see the module)."""
    if host is None or host.heartbeat_at is None or observer.host != host.host_id:
        return observer
    if not host.runs(observer.name, observer.generation):
        return observer
    if observer.heartbeat_at is not None and observer.heartbeat_at >= host.heartbeat_at:
        return observer
    return replace(observer, heartbeat_at=host.heartbeat_at)


def as_seen(observers: Iterable[Observer], host: Callable[[str], Host | None]) -> list[Observer]:
    """Each observer as operators see it, reading each pooled observer's host once."""
    hosts: dict[str, Host | None] = {}
    seen = []
    for observer in observers:
        if observer.host is not None and observer.host not in hosts:
            hosts[observer.host] = host(observer.host)
        seen.append(vouched(observer, hosts.get(observer.host) if observer.host else None))
    return seen
