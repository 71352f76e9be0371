"""What the reconciler must do for one *pooled* observer: a pure function of its record, its host
and time, answering with the same :class:`~vigil.observers.decisions.Plan` as a dedicated one.

The host stands in for the task: its heartbeat is the observer's liveness (pooled observers write
none of their own), its ``HOST_EXIT`` report is the task's STOPPED event (so today's restart,
backoff and FAILED rules apply unchanged, through :func:`~vigil.observers.decisions.decide`), and
its loss moves the observer. In the plan, ``StopTask`` means "take it off its host" and
``StartTask``/``RetryStart`` mean "place it" (the executor reads them so for a pooled kind).

* exit report of the current generation -> decided as a stopped task with that exit code;
* host lost (LOST, STOPPED, gone, silent for 3 intervals) -> moved: next generation, another
  host, from the checkpoint; not counted as the observer's failure (its code did not fail);
* placed on a live host -> nothing, unless a stop or restart is asked for, or the placement is
  still unconfirmed past its retry time (placed again, same generation);
* STARTING on a DRAINING host that has not started it -> placed elsewhere at once (same
  generation): a host shutting down starts nothing, so waiting for it would only lose time;
* RUNNING, still on a live host whose heartbeat no longer lists it, that heartbeat more than one
  interval after the child's claim (so it cannot predate the child) -> the child is gone and its
  one exit report was lost: decided as a stopped task of unknown exit (a crash; a stop the host
  was asked for, a hand-over, counts no failure), so the next generation starts;
* otherwise (PENDING, FAILED, STOPPED) -> exactly as a dedicated observer; one that has ended
  (FAILED, STOPPED) is also taken off the host still holding it, so its slot is free and nothing
  counts it as wanted.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from vigil.contract.hosts import LIVE_HOST_STATUSES, HostStatus
from vigil.contract.observers import Desired, Status
from vigil.observers import decisions as d
from vigil.observers.host_fleet.model import Host
from vigil.observers.host_fleet.planning import host_dead
from vigil.observers.model import LastExit, Observer

HOST_LOST = "HostLost"
"""``stop_code`` of a pooled observer's last exit when its host was lost."""
UNASSIGNED = "UserInitiated"
LIVE = (Status.STARTING, Status.RUNNING, Status.STOPPING)


def host_task_arn(record: d.Record, host: Host | None) -> str | None:
    """What stands for the observer's task: its host's task (or the host's id while unknown)."""
    placed = record.pooled.host
    if placed is None:
        return None
    if host is not None and host.host_id == placed and host.task_arn:
        return host.task_arn
    return record.observer.task_arn or f"host/{placed}"


def decide_pooled(
    record: d.Record, host: Host | None, now: datetime, settings: d.Settings
) -> d.Plan:
    return _off_host_when_ended(record, host, _decide(record, host, now, settings))


def _decide(record: d.Record, host: Host | None, now: datetime, settings: d.Settings) -> d.Plan:
    observer = record.observer
    arn = host_task_arn(record, host)
    view = d.Record(replace(observer, task_arn=arn), record.tracking, record.pooled)
    if observer.status not in LIVE:
        return d.decide(
            replace(view, observer=replace(view.observer, task_arn=None)), None, now, settings
        )
    if arn is None:  # STARTING, not placed yet (no free slot, or the host write failed)
        if observer.next_start_at and now < observer.next_start_at:
            return d.only(d.Ignore("waiting for a slot"))
        return d.only(d.RetryStart(observer.generation))
    exited = record.pooled.exit_of(observer.generation)
    if exited is not None:
        return d.decide(view, _stopped(arn, exited, record, now), now, settings)
    why = _lost(record, host, now, settings)
    if why is not None:
        gone = d.TaskState(arn=arn, last_status=d.STOPPED, stop_code=HOST_LOST, stopped_reason=why)
        if observer.desired is Desired.STOPPED or observer.status is Status.STOPPING:
            return d.decide(view, gone, now, settings)
        return d.Plan(_move(observer, gone.last_exit(now), now, settings))
    assert host is not None
    vanished = _vanished(record, host, settings)
    if vanished is not None:
        return d.decide(view, replace(vanished, arn=arn), now, settings)
    if observer.status is Status.STOPPING and not _on(host, observer.name, observer.generation):
        left = d.TaskState(
            arn=arn,
            last_status=d.STOPPED,
            stop_code=UNASSIGNED,
            stopped_reason="taken off its host",
        )
        return d.decide(view, left, now, settings)
    asked = observer.desired is Desired.STOPPED or (
        observer.restart_generation is not None
        and observer.restart_generation >= observer.generation
    )
    if observer.status is Status.STOPPING or asked:
        return d.decide(view, d.Listed(True), now, settings)
    if observer.status is Status.STARTING and not_started(host, observer.name, observer.generation):
        return d.only(d.RetryStart(observer.generation))  # it never will: place it elsewhere now
    if observer.next_start_at and now >= observer.next_start_at:
        return d.only(d.RetryStart(observer.generation))  # placement never confirmed
    return d.only(d.Ignore(f"placed on live host {host.host_id}"))


