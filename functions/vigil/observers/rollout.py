"""Rollouts and rebalances: which observers move now. Pure functions of plain data.

A deploy that changes a kind's task definition makes every observer of the kind started on another
revision *outdated*. A rollout moves them onto the current revision with hand-overs (the old copy
is told to stop and checkpoints; the next generation starts on the new revision and resumes from
the checkpoint), never more than ``max_unavailable`` percent of the kind's observers at a time
(rounded up, at least one)::

    pass 1: [old old old old old ...]  hand over <= budget - in flight
    pass 2: [new new old old old ...]  the moved ones are back; the next ones go
    ...     until none is outdated (a pass with nothing to roll costs nothing: it reads no more)

Dedicated kinds (the reconciler's resync calls it on the fleet index it already read)::

    names = plan_dedicated(current_revision, max_unavailable, members)
    # then, for each name: decisions.hand_over(record, current_revision) -> a Plan to carry out

Pooled kinds (for the manager; hosts as plain data, read from its hosts scan)::

    step = plan_pooled(current_revision, max_unavailable, slots_per_host, hosts)
    # step.stop: old hosts now empty -> StopTask; step.drain: old hosts to mark DRAINING (they
    # take no new observers); step.move: (host_id, n) -> hand n of that host's observers over to
    # current-revision hosts; step.start_hosts: how many current-revision hosts to start so the
    # next wave has room. ``HostView.starting`` (observers assigned to a host that it does not yet
    # report running) and ``HostView.leaving`` (handed over, held by no host yet) are what is
    # "in flight".

``vigil observers rebalance KIND`` (a pooled kind)::

    moves = plan_rebalance(hosts, max_moves)   # [(from_host, to_host), ...]

Observers whose record names no task definition (started before the reconciler recorded it) are
not outdated as far as a rollout can tell: they move onto the current revision at their next start.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass

from vigil.contract.hosts import LIVE_HOST_STATUSES, HostStatus
from vigil.contract.observers import Desired, Status

LEGACY_REVISION = "(started before the registry was keyed by kind)"
"""The task definition a rollout sees for a generation (or a host) whose container writes the
name-keyed registry: never the current one, so the rollout hands it over."""
IN_FLIGHT = (Status.PENDING, Status.STARTING, Status.STOPPING)
"""A dedicated observer wanted running but not RUNNING is unavailable: a hand-over in flight, a
start, a backoff. FAILED and STOPPED ones are not counted (nothing will bring them back by itself,
so counting them would stop a rollout for good)."""


def budget(max_unavailable: int, observers: int) -> int:
    """How many of ``observers`` may be unavailable at once: the percentage, rounded up, >= 1."""
    return max(1, math.ceil(max_unavailable * observers / 100))


# Dedicated ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """One dedicated observer of the kind, as the fleet index has it."""

    name: str
    status: Status
    desired: Desired
    task_definition: str | None
    """What its current generation was started with (None: not recorded)."""


def plan_dedicated(
    current: str, max_unavailable: int, members: Iterable[Member]
) -> tuple[str, ...]:
    """The outdated RUNNING observers to hand over now, in name order, within the budget."""
    active = [
        m
        for m in members
        if m.desired is Desired.RUNNING and m.status not in (Status.FAILED, Status.STOPPED)
    ]
    in_flight = sum(1 for m in active if m.status in IN_FLIGHT)
    room = budget(max_unavailable, len(active)) - in_flight
    if room <= 0:
        return ()
    outdated = sorted(
        m.name
        for m in active
        if m.status is Status.RUNNING
        and m.task_definition is not None
        and m.task_definition != current
    )
    return tuple(outdated[:room])


# Pooled ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostView:
    """One host of a pooled kind, as the hosts table has it."""

    host_id: str
    kind: str
    task_definition: str
    status: HostStatus
    assigned: int
    """Observers placed on it (``len(assigned)``)."""
    slots: int
    starting: int = 0
    """Of those, how many it does not report running yet (a start or a hand-over in flight)."""
    leaving: int = 0
    """Observers it handed over that no host holds yet (the old child still stopping, or its
    exit report not yet acted on): unavailable too, though in no ``assigned`` map."""

    @property
    def free(self) -> int:
        return max(0, self.slots - self.assigned)


@dataclass(frozen=True)
class PooledStep:
    """One pass of a pooled rollout; empty when nothing is to roll or the budget is used."""

    start_hosts: int = 0
    drain: tuple[str, ...] = ()
    move: tuple[tuple[str, int], ...] = ()
    stop: tuple[str, ...] = ()

    @property
    def moves(self) -> int:
        return sum(n for _, n in self.move)

    @property
    def empty(self) -> bool:
        return not (self.start_hosts or self.drain or self.move or self.stop)


def plan_pooled(
    current: str, max_unavailable: int, slots_per_host: int, hosts: Iterable[HostView]
) -> PooledStep:
    """Start current-revision hosts, drain old ones, hand over within the budget, stop the empty.

    Old hosts are emptied fewest-observers first (DRAINING ones before others), so each wave frees
    whole hosts; a host is drained only when observers are moved off it in this pass, so old hosts
    with room keep taking failovers until their turn.
    """
    live = [h for h in hosts if h.status in LIVE_HOST_STATUSES]
    old = [h for h in live if h.task_definition != current]
    if not old:
        return PooledStep()
    fresh = [
        h for h in live if h.task_definition == current and h.status is not HostStatus.DRAINING
    ]
    # Every observer not yet running on its new host counts against the budget: one handed
    # over whose old child is still stopping as much as one placed and not yet started.
    limit = budget(max_unavailable, sum(h.assigned + h.leaving for h in live))
    room = limit - sum(h.starting + h.leaving for h in live)
    ready = sum(h.free for h in fresh if h.status is HostStatus.RUNNING)
    coming = sum(h.free for h in fresh if h.status is HostStatus.STARTING)
    outdated = sum(h.assigned for h in old)
    stop = tuple(sorted(h.host_id for h in old if h.assigned == 0))
    wave = min(limit, outdated)
    missing = wave - ready - coming
    start_hosts = math.ceil(missing / max(1, slots_per_host)) if missing > 0 else 0
    left = max(0, min(room, outdated, ready))
    drain: list[str] = []
    move: list[tuple[str, int]] = []
    order = sorted(
        (h for h in old if h.assigned > h.starting),
        key=lambda h: (h.status is not HostStatus.DRAINING, h.assigned, h.host_id),
    )
    for host in order:
        if left == 0:
            break
        count = min(left, host.assigned - host.starting)
        move.append((host.host_id, count))
        if host.status is not HostStatus.DRAINING:
            drain.append(host.host_id)
        left -= count
    return PooledStep(start_hosts, tuple(drain), tuple(move), stop)


# Rebalance ---------------------------------------------------------------------------------------


def plan_rebalance(hosts: Iterable[HostView], max_moves: int) -> tuple[tuple[str, str], ...]:
    """Moves (from host, to host), one observer each, fullest to emptiest RUNNING host, until the
    spread of observers per host is at most one or ``max_moves`` are planned. Ties go to the
    smaller host id, so the same load always gives the same moves. Two heaps with lazy entries:
    O(moves * log hosts)."""
    load = {h.host_id: h.assigned for h in hosts if h.status is HostStatus.RUNNING}
    slots = {h.host_id: h.slots for h in hosts if h.status is HostStatus.RUNNING}
    fullest = [(-n, h) for h, n in load.items()]
    emptiest = [(n, h) for h, n in load.items() if n < slots[h]]
    heapq.heapify(fullest)
    heapq.heapify(emptiest)
    moves: list[tuple[str, str]] = []
    while len(moves) < max_moves:
        while fullest and -fullest[0][0] != load[fullest[0][1]]:
            heapq.heappop(fullest)  # stale entry
        while emptiest and (
            emptiest[0][0] != load[emptiest[0][1]] or load[emptiest[0][1]] >= slots[emptiest[0][1]]
        ):
            heapq.heappop(emptiest)
        if not fullest or not emptiest:
            break
        source, target = fullest[0][1], emptiest[0][1]
        if load[source] - load[target] <= 1:
            break
        load[source] -= 1
        load[target] += 1
        moves.append((source, target))
        heapq.heappush(fullest, (-load[source], source))
        heapq.heappush(fullest, (-load[target], target))
        heapq.heappush(emptiest, (load[source], source))
        if load[target] < slots[target]:
            heapq.heappush(emptiest, (load[target], target))
    return tuple(moves)
