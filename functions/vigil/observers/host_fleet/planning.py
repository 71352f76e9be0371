"""What the manager must do with a kind's hosts: pure functions of the hosts, ECS's task list,
the waiting observers and time, returning a :class:`HostPlan` (tested without AWS).

Rules:

* **Placement** (:func:`choose_host`): the least-loaded accepting (STARTING or RUNNING) host of the
  kind with a free slot, a started one (RunTask succeeded) before one that has not started;
  ties go to a RUNNING host, then the smaller host id. It is *sticky*: an
  observer already on an accepting host with room stays there (a restart reuses its slot), and
  nothing moves an observer between passes except its host being lost, drained or replaced.
* **Dead host** (:func:`host_dead`): no heartbeat for 3 intervals (a STARTING host: none within the
  start timeout), or its task is no longer among the cluster's running tasks (not for a DRAINING
  host: a task ECS is stopping is no longer listed while it still hands its children over). A
  task ECS has just been told to stop leaves the listing at once while its container runs on
  (SIGTERM): such a host is about to announce DRAINING, so an unlisted task counts as gone only
  once ECS describes it as ended (:func:`task_ended`); one still stopping counts as running.
  (Its ECS STOPPED event says the same at once; the event pass acts on it.)
* **Headroom**: keep at least ``headroom`` free slots per kind beyond the observers waiting for one;
  start ``ceil(shortfall / K)`` hosts when below (a kind without observers keeps no host). **Scale-in**: when one host fewer would still
  leave the headroom (``free - K >= headroom``, nobody waiting), drain the emptiest RUNNING host,
  one per kind per pass, so the fleet shrinks gradually and never below what a failover needs.
* **Drain**: a DRAINING host hands every observer over; once it runs none, its task is stopped and
  it is STOPPED. A host that drained itself (SIGTERM) is STOPPED too once no observer is assigned
  to it any more (each one placed elsewhere forgets its old host), even when its task is already
  gone or silent: that is the drain's end, not a loss.
* **Unfinished** (:func:`host_unfinished`): a LOST or STOPPED host not yet ``evacuated`` that still
  names observers or whose task is still listed: a loss or a drain an error interrupted. The next
  pass finishes it; a finished host costs nothing (no observer read).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from vigil.contract.hosts import LIVE_HOST_STATUSES as LIVE
from vigil.contract.hosts import HostStatus
from vigil.observers.decisions import Settings, TaskState
from vigil.observers.host_fleet.model import Host
from vigil.observers.kind_options import KindOptions


def host_dead(
    host: Host, running_tasks: Collection[str] | None, now: datetime, settings: Settings
) -> str | None:
    """Why a live host is dead, or None while it is alive (or already LOST/STOPPED)."""
    if host.status not in (HostStatus.STARTING, HostStatus.RUNNING, HostStatus.DRAINING):
        return None
    if (
        running_tasks is not None
        and host.task_arn
        and host.task_arn not in running_tasks
        and host.status is not HostStatus.DRAINING
    ):
        # A DRAINING host's task leaves ListTasks (desiredStatus RUNNING) as soon as ECS is told
        # to stop it (Spot, StopTask, a deploy), while its container still runs and hands its
        # children over for up to the stop timeout: only its silence or its STOPPED event ends it.
        return f"task {host.task_arn} is no longer running"
    if host.heartbeat_at is not None:
        return _silent(host, now, settings)
    # From RunTask's success (older items: from the item's creation), not the item's creation:
    # after a RunTask outage longer than the timeout the task that finally starts needs its own.
    started = host.task_started_at or host.created_at
    if host.task_arn and now - started > settings.start_timeout:
        return f"no heartbeat within {int(settings.start_timeout.total_seconds())} s of its start"
    return None


CONTAINER_ENDED = frozenset({"EssentialContainerExited", "TaskFailedToStart"})
"""ECS ``stopCode`` values that mean the task's container is gone, not merely asked to stop."""


