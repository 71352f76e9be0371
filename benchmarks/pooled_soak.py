"""A seeded soak of a pooled fleet: hours of faults on the simulated clock, measured from the
children's own view.

What runs is the project's own pieces on moto: the reconciler assembled as in the tests
(:class:`~tests.helpers.pooled_fleet.PooledFleet`: its stream pass fed from the registry's real
DynamoDB stream, its event pass from ECS Task State Change events, its resync every minute), and
every host task the real host process (:class:`~vigil_tools.emulator.hosts.EmulatedHost`: the
supervisor, heartbeat store and exit reports; its children the unchanged observer runtime running
the example ticker). ECS is played here as :class:`~vigil_tools.testing.fleet.SteppedFleet` plays
it for the deployed stack: a task RunTask started gets its host ``task_start_s`` later, a host that
exits stops its task, StopTask sends the host SIGTERM, and each stop reaches the reconciler as a
STOPPED event.

Faults, drawn from the seed (none in the first minutes, none around a rollout):

* ``crash``: one child process dies (exit 1); its host reaps and reports it;
* ``kill``: a host task dies at once (SIGKILL, every child with it); ECS reports it STOPPED;
* ``zombie``: a host cut off from ECS and DynamoDB: ECS reports its task STOPPED, every call of
  the host and its children fails, yet its processes run on until the host fences itself;
* ``hang``: a zombie whose calls hang instead of failing: each of the host's calls is answered
  late (within its read timeout, so it lands) or never (botocore gives up at its read timeout,
  the host's own client settings); ECS reports its task STOPPED at once;
* ``partition``: the same hang, cut just after some of the host's children crashed (their exit
  reports are pending at the cut), and ECS says nothing until the partition heals
  (:attr:`Soak.heal_after`): the manager finds the host by its silence (three intervals);
* ``throttle``: 1 % of the host's writes (heartbeats, exit reports) are refused as throttled;
* ``rollout``: two deploys of a new task definition revision, spread over the run.

A host runs its calls as the real one does, beside its loop (:class:`ClockCalls`: a call's time
is its own, its answer shows when the clock gets there), and is stepped at the exact moment it is
due (a heartbeat, a deadline, a call's end), not at the clock's 5 s resolution.

What is measured never reads the registry: "working" is a child process alive and not fenced
(its own ``stop_reason``), whatever the records say.

* **lost**: an observer that went longer than :attr:`Soak.recovery_limit` with no working
  generation (the documented failover from a last heartbeat, plus a task start and a restart's
  backoff), unless the registry says it FAILED by the restart rules;
* **overlap**: the longest time two generations of one observer both worked (target: one
  interval), timed from the moments the children started and stopped working, exactly;
* **cut off**: for each host whose calls hang, how long after its last accepted heartbeat (and,
  for ``hang``, after the STOPPED event that moved its observers) its last child stopped working
  (target: one interval);
* **rollout**: the most observers not working at once during a rollout, of those working when it
  began, against the budget (``max_unavailable`` % of the kind);
* **failovers**: observers that worked on a killed or zombie host, from that moment until a later
  generation works; **restarts** the same after a crash.

``python -m benchmarks.pooled_soak --help`` lists the options; ``run()`` is the ``make bench``
section.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from moto import mock_aws

from benchmarks.offline import offline_aws
from tests.helpers.moto_fleet import CONTAINER, REGION, TABLE, default_task_transitions
from tests.helpers.observers import HOSTS_TABLE, TICKER_WRITES, create_ticker_counts_table
from tests.helpers.pooled_fleet import POOLED, PooledFleet
from vigil.clock import ManualClock
from vigil.contract.hosts import HOST_EXIT, HOST_ID_ENV, HOSTS_TABLE_ENV
from vigil.observers import decisions as d
from vigil.observers.container_client import AttemptTimeouts, host_timeouts
from vigil.observers.ecs_tasks import task_state
from vigil.observers.model import Status
from vigil.observers.reconciler import changed_records
from vigil.observers.rollout import budget
from vigil.observers.runtime import StopReason
from vigil_tools.emulator import moto_responses, moto_speed
from vigil_tools.emulator.ecs import TaskEvents, container_environment
from vigil_tools.emulator.hosts import ClockCalls, EmulatedHost
from vigil_tools.emulator.streams import StreamMapping

FAULTS = ("crash", "kill", "zombie", "hang", "partition", "throttle", "rollout")
START = datetime(2026, 11, 25, 0, 0, tzinfo=UTC)
KINDS = json.dumps({POOLED: "observers.ticker.run"})
RESYNC_EVERY = timedelta(minutes=1)
"""The reconciler's schedule."""
SETTLE_ROUNDS = 50
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


