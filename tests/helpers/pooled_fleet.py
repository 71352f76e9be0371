"""A pooled observer fleet on moto: the MotoFleet plus a hosts table, a pooled kind, and a fake
host that heartbeats and reports exits through the tables exactly as the contract says the real
host process does (tests and benchmarks of the manager side; the host process is tested apart).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.ecs.models import ecs_backends

from tests.helpers.moto_fleet import CONTAINER, KIND, REGION, TABLE, MotoFleet, stream
from tests.helpers.observers import HOSTS_TABLE, create_hosts_table, registry_key
from vigil.clock import epoch_ms
from vigil.contract.hosts import (
    HOST_EXIT,
    HOSTS_KEY,
    LIVE_HOST_STATUSES,
    OBSERVER_HOST,
    Placement,
)
from vigil.dynamo import Update, to_wire
from vigil.leases import LeaseTable
from vigil.observers.fleet_store import FleetStore
from vigil.observers.host_fleet.model import Host
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.kind_options import KindOptions
from vigil.observers.model import Status, to_item
from vigil.observers.reconciler import Notices, Reconciler, assemble, changed_records

POOLED = "pooled-ticker"
SLOTS = 3
HEADROOM = 1


@dataclass
class PooledFleet(MotoFleet):
    """``placements``: the dedicated ``ticker`` and the pooled ``pooled-ticker`` (K=3)."""

    slots: int = SLOTS
    headroom: int = HEADROOM
    with_dedicated: bool = True
    """Whether the fleet also has the dedicated ``ticker`` (then every resync reads the index)."""
    pooled_definition_arn: str = ""
    host_ids: Any = field(default_factory=lambda: itertools.count(1))
    finished: set[tuple[str, str, int]] = field(default_factory=set)
    """(host id, name, generation) whose child exited: the fake host's heartbeat no longer lists
    it (the supervisor never restarts a generation that finished), exit report written or not."""
    stop_beats: int = 0
    """Heartbeats a handed-over child is still listed as stopping (checkpointing) before it exits:
    0, it is gone at once; more, its stop takes longer than a pass."""
    stopping: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """(host id, name, generation) of handed-over children -> heartbeats listed stopping so far."""
    claimed: set[tuple[str, str, int]] = field(default_factory=set)
    """(host id, name, generation) whose child's claim succeeded: as the real child
    (``ObserverRuntime.run``), it claims once when it starts, not again on each heartbeat."""

    def __post_init__(self) -> None:
        super().__post_init__()
        create_hosts_table(self.dynamodb)
        self.pooled_definition_arn = self.register_pooled_revision("vigil/observer:test")

    def register_pooled_revision(self, image: str) -> str:
        """A revision of the pooled kind's task definition (a deploy registers the next one)."""
        return self.register_revision(
            image, family="vigil-observer-pooled-ticker", cpu=512, memory=1024
        )

    @property
    def placements(self) -> dict[str, KindOptions]:
        pooled = {POOLED: KindOptions(Placement.POOLED, self.slots, self.headroom)}
        return {KIND: KindOptions(), **pooled} if self.with_dedicated else pooled

    def task_definitions(self) -> dict[str, str]:
        return {KIND: self.task_definition_arn, POOLED: self.pooled_definition_arn}

    def reconciler(
        self, *, ecs_client: Any = None, dynamodb: Any = None, **options: Any
    ) -> Reconciler:
        table_client = dynamodb or self.dynamodb
        return assemble(
            store=FleetStore(table_client, TABLE, pooled_kinds=frozenset({POOLED})),
            ecs=self.ecs(ecs_client),
            notices=Notices(self.sqs, self.dlq_url),
            leases=LeaseTable(table_client, TABLE, self.clock),
            settings=self.settings,
            clock=self.clock,
            sleeper=self.sleeps.append,
            metric=lambda metric, kind, value: self.metrics.append((metric.value, kind, value)),
            hosts=HostStore(table_client, HOSTS_TABLE),
            placements=self.placements,
            new_host_id=lambda kind: f"{kind}-h{next(self.host_ids):03d}",
            **options,
        )

    # Looking ---------------------------------------------------------------------------------

    def hosts(self) -> dict[str, Host]:
        hosts, _ = HostStore(self.dynamodb, HOSTS_TABLE).scan_with_requests()
        return {h.host_id: h for h in hosts}

    def host(self, host_id: str) -> Host:
        """One host's item (a GetItem, as the host process reads its own; KeyError: none)."""
        found = HostStore(self.dynamodb, HOSTS_TABLE).get(host_id)
        if found is None:
            raise KeyError(host_id)
        return found

    def pooled(self, name: str, **fields: Any) -> Any:
        return self.observer(name, kind=POOLED, **fields)

    # The fake host process -------------------------------------------------------------------

    def heartbeat(
        self,
        host_id: str,
        *,
        claim: bool = True,
        skew: timedelta = timedelta(0),
        host: Host | None = None,
    ) -> bool:
        """One heartbeat as the host makes it (conditional on its task and a live status); its
        children claim what ``assigned`` hands back. False: refused (a zombie). ``skew``: how
        far the host's clock is off the reconciler's. ``host``: its item as just read (by
        :meth:`heartbeat_all`'s one scan), else it is read here."""
        host = host or self.host(host_id)
        running = {
            n: {"generation": g, "state": "running"}
            for n, g in host.assigned.items()
            if (host_id, n, g) not in self.finished
        }
        for name, generation in host.handover.items():
            key = (host_id, name, generation)
            beats = self.stopping.get(key, 0)
            if beats < self.stop_beats and key not in self.finished:
                self.stopping[key] = beats + 1
                running[name] = {"generation": generation, "state": "stopping"}
        update = Update().set_all(
            {"heartbeat_at_ms": epoch_ms(self.clock() + skew), "running": running}
        )
        update.condition(update.one_of("status", *LIVE_HOST_STATUSES))
        update.condition(update.eq("task_arn", host.task_arn or "-"))
        try:
            self.dynamodb.update_item(
                TableName=HOSTS_TABLE, Key=to_wire({HOSTS_KEY: host_id}), **update.request()
            )
        except self.dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        if claim:
            for name, generation in host.assigned.items():
                key = (host_id, name, generation)
                if key not in self.finished and key not in self.claimed:
                    self.claim(name, generation, host_id)
        return True

    def heartbeat_all(self) -> None:
        """Every live host heartbeats: one scan of the hosts table for all of them, as each host
        process reads only its own item (a scan per host made this O(hosts²) in requests)."""
        for host_id, host in self.hosts().items():
            if host.status in LIVE_HOST_STATUSES and host.task_arn:
                self.heartbeat(host_id, host=host)

    def claim(self, name: str, generation: int, host_id: str) -> bool:
        """The child's claim: RUNNING, conditional on its generation and host."""
        update = Update().set("status", Status.RUNNING.value)
        update.condition(update.eq("generation", generation), update.eq(OBSERVER_HOST, host_id))
        update.condition(update.one_of("status", Status.STARTING.value, Status.RUNNING.value))
        try:
            self.dynamodb.update_item(
                TableName=TABLE, Key=registry_key(self.dynamodb, TABLE, name), **update.request()
            )
        except self.dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        self.claimed.add((host_id, name, generation))
        return True

    def host_exit(self, name: str, exit_code: int, reason: str = "exited") -> dict[str, Any]:
        """The host's report of a child's exit (HOST_EXIT), fenced on generation and host; the
        stream record it makes (new and old images) is returned for the stream pass."""
        old = self.item(name)
        report = {
            "generation": old["generation"],
            "exit_code": exit_code,
            "reason": reason,
            "at_ms": epoch_ms(self.clock()),
        }
        update = Update().set(HOST_EXIT, report)
        update.condition(
            update.eq("generation", old["generation"]), update.eq(OBSERVER_HOST, old["host"])
        )
        key = registry_key(self.dynamodb, TABLE, name)
        self.dynamodb.update_item(TableName=TABLE, Key=key, **update.request())
        return {"new": self.item(name), "old": old}

    def refuse_run_task(self, reason: str = "RESOURCE:FARGATE") -> list[str]:
        """ECS starts nothing from now on (a ``failures`` answer: capacity, a quota); answers the
        list the refused requests' clientTokens are appended to. ``allow_run_task`` undoes it."""
        refused: list[str] = []

        def refuse(**request: Any) -> dict[str, Any]:
            refused.append(str(request["clientToken"]))
            return {"tasks": [], "failures": [{"reason": reason, "detail": "refused"}]}

        self.ecs_client.run_task = refuse
        return refused

    def allow_run_task(self) -> None:
        del self.ecs_client.run_task  # the client's own method again

    def complete_hand_overs(self) -> None:
        """What host processes do with observers taken off them: the child checkpoints and
        exits, the host reports it (HOST_EXIT), and the stream pass places the next generation.
        With ``stop_beats``, only children listed stopping for that many heartbeats exit."""
        for host in self.hosts().values():
            for name, generation in host.handover.items():
                if self.stopping.get((host.host_id, name, generation), 0) < self.stop_beats:
                    continue  # still checkpointing
                self.finished.add((host.host_id, name, generation))
                item = self.item(name)
                if item.get("host") == host.host_id and item["generation"] == generation:
                    change = self.host_exit(name, 0, "handed over")
                    self.reconciler().on_records(
                        changed_records([stream(change["new"], change["old"])])
                    )

    def stop_host_task(self, host_id: str) -> str:
        """ECS is told to stop the host's task (a Spot interruption, StopTask, a deploy), as ECS
        does it: ListTasks (desiredStatus RUNNING) no longer lists it at once, while its
        container, sent SIGTERM, runs on until the host exits (at most the stop timeout), so
        DescribeTasks still says RUNNING. The host's DRAINING beat, its end
        (:meth:`kill_host_task`) or its STOPPED event follows."""
        arn = self.host(host_id).task_arn
        assert arn is not None
        backend = ecs_backends[DEFAULT_ACCOUNT_ID][REGION]
        (task,) = (
            t
            for t in backend.tasks[self.cluster_arn.rsplit("/", 1)[-1]].values()
            if t.task_arn == arn
        )
        task.desired_status = "STOPPED"
        return arn

    def kill_host_task(self, host_id: str) -> str:
        """The host's task is gone (its container died, or its stop completed): STOPPED."""
        arn = self.host(host_id).task_arn
        assert arn is not None
        self.ecs_client.stop_task(cluster=self.cluster_arn, task=arn, reason="host died")
        return arn