def task_ended(task: TaskState) -> bool:
    """Whether a host's task, as ECS describes it, no longer runs its container: STOPPED or
    unknown, or stopping because its container ended (ECS sets ``stopCode`` as it starts to stop
    a task; container exit codes are no sign: moto reports 0 for a running one). A task ECS was
    only told to stop (StopTask, a Spot interruption, a deploy: ``UserInitiated``,
    ``SpotInterruption``, ...) has not: its host got SIGTERM and drains, and ECS kills it at the
    stop timeout (at most 120 s), STOPPED from then on."""
    return task.stopped or task.stop_code in CONTAINER_ENDED


def beat_looks_off(host: Host, now: datetime, settings: Settings) -> bool:
    """Whether the host's last heartbeat value is more than one interval off the reconciler's
    clock (either way): it missed a beat, or its clock is off. Only then does the reconciler
    watch it on its own clock (:func:`to_witness`)."""
    if host.heartbeat_at is None:
        return False
    return abs(now - host.heartbeat_at) > settings.heartbeat_interval


def to_witness(host: Host, now: datetime, settings: Settings) -> bool:
    """A live host whose heartbeat looks off and whose value the reconciler has not noted yet:
    the pass notes it (``beat_seen``, one write; none on a healthy fleet in time)."""
    return (
        host.status in (HostStatus.STARTING, HostStatus.RUNNING, HostStatus.DRAINING)
        and beat_looks_off(host, now, settings)
        and (host.beat_seen is None or host.beat_seen.heartbeat_at != host.heartbeat_at)
    )


def _silent(host: Host, now: datetime, settings: Settings) -> str | None:
    """Dead when its heartbeat value stayed the same for ``stale_after`` less one interval on
    the reconciler's own clock, after it first looked one interval old: the host's clock is
    trusted for that one interval only, so a host whose clock is minutes off is judged by
    whether its heartbeat *changes*, never churned while it beats, and still lost (a pass
    later at most) when it stops."""
    if not beat_looks_off(host, now, settings):
        return None
    seen = host.beat_seen
    if seen is None or seen.heartbeat_at != host.heartbeat_at:
        return None  # not watched yet: this pass notes it
    unchanged = now - seen.at
    if unchanged >= settings.stale_after - settings.heartbeat_interval:
        total = int((unchanged + settings.heartbeat_interval).total_seconds())
        return f"no heartbeat for over {total} s (on the reconciler's clock)"
    return None


def host_unfinished(host: Host, running_tasks: Collection[str] | None) -> bool:
    """Whether a LOST or STOPPED host still has work left: observers to move, a task to stop,
    or only its ``evacuated`` mark (which takes it out of the passes' live-hosts index)."""
    return host.status in (HostStatus.LOST, HostStatus.STOPPED) and not host.evacuated


def leaving_hosts(hosts: Iterable[Host]) -> set[str]:
    """Observers a DRAINING host still has (assigned, or running at its last heartbeat) that no
    accepting host holds yet: each will want a slot once. One already placed elsewhere has its
    slot there (counting it again would start a spare host)."""
    hosts = list(hosts)
    placed = {name for h in hosts if h.accepting for name in h.assigned}
    return {
        name
        for h in hosts
        if h.status is HostStatus.DRAINING
        for name in (*h.assigned, *h.running)
        if name not in placed
    }


def not_started_on_draining(hosts: Iterable[Host]) -> list[str]:
    """Observers assigned to a DRAINING host that has not started them (it never will: a host
    shutting down starts nothing): the pass reads and places them elsewhere at once. Empty on a
    healthy fleet and on a drain the manager began (it hands every observer over first)."""
    return sorted(
        name
        for h in hosts
        if h.status is HostStatus.DRAINING
        for name, generation in h.assigned.items()
        if not h.runs(name, generation)
    )


def not_running(hosts: Iterable[Host]) -> list[str]:
    """Observers a live host that heartbeats holds at a generation it does not run: just placed
    (its next beat lists them), backing off, ended, or gone without an exit report (a lost
    report: only reading the record tells). The pass reads and decides each; a healthy fleet
    has none, so its pass still reads no observer."""
    return sorted(
        {
            name
            for h in hosts
            if h.status in LIVE and h.heartbeat_at is not None
            for name, generation in h.assigned.items()
            if not h.runs(name, generation)
        }
    )