@dataclass(frozen=True)
class Soak:
    """One soak's shape. The defaults are the example app's pooled kind (``app.py``: 10 slots,
    5 free, 30 s heartbeats, ``max_unavailable`` 10 %) with 200 observers on 20 hosts."""

    observers: int = 200
    hosts: int = 20
    hours: float = 6.0
    seed: int = 19
    faults: frozenset[str] = frozenset(FAULTS)
    heartbeat_s: int = 30
    headroom: int = 5
    max_unavailable: int = 10
    task_start_s: int = 60
    """A Fargate task's start (image pull, boot) before its host's first heartbeat."""
    task_start_jitter_s: int = 15
    """Each start differs by up to this much either way (so hosts do not beat in step)."""
    checkpoint_s: int = 300
    """The ticker's interval: it checkpoints (and so can be fenced by DynamoDB) this often."""
    step_s: int = 5
    """Clock resolution: hosts and children run when due, measurements every step."""
    crashes_per_hour: float = 20.0
    kills_per_hour: float = 1.0
    zombies_per_hour: float = 0.5
    hangs_per_hour: float = 0.5
    partitions_per_hour: float = 0.5
    crashes_at_the_cut: int = 6
    """A partition's host: children that crash just after the cut (their reports hang)."""
    heal_after: timedelta = timedelta(minutes=10)
    """How long ECS says nothing of a partitioned host's task."""
    unanswered: float = 0.5
    """The share of a hanging host's calls never answered; the rest are answered after up to
    four read timeouts (those within one land, late; the others time out)."""
    rollouts: int = 2
    throttle_rate: float = 0.01
    warm_up: timedelta = timedelta(minutes=10)
    """No fault before the fleet first settles."""
    rollout_quiet: tuple[timedelta, timedelta] = (timedelta(minutes=10), timedelta(minutes=40))
    """No other fault this long before and after a deploy: what a rollout measures is its own."""

    @property
    def slots(self) -> int:
        return math.ceil(self.observers / self.hosts)

    @property
    def settings(self) -> d.Settings:
        return d.Settings(heartbeat_interval=timedelta(seconds=self.heartbeat_s))

    @property
    def recovery_limit(self) -> timedelta:
        """How long an observer may go without a working generation before it counts as lost: a
        dead host found (3 intervals), the next resync, a new host's task start and its first
        heartbeat, one more interval for the child to start, and the second restart's backoff."""
        settings = self.settings
        return (
            settings.stale_after
            + RESYNC_EVERY
            + timedelta(seconds=self.task_start_s + 2 * self.heartbeat_s)
            + 2 * settings.backoff_base
        )

    @property
    def duration(self) -> timedelta:
        return timedelta(hours=self.hours)