def _stopped(arn: str, exited: d.HostExit, record: d.Record, now: datetime) -> d.TaskState:
    """The exit report as a stopped task. How long the child ran is read on one clock: the
    host's monotonic one (``ran``), or, from a host that does not measure it, the reconciler's
    own (from placing it to reading the report): never the host's ``at`` against the
    reconciler's ``started_at``, which minutes of skew would turn into a healthy run or a quick
    failure at will."""
    ran = exited.ran
    started = record.tracking.started_at
    if ran is None and started is not None:
        ran = now - started
    return d.TaskState(
        arn=arn,
        last_status=d.STOPPED,
        stopped_reason=exited.reason,
        exit_code=exited.exit_code,
        stopped_at=exited.at,
        ran_for=ran,
    )


def _lost(record: d.Record, host: Host | None, now: datetime, settings: d.Settings) -> str | None:
    placed = record.pooled.host
    if host is None or host.host_id != placed:
        return f"host {placed} is gone"
    if host.status not in LIVE_HOST_STATUSES:
        return f"host {placed} is {host.status.value}"
    if record.observer.status is Status.RUNNING and not _on(
        host, record.name, record.observer.generation
    ):
        return None  # handed over (draining): its exit report, or the drain's end, moves it
    return host_dead(host, None, now, settings)


def _vanished(record: d.Record, host: Host, settings: d.Settings) -> d.TaskState | None:
    """A RUNNING child its live host holds (assigned, or handed over) but no longer runs, as of
    a heartbeat more than one interval after the child claimed (both times are the host's own
    clock): the child exited and its exit report never came. The host's next beat after the
    claim lists every child it started, so a later beat without it means it is gone."""
    observer = record.observer
    name, generation = observer.name, observer.generation
    if observer.status is not Status.RUNNING or host.runs(name, generation):
        return None
    handed = host.handover.get(name) == generation
    if host.assigned.get(name) != generation and not handed:
        return None
    claimed = observer.heartbeat_at or record.tracking.started_at
    beat = host.heartbeat_at
    if claimed is None or beat is None or beat - claimed <= settings.heartbeat_interval:
        return None
    return d.TaskState(
        arn="",
        last_status=d.STOPPED,
        stop_code=UNASSIGNED if handed else None,
        stopped_reason=f"host {host.host_id} no longer runs it and reported no exit",
    )


def _off_host_when_ended(record: d.Record, host: Host | None, plan: d.Plan) -> d.Plan:
    """An observer that ends (FAILED, STOPPED) or has ended leaves the host still holding it
    (``StopTask`` means "take it off its host" for a pooled kind): its slot is freed, and gauges
    and rollouts, which read the hosts, stop counting it as wanted or in flight."""
    ends = isinstance(plan.write, d.MarkFailed | d.MarkStopped) or (
        plan.write is None and record.observer.status in (Status.FAILED, Status.STOPPED)
    )
    name = record.name
    holds = (
        host is not None
        and host.host_id == record.pooled.host
        and (name in host.assigned or name in host.handover)
    )
    if not ends or not holds or any(isinstance(e, d.StopTask) for e in plan.effects):
        return plan
    assert host is not None
    arn = host.task_arn or f"host/{host.host_id}"
    return d.Plan(plan.write, (*plan.effects, d.StopTask(arn, "ended: taken off its host")))


def not_started(host: Host, name: str, generation: int) -> bool:
    """Whether a DRAINING host holds this generation without running it: it never will."""
    return host.status is HostStatus.DRAINING and not host.runs(name, generation)


def _on(host: Host, name: str, generation: int) -> bool:
    """Whether the host still has (or still runs) this generation."""
    return host.assigned.get(name) == generation or host.runs(name, generation)


def _move(
    observer: Observer, last_exit: LastExit, now: datetime, settings: d.Settings
) -> d.StartTask:
    """The next generation elsewhere, without counting the host's loss as the observer's failure."""
    return d.StartTask(
        generation=observer.generation + 1,
        restart=True,
        consecutive_failures=observer.consecutive_failures,
        retry_at=now + settings.run_task_retry_base,
        last_exit=last_exit,
    )