def handovers(hosts: Iterable[Host]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(finished, unplaced): host id -> names of its hand-overs whose child no longer runs there,
    and whose next generation runs on another live host (``finished``: the entry is only noise
    now; clearing it lets the host take the observer again and keeps the map as small as the
    moves in flight), or that no live host holds yet (``unplaced``: the record says whether the
    exit report moved it, or was lost). A child still stopping is neither: in flight."""
    hosts = list(hosts)
    live = [h for h in hosts if h.status in LIVE]
    holder = {name: (h, g) for h in live for name, g in h.assigned.items()}
    finished: dict[str, list[str]] = {}
    unplaced: dict[str, list[str]] = {}
    for h in live:
        for name, generation in sorted(h.handover.items()):
            if h.runs(name, generation):
                continue
            held = holder.get(name)
            if held is None:
                unplaced.setdefault(h.host_id, []).append(name)
            elif held[0].host_id != h.host_id and held[0].runs(name, held[1]):
                finished.setdefault(h.host_id, []).append(name)
    return finished, unplaced


def stuck_starting(
    hosts: Iterable[Host], kinds: Iterable[str], now: datetime, settings: Settings
) -> dict[str, int]:
    """Kind -> hosts STARTING for longer than the start timeout (zeros included, so the gauge
    has no gaps): a kind that cannot get its hosts started. Counted from the item's creation
    while RunTask fails, from RunTask's success once the task started."""
    stuck = dict.fromkeys(kinds, 0)
    for host in hosts:
        if (
            host.kind in stuck
            and host.status is HostStatus.STARTING
            and now - (host.task_started_at or host.created_at) >= settings.start_timeout
        ):
            stuck[host.kind] += 1
    return stuck


def choose_host(
    hosts: Iterable[Host], kind: str, prefer: str | None = None, name: str | None = None
) -> Host | None:
    """Where one observer of ``kind`` goes: its current host if it still takes it (its own slot
    there counts as free: a restart stays in place and the slot is reused, not leaked), else the
    least-loaded accepting host with a free slot; None when every host is full. A host that
    handed ``name`` over (a rebalance or a rollout moved it) does not take it back. A host that
    has not started (its RunTask refused) is chosen only when no started host can take it: an
    observer there never runs, so one placed there moves at its next retry."""
    candidates = [
        h
        for h in hosts
        if h.kind == kind
        and h.accepting
        and name not in h.handover
        and (h.free > 0 or (name is not None and name in h.assigned))
    ]
    started = [h for h in candidates if h.started]
    candidates = started or candidates  # one that cannot start only when no started one can take it
    for host in candidates:
        if host.host_id == prefer:
            return host
    candidates = [h for h in candidates if h.free > 0]
    if not candidates:
        return None
    return min(candidates, key=lambda h: (h.used, h.status is not HostStatus.RUNNING, h.host_id))


@dataclass(frozen=True)
class HostPlan:
    lost: tuple[tuple[str, str], ...] = ()
    """(host id, why) of live hosts to mark LOST; their observers are then moved."""
    promote: tuple[str, ...] = ()
    """STARTING hosts that heartbeat: RUNNING."""
    retry_run: tuple[str, ...] = ()
    """STARTING hosts whose RunTask has not succeeded yet and whose backoff is over: RunTask
    again (same clientToken)."""
    start: Mapping[str, int] = field(default_factory=dict)
    """kind -> how many new hosts to start."""
    drain: tuple[str, ...] = ()
    """Surplus hosts to mark DRAINING (their observers are handed over)."""
    finish: tuple[str, ...] = ()
    """DRAINING hosts that run nothing any more: StopTask, then STOPPED."""
    evacuate: tuple[str, ...] = ()
    """LOST or STOPPED hosts whose loss or drain is unfinished (:func:`host_unfinished`)."""
    witness: tuple[str, ...] = ()
    """Live hosts whose heartbeat looks off and is not noted yet (:func:`to_witness`)."""


def plan_hosts(
    hosts: Iterable[Host],
    running_tasks: Collection[str] | None,
    waiting: Mapping[str, int],
    placements: Mapping[str, KindOptions],
    now: datetime,
    settings: Settings,
) -> HostPlan:
    """The whole fleet's host plan for one pass (``waiting``: kind -> observers wanting a slot)."""
    all_hosts = sorted(hosts, key=lambda h: h.host_id)
    lost_hosts: list[tuple[str, str]] = []
    finish_hosts: list[str] = []
    for h in all_hosts:
        why = host_dead(h, running_tasks, now, settings)
        unlisted = (
            running_tasks is not None and bool(h.task_arn) and h.task_arn not in running_tasks
        )
        if (
            h.status is HostStatus.DRAINING
            and not h.assigned
            and (why or unlisted or not h.running)
        ):
            # Drained: every observer left it. One that drained itself (SIGTERM) exits without
            # a last heartbeat, so its ``running`` stays as it was: its end is a drain's end.
            finish_hosts.append(h.host_id)
        elif why is not None:
            lost_hosts.append((h.host_id, why))
    lost, finish = tuple(lost_hosts), tuple(finish_hosts)
    gone = {host_id for host_id, _ in lost} | set(finish)
    alive = [h for h in all_hosts if h.host_id not in gone]
    promote = tuple(
        h.host_id for h in alive if h.status is HostStatus.STARTING and h.heartbeat_at is not None
    )
    start: dict[str, int] = {}
    drain: list[str] = []
    for kind, placement in sorted(placements.items()):
        if not placement.pooled:
            continue
        mine = [h for h in alive if h.kind == kind and h.accepting]
        # Observers still on a draining host will want a slot soon: count them as waiting, so
        # one drain at a time completes before the next is judged.
        leaving = len(leaving_hosts([h for h in alive if h.kind == kind]))
        more, surplus = _capacity(mine, waiting.get(kind, 0) + leaving, placement)
        if more:
            start[kind] = more
        if surplus:
            drain.append(surplus)
    retry_run = tuple(
        h.host_id
        for h in alive
        if h.status is HostStatus.STARTING
        and not h.started
        and h.host_id not in drain
        and (h.retry_at is None or now >= h.retry_at)
    )
    evacuate = tuple(h.host_id for h in all_hosts if host_unfinished(h, running_tasks))
    witness = tuple(h.host_id for h in alive if to_witness(h, now, settings))
    return HostPlan(lost, promote, retry_run, start, tuple(drain), finish, evacuate, witness)


def _capacity(hosts: list[Host], waiting: int, placement: KindOptions) -> tuple[int, str | None]:
    """(hosts to start, host to drain) for one kind's accepting hosts.

    A kind with no observer at all keeps no host (headroom serves failovers; the first observer
    starts a host itself), so an unused pooled kind costs nothing.

    A host that has not started (RunTask refused, retried with backoff) counts against starting
    more (another RunTask would meet the same refusal) but is not headroom: only started hosts'
    free slots hold it, its observers want one of them, and once they hold the headroom without
    it, it is given up (empty first: its observers move to started hosts at their next retry).
    """
    running = [h for h in hosts if h.status is HostStatus.RUNNING]
    unstarted = [h for h in hosts if not h.started]
    if not waiting and not any(h.used for h in hosts):
        return 0, min(running, key=lambda h: h.host_id).host_id if running else None
    free = sum(h.free for h in hosts)
    needed = placement.headroom + waiting
    if free < needed:
        return math.ceil((needed - free) / placement.slots_per_host), None
    ready = sum(h.free for h in hosts if h.started)
    wanting = needed + sum(h.used for h in unstarted)
    spare = [h for h in unstarted if not h.used]
    if spare and ready >= wanting:
        return 0, min(spare, key=lambda h: h.host_id).host_id
    if wanting > placement.headroom or ready - placement.slots_per_host < placement.headroom:
        return 0, None
    if not running or any(h.status is HostStatus.STARTING for h in hosts):
        # Hosts still starting may be the surplus: let them settle rather than drain a full one.
        return 0, None
    emptiest = min(running, key=lambda h: (h.used, h.host_id))
    return 0, emptiest.host_id