@dataclass
class Result:
    soak: Soak
    lost: dict[str, float] = field(default_factory=dict)
    """Observer -> its longest time without a working generation (s), beyond the limit."""
    longest_gap_s: float = 0.0
    failed: list[str] = field(default_factory=list)
    """Observers the restart rules marked FAILED (not counted as lost)."""
    overlap_s: float = 0.0
    overlaps: int = 0
    """Times two generations of one observer worked at once (any duration)."""
    overlap_worst: str = ""
    rollout_worst: int = 0
    rollout_budget: int = 0
    rollouts_done: list[float] = field(default_factory=list)
    """Minutes each finished rollout took; an unfinished one is missing."""
    failovers: list[float] = field(default_factory=list)
    restarts: list[float] = field(default_factory=list)
    cut_off: list[tuple[str, float, float | None]] = field(default_factory=list)
    """Hosts whose calls hung: (fault, seconds from the host's last accepted heartbeat to its
    last child stopping, seconds from the STOPPED event that moved its observers, if any)."""
    hung_calls: int = 0
    """Calls of hanging hosts that went unanswered (given up at their read timeout)."""
    faults: dict[str, int] = field(default_factory=dict)
    diagnosis: list[str] = field(default_factory=list)
    """What the registry and hosts table say about each lost observer, at the end."""
    wall_s: float = 0.0

    def lines(self) -> list[str]:
        s = self.soak
        fail = _spread(self.failovers)
        restart = _spread(self.restarts)
        done = ", ".join(f"{m:.0f} min" for m in self.rollouts_done) or "none finished"
        return [
            f"{s.observers} observers on {s.hosts} hosts (K = {s.slots}, {s.headroom} free, "
            f"{s.heartbeat_s} s heartbeats, {s.task_start_s} s task start) for {s.hours:g} "
            f"simulated hours, seed {s.seed}, faults {', '.join(sorted(s.faults)) or 'none'}: "
            + ", ".join(f"{n} {k}" for k, n in sorted(self.faults.items())),
            f"- observers lost (no working generation for over "
            f"{s.recovery_limit.total_seconds():.0f} s): **{len(self.lost)}** (target 0); "
            f"longest gap {self.longest_gap_s:.0f} s; FAILED by the restart rules: "
            f"{len(self.failed)}",
            f"- longest time two generations of one observer both worked: **{self.overlap_s:.0f} s**"
            f" (target <= {s.heartbeat_s} s); {self.overlaps} overlaps"
            + (f", worst {self.overlap_worst}" if self.overlap_worst else ""),
            f"- worst rollout unavailability: **{self.rollout_worst}** observers at once, budget "
            f"{self.rollout_budget} (target never above); rollouts finished: {done}",
            *self._cut_off_lines(),
            f"- failovers (host killed or cut off): {len(self.failovers)}, median {fail[0]}, "
            f"worst {fail[1]}; restarts after a crash: {len(self.restarts)}, median "
            f"{restart[0]}, worst {restart[1]}",
            f"- wall time {self.wall_s:.0f} s",
        ]

    def _cut_off_lines(self) -> list[str]:
        if not self.cut_off:
            return []
        after_beat = max(beat for _, beat, _ in self.cut_off)
        events = [event for _, _, event in self.cut_off if event is not None]
        kinds = ", ".join(
            f"{sum(1 for f, _, _ in self.cut_off if f == fault)} {fault}"
            for fault in sorted({f for f, _, _ in self.cut_off})
        )
        line = (
            f"- hosts cut off while their calls hang ({kinds}; {self.hung_calls} calls "
            f"unanswered): their children all gone at most **{after_beat:.1f} s** after the "
            f"host's last accepted heartbeat (target <= {self.soak.heartbeat_s} s)"
        )
        if events:
            line += f", at most {max(events):.1f} s after the STOPPED event that moved them"
        return [line]


def _spread(values: Sequence[float]) -> tuple[str, str]:
    if not values:
        return "-", "-"
    return f"{statistics.median(values):.0f} s", f"{max(values):.0f} s"


# The network a host task sees ------------------------------------------------------------------


class HostLink:
    """A host task's DynamoDB client (its children share it): ``cut`` makes every call fail as
    a partition does; ``throttle_rate`` of the host's own writes (heartbeats on the hosts table,
    exit reports) are refused as throttled, as they are once the SDK's retries are spent.

    ``hang``, once set, draws how long each of the host's own calls waits for its answer (None:
    never answered). The call spends that time on the clock (the host's :class:`ClockCalls` gives
    it back: a call's time is its own), up to the read timeout of the host's client settings, at
    which botocore gives up (``ReadTimeoutError``; the host's client tries once). Its children's
    calls fail at once meanwhile, as under ``cut``: a child's call cannot take its own time here
    (the children run between the host's steps), and a child only ever stops working when its
    host fences or kills it, which is what is measured."""

    def __init__(
        self,
        client: Any,
        rng: random.Random,
        throttle_rate: float,
        clock: ManualClock,
        timeouts: AttemptTimeouts,
    ) -> None:
        self._client = client
        self._rng = rng
        self._rate = throttle_rate
        self._clock = clock
        self._timeouts = timeouts
        self.cut = False
        self.hang: Callable[[], float | None] | None = None
        self.throttled = 0
        self.unanswered = 0

    @property
    def exceptions(self) -> Any:
        return self._client.exceptions

    @property
    def meta(self) -> Any:
        return self._client.meta

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._client, name)

        def guarded(**request: Any) -> Any:
            if self.cut or (self.hang is not None and not _host_write(request)):
                raise EndpointConnectionError(endpoint_url=ENDPOINT)
            if self.hang is not None:
                answered_after = self.hang()
                if answered_after is None or answered_after > self._timeouts.read:
                    self._clock.advance(self._timeouts.read)
                    self.unanswered += 1
                    raise ReadTimeoutError(endpoint_url=ENDPOINT)
                self._clock.advance(answered_after)
                return call(**request)
            throttled = self._rate and name == "update_item" and _host_write(request)
            if throttled and self._rng.random() < self._rate:
                self.throttled += 1
                raise ClientError(
                    {"Error": {"Code": "ProvisionedThroughputExceededException"}}, "UpdateItem"
                )
            return call(**request)

        return guarded