def an_ordinary_minute(pool: PooledFleet) -> None:
    """Move the clock off a sweep minute (every 10th), where the fleet index is read anyway."""
    pool.clock.advance(timedelta(minutes=1))
    pool.heartbeat_all()


def host_event(
    fleet: PooledFleet, host_id: str, *, last_status: str, version: int
) -> dict[str, Any]:
    """The ECS Task State Change event of a host's task (it carries VIGIL_HOST_ID, no observer)."""
    host = fleet.host(host_id)
    detail: dict[str, Any] = {
        "clusterArn": fleet.cluster_arn,
        "taskArn": host.task_arn,
        "taskDefinitionArn": fleet.pooled_definition_arn,
        "lastStatus": last_status,
        "desiredStatus": "STOPPED" if last_status == "STOPPED" else "RUNNING",
        "containers": [{"name": CONTAINER, "lastStatus": last_status, "exitCode": 137}],
        "overrides": {
            "containerOverrides": [
                {"name": CONTAINER, "environment": [{"name": "VIGIL_HOST_ID", "value": host_id}]}
            ]
        },
        "version": version,
    }
    if last_status == "STOPPED":
        detail["stopCode"] = "TaskFailedToStart"
        detail["stoppedReason"] = "host died"
    return detail


def create(pool: PooledFleet, *names: str) -> None:
    """Pooled observers just created, as the stream pass sees them."""
    records = []
    for name in names:
        observer = pool.pooled(name)
        pool.put(observer)
        records.append(stream(to_item(observer)))
    pool.reconciler().on_records(changed_records(records))


def resync(pool: PooledFleet, holder: str = "pass") -> None:
    assert pool.reconciler().resync(holder) is not None


def placed(pool: PooledFleet, *names: str) -> None:
    """Pooled observers created, their hosts heartbeating, promoted by an ordinary pass."""
    create(pool, *names)
    an_ordinary_minute(pool)
    resync(pool, "promote")


def gauges(pool: PooledFleet) -> dict[str, float]:
    """The last value of each fleet-wide gauge the reconciler emitted."""
    return {name: value for name, kind, value in pool.metrics if kind is None}