ENDPOINT = f"https://dynamodb.{REGION}.amazonaws.com"


def _host_write(request: dict[str, Any]) -> bool:
    names = (request.get("ExpressionAttributeNames") or {}).values()
    return request.get("TableName") == HOSTS_TABLE or HOST_EXIT in names


# The soak --------------------------------------------------------------------------------------


@dataclass
class _Task:
    arn: str
    host_id: str
    definition: str
    starts_at: datetime
    """When its container is up (RunTask plus the task's start time)."""
    link: HostLink
    environment: dict[str, str]
    runner: EmulatedHost | None = None
    reported: bool = False
    """Its STOPPED event has reached the reconciler."""
    silent_until: datetime | None = None
    """A partition: ECS says nothing of the task (no event, no StopTask reaches it) until then."""
    cut: tuple[str, datetime] | None = None
    """(the fault, when) its calls started to hang."""


class SoakRun:
    def __init__(self, soak: Soak) -> None:
        self.soak = soak
        self.rng = random.Random(soak.seed)
        self.clock = ManualClock(START)
        self.fleet = PooledFleet(
            self.clock,
            slots=soak.slots,
            headroom=soak.headroom,
            with_dedicated=False,
        )
        self.fleet.settings = soak.settings
        create_ticker_counts_table(self.fleet.dynamodb)  # the example ticker writes its count
        self.session = boto3.session.Session(region_name=REGION)
        self.stream = StreamMapping.of_table(self.session, TABLE)
        self.unread = True
        self.fleet.dynamodb.meta.events.register("before-call.dynamodb.*", self._written)
        self.tasks: dict[str, _Task] = {}
        self.stopping: set[str] = set()
        """Tasks the reconciler stopped (StopTask), by ARN."""
        ecs = self.fleet.ecs_client
        self._ecs_run_task, self._ecs_stop_task = ecs.run_task, ecs.stop_task
        ecs.run_task, ecs.stop_task = self._run_task, self._stop_task
        self.log = open(os.devnull, "w")  # noqa: SIM115 (the hosts' and children's log lines)
        self.versions: dict[str, int] = {}
        self.names = [f"obs-{i:04d}" for i in range(soak.observers)]
        self.result = Result(soak, faults={})
        self.rollout_budget = budget(soak.max_unavailable, soak.observers)
        self.result.rollout_budget = self.rollout_budget
        # What the children show
        self.last_working = {n: START for n in self.names}
        self.worst_gap: dict[str, float] = {}
        self.working: dict[tuple[str, int, str], datetime] = {}
        """(name, generation, task ARN) -> since when that child works, as last observed."""
        self.pending_failover: dict[str, tuple[datetime, int]] = {}
        self.pending_restart: dict[str, tuple[datetime, int]] = {}
        self.rollout: tuple[datetime, set[str], str] | None = None

    # -- the run ----------------------------------------------------------------------------------

    def run(self) -> Result:
        started = time.perf_counter()
        soak = self.soak
        end = START + soak.duration
        schedule = self._schedule()
        for name in self.names:
            self.fleet.put(self.fleet.pooled(name, config={"interval_seconds": soak.checkpoint_s}))
        next_resync = START
        step = timedelta(seconds=soak.step_s)
        while self.clock() <= end:
            now = self.clock()
            while schedule and schedule[0][0] <= now:
                _, fault = schedule.pop(0)
                self._inject(fault)
            self._settle()
            if now >= next_resync:
                self.fleet.reconciler().resync(f"soak-{now:%H%M}")
                next_resync += RESYNC_EVERY
                self._settle()
            self._step_hosts(until=now + step)
            self._measure(self.clock())
            self.clock.set(now + step)
        self._finish(end)
        self.result.wall_s = time.perf_counter() - started
        return self.result

    def _schedule(self) -> list[tuple[datetime, str]]:
        soak, rng = self.soak, self.rng
        span = soak.duration.total_seconds()
        events: list[tuple[datetime, str]] = []
        quiet: list[tuple[datetime, datetime]] = []
        if "rollout" in soak.faults:
            for index in range(soak.rollouts):
                at = START + timedelta(seconds=span * (index + 1) / (soak.rollouts + 1))
                events.append((at, "rollout"))
                before, after = soak.rollout_quiet
                quiet.append((at - before, at + after))
        rates = {
            "crash": soak.crashes_per_hour,
            "kill": soak.kills_per_hour,
            "zombie": soak.zombies_per_hour,
            "hang": soak.hangs_per_hour,
            "partition": soak.partitions_per_hour,
        }
        free = _free(soak.warm_up, soak.duration - soak.warm_up, quiet)
        room = sum((b - a).total_seconds() for a, b in free)
        for fault, rate in rates.items():
            if fault not in soak.faults or room <= 0:
                continue
            for _ in range(round(rate * soak.hours)):
                events.append((_at(free, rng.uniform(0, room)), fault))
        return sorted(events)

    def _step_hosts(self, until: datetime) -> None:
        """Each live host at the moment it is due (a heartbeat, a deadline, the end of one of its
        calls), in time order, up to ``until``: the clock moves to each moment in turn."""
        stepped: dict[str, int] = {}
        while True:
            due = [
                (t.runner.due_at, t.host_id, t)  # type: ignore[union-attr]
                for t in self._live()
                if t.runner.due_at < until  # type: ignore[union-attr]
            ]
            if not due:
                return
            at, host_id, task = min(due, key=lambda entry: entry[:2])
            if at > self.clock():
                self.clock.set(at)
                stepped.clear()
            stepped[host_id] = stepped.get(host_id, 0) + 1
            if stepped[host_id] > SETTLE_ROUNDS:
                raise RuntimeError(f"host {host_id} stays due at {self.clock():%H:%M:%S}")
            assert task.runner is not None
            task.runner.step()
            self._settle()

    # -- ECS, played ------------------------------------------------------------------------------

    def _live(self) -> list[_Task]:
        return sorted(
            (t for t in self.tasks.values() if t.runner is not None and t.runner.alive),
            key=lambda t: t.host_id,
        )

    def _settle(self) -> None:
        for _ in range(SETTLE_ROUNDS):
            acted = self._deliver_stream()
            acted |= self._start_tasks()
            acted |= self._report_stopped()
            if not acted:
                self._observe()
                return
        raise RuntimeError(f"the fleet kept changing at {self.clock():%H:%M:%S}")

    def _written(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        """botocore's ``before-call`` on the registry's client: a write the stream pass may need
        (anything but a checkpoint: those it drops) makes the next settle read the stream."""
        if model.name not in WRITES or params.get("TableName") not in (TABLE, None):
            return
        if "checkpoint" not in (params.get("ExpressionAttributeNames") or {}).values():
            self.unread = True

    def _deliver_stream(self) -> bool:
        if not self.unread:
            return False
        self.unread = False
        records = self.stream.poll()
        for start in range(0, len(records), 100):
            self.fleet.reconciler().on_records(changed_records(records[start : start + 100]))
        return bool(records)

    def _run_task(self, **request: Any) -> Any:
        """RunTask as the reconciler calls it, remembered: each task gets its host once started."""
        answer = self._ecs_run_task(**request)
        for started in answer.get("tasks") or []:
            task = {"taskDefinitionArn": request["taskDefinition"], **started}
            task["overrides"] = request.get("overrides") or {}
            environment = container_environment(self.fleet.ecs_client, task, CONTAINER)
            jitter = self.rng.uniform(-1, 1) * self.soak.task_start_jitter_s
            self.tasks[started["taskArn"]] = _Task(
                started["taskArn"],
                environment[HOST_ID_ENV],
                str(request["taskDefinition"]),
                self.clock() + timedelta(seconds=self.soak.task_start_s + jitter),
                HostLink(
                    self.fleet.dynamodb,
                    self.rng,
                    self._throttle_rate,
                    self.clock,
                    host_timeouts(self.soak.heartbeat_s),
                ),
                environment,
            )
        return answer

    def _stop_task(self, **request: Any) -> Any:
        """StopTask as the reconciler calls it: the host gets SIGTERM at the next settle."""
        self.stopping.add(str(request["task"]))
        return self._ecs_stop_task(**request)

    def _start_tasks(self) -> bool:
        acted = False
        for task in sorted(self.tasks.values(), key=lambda t: t.host_id):
            if task.runner is not None or task.reported or task.arn in self.stopping:
                continue
            if self.clock() < task.starts_at:
                continue
            environment = {
                "VIGIL_REGISTRY_TABLE": TABLE,
                "VIGIL_OBSERVER_KINDS": KINDS,
                "VIGIL_HEARTBEAT_SECONDS": str(self.soak.heartbeat_s),
                HOSTS_TABLE_ENV: HOSTS_TABLE,
                **TICKER_WRITES,
                # ECS sets both in every container (the ticker's own client needs a region)
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
                **task.environment,
            }
            runner = EmulatedHost(
                task.arn,
                environment,
                task.link,
                now=self.clock,
                log=self.log,
                calls=ClockCalls(self.clock),
            )
            task.runner = runner
            runner.start()
            acted = True
        return acted

    @property
    def _throttle_rate(self) -> float:
        return self.soak.throttle_rate if "throttle" in self.soak.faults else 0.0

    def _report_stopped(self) -> bool:
        acted = False
        for task in sorted(self.tasks.values(), key=lambda t: t.host_id):
            if task.reported or (task.silent_until and self.clock() < task.silent_until):
                continue  # a partitioned task: nothing of ECS reaches it, nor comes from it
            if task.arn in self.stopping:
                # StopTask (the reconciler's): SIGTERM to the host, which hands its children over.
                code = task.runner.sigterm() if task.runner is not None else None
                self._event(task, "UserInitiated", int(code) if code is not None else None)
                acted = True
            elif task.runner is not None and not task.runner.alive:
                # The host exited (clean, fenced, killed): ECS stops its task.
                self._ecs_stop_task(
                    cluster=self.fleet.cluster_arn,
                    task=task.arn,
                    reason="Essential container exited",
                )
                code = task.runner.exit_code
                self._event(
                    task, "EssentialContainerExited", int(code) if code is not None else None
                )
                acted = True
        return acted

    def _event(self, task: _Task, stop_code: str, exit_code: int | None) -> None:
        task.reported = True
        events = TaskEvents(self.fleet.ecs_client, self.fleet.cluster_arn, CONTAINER, self.versions)
        event = events.current(task.arn, at=self.clock(), stop_code=stop_code, exit_code=exit_code)
        self.fleet.reconciler().on_task_event(task_state(event["detail"]))

    # -- faults -----------------------------------------------------------------------------------

    def _inject(self, fault: str) -> None:
        hosts = [
            t for t in self._live() if not t.link.cut and t.link.hang is None and not t.reported
        ]
        if fault == "rollout":
            self._deploy()
        elif fault == "crash":
            busy = [
                (t, name)
                for t in hosts
                for name in sorted(_working(t))
                if t.runner is not None and name in t.runner.children
            ]
            if not busy:
                return
            task, name = self.rng.choice(busy)
            assert task.runner is not None
            self._expect(self.pending_restart, task, [name])
            task.runner.crash_child(name)
        elif fault in ("kill", "zombie", "hang", "partition"):
            if not hosts:
                return
            task = self.rng.choice(hosts)
            assert task.runner is not None
            working = sorted(_working(task))
            self._expect(self.pending_failover, task, working)
            if fault == "kill":
                task.runner.kill()
            elif fault == "zombie":
                task.link.cut = True
            else:
                task.link.hang = self._answer_delay
                task.cut = (fault, self.clock())
            if fault == "partition":
                task.silent_until = self.clock() + self.soak.heal_after
                crashing = [n for n in working if n in task.runner.children]
                for name in crashing[: self.soak.crashes_at_the_cut]:
                    task.runner.crash_child(name)  # its report hangs: pending at the cut
            elif fault in ("zombie", "hang"):
                self._ecs_stop_task(
                    cluster=self.fleet.cluster_arn, task=task.arn, reason="Task lost contact"
                )
                self._event(task, "EssentialContainerExited", 137)
        else:
            raise ValueError(f"unknown fault {fault!r}")
        self.result.faults[fault] = self.result.faults.get(fault, 0) + 1

    def _answer_delay(self) -> float | None:
        """How long one call of a hanging host waits for its answer (None: never answered)."""
        if self.rng.random() < self.soak.unanswered:
            return None
        return self.rng.uniform(0.0, 4 * host_timeouts(self.soak.heartbeat_s).read)

    def _expect(
        self, pending: dict[str, tuple[datetime, int]], task: _Task, names: Iterable[str]
    ) -> None:
        generations = _working(task)
        for name in names:
            pending.setdefault(name, (self.clock(), generations[name]))

    def _deploy(self) -> None:
        image = f"vigil/observer:soak-{len(self.result.rollouts_done) + 1}-{self.clock():%H%M}"
        self.fleet.pooled_definition_arn = self.fleet.register_pooled_revision(image)
        working = set(self._working_now())
        self.rollout = (self.clock(), working, self.fleet.pooled_definition_arn)

    # -- measuring --------------------------------------------------------------------------------

    def _working_now(self) -> dict[str, list[tuple[int, _Task]]]:
        working: dict[str, list[tuple[int, _Task]]] = {}
        for task in self.tasks.values():
            for name, generation in _working(task).items():
                working.setdefault(name, []).append((generation, task))
        return working

    def _measure(self, now: datetime) -> None:
        working = self._working_now()
        for name in self.names:
            copies = working.get(name, [])
            if copies:
                self.last_working[name] = now
            else:
                gap = (now - self.last_working[name]).total_seconds()
                self.worst_gap[name] = max(self.worst_gap.get(name, 0.0), gap)
            generations = {g for g, _ in copies}
            for pending, into in (
                (self.pending_failover, self.result.failovers),
                (self.pending_restart, self.result.restarts),
            ):
                if name in pending and any(g > pending[name][1] for g in generations):
                    into.append((now - pending.pop(name)[0]).total_seconds())
        self._measure_rollout(now, working)

    def _observe(self) -> None:
        """Note, at the clock's time, each child that started or stopped working since the last
        look (every change happens in a step this follows): overlaps are timed exactly."""
        now = self.clock()
        current = {
            (name, generation, task.arn): task
            for task in self.tasks.values()
            for name, generation in _working(task).items()
        }
        for key in current.keys() - self.working.keys():
            self.working[key] = now
        for key in sorted(self.working.keys() - current.keys()):
            self._stopped_working(key, now)
        for task in self.tasks.values():
            if task.cut is not None and not any(k[2] == task.arn for k in current):
                self._cut_off(task, now)

    def _stopped_working(self, key: tuple[str, int, str], now: datetime) -> None:
        """A child stopped working at ``now``: how long it worked beside another generation."""
        name, generation, arn = key
        since = self.working.pop(key)
        for (other, other_generation, other_arn), other_since in self.working.items():
            if other != name or other_generation == generation:
                continue
            seconds = (now - max(since, other_since)).total_seconds()
            if seconds <= 0:
                continue
            self.result.overlaps += 1
            if seconds > self.result.overlap_s:
                self.result.overlap_s = seconds
                ours, theirs = self.tasks[arn].host_id, self.tasks[other_arn].host_id
                self.result.overlap_worst = (
                    f"{name} (gen {generation} on {ours} until {now:%H:%M:%S}, "
                    f"gen {other_generation} on {theirs} from {other_since:%H:%M:%S})"
                )

    def _cut_off(self, task: _Task, now: datetime) -> None:
        """A hanging host's last child stopped working: how long after its last accepted beat
        (and the STOPPED event that moved its observers, for ``hang``)."""
        assert task.cut is not None and task.runner is not None
        fault, at = task.cut
        task.cut = None
        lease_end = task.runner.supervisor.lease_end
        if lease_end is None:
            return
        beat = datetime.fromtimestamp(lease_end - self.soak.heartbeat_s, tz=UTC)
        event = (now - at).total_seconds() if fault == "hang" else None
        self.result.cut_off.append((fault, (now - beat).total_seconds(), event))

    def _measure_rollout(self, now: datetime, working: dict[str, list[tuple[int, _Task]]]) -> None:
        if self.rollout is None:
            return
        began, names, definition = self.rollout
        missing = sum(1 for n in names if n not in working)
        self.result.rollout_worst = max(self.result.rollout_worst, missing)
        if all(
            n in working and all(t.definition == definition for _, t in working[n])
            for n in self.names
        ):
            self.result.rollouts_done.append((now - began).total_seconds() / 60)
            self.rollout = None

    def _finish(self, end: datetime) -> None:
        self._measure(end)
        for key in sorted(self.working):
            self._stopped_working(key, end)  # overlaps still open at the end count to the end
        self.result.hung_calls = sum(t.link.unanswered for t in self.tasks.values())
        limit = self.soak.recovery_limit.total_seconds()
        statuses = {n: self.fleet.item(n)["status"] for n in self.names}
        self.result.failed = sorted(n for n, s in statuses.items() if s == Status.FAILED.value)
        self.result.longest_gap_s = max(self.worst_gap.values(), default=0.0)
        for name, gap in sorted(self.worst_gap.items()):
            if gap > limit and name not in self.result.failed:
                self.result.lost[name] = gap
        hosts = self.fleet.hosts()
        for name in sorted(self.result.lost)[:10]:
            item = self.fleet.item(name)
            host = hosts.get(str(item.get("host")))
            self.result.diagnosis.append(
                f"{name}: {item['status']} gen {item['generation']} on {item.get('host')} "
                f"(host {host.status.value if host else '-'}, assigned "
                f"{host.assigned.get(name) if host else '-'}, running "
                f"{(host.running or {}).get(name) if host else '-'}), "
                f"last exit {item.get(HOST_EXIT)}"
            )


def _free(
    first: timedelta, last: timedelta, quiet: list[tuple[datetime, datetime]]
) -> list[tuple[datetime, datetime]]:
    """The stretches of [START + first, START + last] outside every quiet window."""
    free = [(START + first, START + last)]
    for q_start, q_end in quiet:
        free = [
            piece
            for a, b in free
            for piece in ((a, min(b, q_start)), (max(a, q_end), b))
            if piece[0] < piece[1]
        ]
    return free


def _at(free: list[tuple[datetime, datetime]], offset: float) -> datetime:
    """The moment ``offset`` seconds into the free stretches laid end to end."""
    for a, b in free:
        length = (b - a).total_seconds()
        if offset <= length:
            return a + timedelta(seconds=offset)
        offset -= length
    return free[-1][1]


def _working(task: _Task) -> dict[str, int]:
    """The children of ``task`` that work: alive and not fenced, by their own account."""
    runner = task.runner
    if runner is None or not runner.alive:
        return {}
    return {
        name: container.generation
        for name, container in runner.children.items()
        if container.alive and container.runtime.stop_reason is not StopReason.FENCED
    }


def soak(config: Soak) -> Result:
    """One soak in a fresh moto account (moto's DynamoDB writes and answers made cheap, as in the
    local account: ``vigil_tools.emulator.moto_speed`` and ``moto_responses``)."""
    moto_speed.install()
    moto_responses.install()
    with mock_aws():
        try:
            return SoakRun(config).run()
        finally:
            default_task_transitions()


# The command line and the section --------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _hours(text: str) -> float:
    value = float(_number(text, float))
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a positive number of hours, not {text}")
    return value


def _number(text: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _faults(text: str) -> frozenset[str]:
    names = {n.strip() for n in text.split(",") if n.strip()}
    if names == {"none"}:
        return frozenset()
    unknown = sorted(names - set(FAULTS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault {', '.join(map(repr, unknown))} (known: {', '.join(FAULTS)}, or none)"
        )
    return frozenset(names)


def parser() -> argparse.ArgumentParser:
    defaults = Soak()
    cli = argparse.ArgumentParser(
        prog="python -m benchmarks.pooled_soak",
        description="A seeded soak of a pooled fleet on the simulated clock.",
    )
    cli.add_argument("--observers", type=_positive_int, default=defaults.observers)
    cli.add_argument("--hosts", type=_positive_int, default=defaults.hosts)
    cli.add_argument("--hours", type=_hours, default=defaults.hours)
    cli.add_argument("--seed", type=int, default=defaults.seed)
    cli.add_argument(
        "--faults",
        type=_faults,
        default=defaults.faults,
        help=f"comma-separated, of {', '.join(FAULTS)} (default all), or none",
    )
    cli.add_argument("--heartbeat", type=_positive_int, default=defaults.heartbeat_s)
    cli.add_argument("--task-start", type=int, default=defaults.task_start_s)
    return cli


def config(argv: Sequence[str] | None = None) -> Soak:
    args = parser().parse_args(argv)
    if args.hosts > args.observers:
        parser().error(f"--hosts {args.hosts} is more than --observers {args.observers}")
    if args.task_start < 0:
        parser().error(f"--task-start must be 0 or more seconds, not {args.task_start}")
    return Soak(
        observers=args.observers,
        hosts=args.hosts,
        hours=args.hours,
        seed=args.seed,
        faults=args.faults,
        heartbeat_s=args.heartbeat,
        task_start_s=args.task_start,
    )


SECTION_INTRO = (
    "`python -m benchmarks.pooled_soak`: the example app's pooled kind under seeded faults on the "
    "simulated clock, the reconciler and the real host supervisor on moto with emulated children; "
    '"working" is read from the children, never from the registry (the faults and what each '
    "figure means: the module's docstring)."
)


def section(lines: Sequence[str]) -> str:
    """The ``make bench`` section's text from a soak's :meth:`Result.lines`."""
    first, *figures = lines
    return "\n".join([SECTION_INTRO, "", first + ":", "", *figures])


def run(quick: bool = False) -> str:
    """The ``make bench`` section: the full soak (one hour with ``quick``)."""
    result = soak(Soak(hours=1.0) if quick else Soak())
    return section(result.lines())


def main(argv: Sequence[str] | None = None) -> None:
    offline_aws(REGION)
    result = soak(config(argv))
    print("\n".join([*result.lines(), *result.diagnosis]))


if __name__ == "__main__":
    main(sys.argv[1:])
