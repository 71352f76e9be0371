"""Pooled observers on moto: the reconciler's pass at 10,000 observers on 200 hosts (K = 50),
failover on the simulated clock, and a monthly cost table (dedicated against pooled).

* **Pass**: 200 host items (each with 50 observers assigned, a fresh heartbeat and a moto task)
  and 10,000 observer items placed on them. One resync when healthy, one with 5 % of the hosts
  dead (their tasks stopped): API calls by operation and the reconciler's own time (wall minus
  the time inside AWS calls), beside today's pass at 1,000 dedicated observers.
* **Failover**: a small pooled fleet with headroom; every host heartbeats once per interval at
  its own phase (the fake host of ``tests.helpers.pooled_fleet``, which claims what ``assigned``
  hands back, as the real host will). Seconds on the simulated clock from a host's STOPPED event
  (the event pass runs at once), and from its last heartbeat (the minute resync finds it), to
  every one of its observers RUNNING again on another host.
* **Cost**: Fargate, DynamoDB and Lambda per month from the request counts above and the prices
  written beside the table.

``python -m benchmarks.pooled_scale`` prints it; ``run(quick=True)`` uses 2,000 observers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from moto import mock_aws

from benchmarks.offline import offline_aws
from benchmarks.reconciler_scale import PagedListTasks, Timing, _pass, measure_scale
from tests.helpers.moto_fleet import default_task_transitions
from tests.helpers.observers import HOSTS_TABLE
from tests.helpers.pooled_fleet import POOLED, PooledFleet, host_event
from vigil.clock import ManualClock, epoch_ms
from vigil.contract.hosts import (
    HOSTS_KEY,
    LIVE_HOST_ATTRIBUTE,
    LIVE_HOST_PARTITION,
    LIVE_INDEX_MARKER,
    HostStatus,
)
from vigil.contract.observers import HOST_REGISTRY_ATTRIBUTE
from vigil.dynamo import to_wire
from vigil.observers.ecs_tasks import task_state
from vigil.observers.host_process.supervisor import BEATS_PER_INTERVAL
from vigil.observers.model import Status
from vigil.observers.registry.layout import Layout

START = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
K = 50
OPERATIONS = (
    "Scan",
    "Query",
    "ListTasks",
    "GetItem",
    "UpdateItem",
    "PutItem",
    "RunTask",
    "StopTask",
)

# Prices: /work/shared/NOTES.md (AWS pricing pages, us-east-1, Linux/x86, as quoted in 2025
# material; approximate). Spot: the commonly seen ~70 % discount (it varies).
PRICES_DATE = "us-east-1, from AWS's pricing pages in 2025, approximate"
VCPU_HOUR = 0.04048
GB_HOUR = 0.004445
SPOT_FACTOR = 0.30
WRITE_PER_MILLION = 0.625
READ_PER_MILLION = 0.125
LAMBDA_PER_MILLION = 0.20
LAMBDA_GB_SECOND = 0.0000166667
HOURS_PER_MONTH = 730
AWS_CALL_SECONDS = 0.008
"""Assumed latency of one AWS call from Lambda, to turn call counts into billed duration."""


# The pass -----------------------------------------------------------------------------------------


def _pooled_fleet(observers: int, clock: ManualClock) -> tuple[PooledFleet, Timing, PagedListTasks]:
    fleet = PooledFleet(clock, slots=K, headroom=0, with_dedicated=False)
    ecs = fleet.ecs()
    hosts = observers // K
    started_ms = epoch_ms(clock() - timedelta(hours=2))
    placed = []
    for index in range(hosts):
        host_id = f"{POOLED}-h{index:04d}"
        arn = ecs.run_host(host_id=host_id, kind=POOLED, slots=K)
        names = [f"obs-{index * K + slot:05d}" for slot in range(K)]
        fleet.dynamodb.put_item(
            TableName=HOSTS_TABLE,
            Item=to_wire(_host_item(host_id, arn, names, clock(), fleet.pooled_definition_arn)),
        )
        placed += [
            (fleet.pooled(n, status=Status.RUNNING, generation=1, task_arn=arn, host=host_id))
            for n in names
        ]
    fleet.put_many(placed, started_at_ms=started_ms)
    # A table the live-hosts index was built with (no one-time backfill in the measured pass)
    fleet.dynamodb.put_item(TableName=HOSTS_TABLE, Item=to_wire({HOSTS_KEY: LIVE_INDEX_MARKER}))
    timing = Timing()
    for client in (fleet.dynamodb, fleet.ecs_client, fleet.sqs):
        timing.attach(client)
    return fleet, timing, PagedListTasks(fleet.ecs_client, timing)


def _host_item(
    host_id: str, arn: str, names: list[str], now: datetime, task_definition: str = ""
) -> dict[str, Any]:
    """A healthy host on the kind's current revision (another revision would make the
    "healthy" pass start a rollout)."""
    return {
        "host_id": host_id,
        "kind": POOLED,
        "status": HostStatus.RUNNING.value,
        "slots": K,
        "assigned": {n: 1 for n in names},
        "running": {n: {"generation": 1, "state": "running"} for n in names},
        "handover": {},
        "task_arn": arn,
        "task_definition": task_definition
        or "arn:aws:ecs:us-east-1:123456789012:task-definition/vigil-observer-pooled-ticker:1",
        "heartbeat_at_ms": epoch_ms(now),
        "created_at_ms": epoch_ms(now - timedelta(hours=2)),
        "start_attempts": 0,
        "version": 2,
        LIVE_HOST_ATTRIBUTE: LIVE_HOST_PARTITION,
        HOST_REGISTRY_ATTRIBUTE: Layout.BY_KIND.value,  # started since the registry is by kind
    }


def measure_pooled(observers: int) -> tuple[list[dict[str, Any]], int]:
    """Rows (healthy, healthy on a sweep minute, 5 % hosts dead) and one full host item's size.

    The clock starts at 12:09:30, so the first pass is an ordinary minute's (no fleet-index
    sweep); the second runs at 12:10, a sweep minute (every 10); the dead-host pass at 12:11:10,
    after every surviving host heartbeats again.
    """
    clock = ManualClock(START + timedelta(minutes=9, seconds=30))
    with mock_aws():
        try:
            fleet, timing, ecs = _pooled_fleet(observers, clock)
            names = [f"obs-{i:05d}" for i in range(K)]
            item_bytes = len(json.dumps(_host_item("x" * 20, "y" * 90, names, START)))
            healthy = _pass(fleet, timing, ecs, "healthy")
            clock.advance(timedelta(seconds=30))
            sweep = _pass(fleet, timing, ecs, "sweep")
            clock.advance(timedelta(seconds=70))
            hosts = sorted(fleet.hosts())
            dead = hosts[::20]
            for host_id in hosts:
                if host_id not in dead:
                    _refresh(fleet, host_id, clock())
            for host_id in dead:
                fleet.kill_host_task(host_id)
            failing = _pass(fleet, timing, ecs, "dead")
            moved = sum(
                1 for n in range(observers) if fleet.item(f"obs-{n:05d}")["generation"] == 2
            )
        finally:
            default_task_transitions()
    assert moved == len(dead) * K, moved
    hosts_count = observers // K
    healthy.update(case=f"{observers:,} pooled on {hosts_count} hosts, healthy")
    sweep.update(case=f"{observers:,} pooled, healthy, a sweep minute (every 10th)")
    failing.update(case=f"{observers:,} pooled, {len(dead)} hosts dead ({moved} observers moved)")
    return [healthy, sweep, failing], item_bytes


def _refresh(fleet: PooledFleet, host_id: str, now: datetime) -> None:
    fleet.dynamodb.update_item(
        TableName=HOSTS_TABLE,
        Key=to_wire({"host_id": host_id}),
        UpdateExpression="SET heartbeat_at_ms = :t",
        ExpressionAttributeValues=to_wire({":t": epoch_ms(now)}),
    )


# A deploy history: the healthy pass beside a week of dead hosts -----------------------------------

LIVE_HOSTS = 40
DEAD_HOSTS = 1_200
"""A week of rollouts (each replaces every host): LOST and STOPPED items kept 7 days."""


class ReadVolume:
    """Items and bytes the hosts table's reads return (Scan, Query, BatchGetItem pages)."""

    def __init__(self) -> None:
        self.items = 0
        self.bytes = 0
        self.pages: dict[str, int] = {}

    def attach(self, client: Any) -> None:
        client.meta.events.register("after-call.dynamodb", self._after)

    def reset(self) -> None:
        self.items = 0
        self.bytes = 0
        self.pages = {}

    def _after(self, model: Any, parsed: Any, **_: Any) -> None:
        if model.name not in ("Scan", "Query", "BatchGetItem"):
            return
        if model.name == "BatchGetItem":
            found = [i for items in parsed.get("Responses", {}).values() for i in items]
        else:
            found = list(parsed.get("Items", []))
        self.pages[model.name] = self.pages.get(model.name, 0) + 1
        self.items += len(found)
        self.bytes += sum(len(json.dumps(i)) for i in found)


def measure_history(live: int = LIVE_HOSTS, dead: int = DEAD_HOSTS) -> list[dict[str, Any]]:
    """The healthy resync, and a stream pass placing one new observer, with ``live`` full hosts
    (K = 50) and ``dead`` LOST or STOPPED hosts kept for their retention (each with its last
    maps, as a rollout leaves them): calls, read pages, items and bytes read."""
    clock = ManualClock(START + timedelta(minutes=9, seconds=30))
    rows = []
    with mock_aws():
        try:
            fleet, timing, ecs = _pooled_fleet(live * K, clock)
            fleet.headroom = 1
            for index in range(dead):
                names = [f"old-{index:05d}-{slot:02d}" for slot in range(K)]
                item = _host_item(f"{POOLED}-d{index:05d}", f"arn:old/{index}", names, clock())
                del item[LIVE_HOST_ATTRIBUTE]  # finished: out of the live index
                item.update(
                    status=(HostStatus.LOST if index % 2 else HostStatus.STOPPED).value,
                    evacuated=True,
                    expiration=int((clock() + timedelta(days=3)).timestamp()),
                )
                fleet.dynamodb.put_item(TableName=HOSTS_TABLE, Item=to_wire(item))
            volume = ReadVolume()
            volume.attach(fleet.dynamodb)
            healthy = _pass(fleet, timing, ecs, "healthy")
            healthy["read"] = (volume.items, volume.bytes, dict(volume.pages))
            healthy.update(case=f"{live} live hosts + {dead:,} dead, healthy pass")
            volume.reset()
            timing.reset()
            observer = fleet.pooled("newcomer")
            fleet.put(observer)
            from tests.helpers.moto_fleet import stream
            from vigil.observers.model import to_item
            from vigil.observers.reconciler import changed_records

            fleet.reconciler(ecs_client=ecs).on_records(
                changed_records([stream(to_item(observer))])
            )
            rows.append(healthy)
            rows.append(
                {
                    "case": f"{live} live hosts + {dead:,} dead, a stream pass placing one",
                    "calls": dict(timing.calls),
                    "read": (volume.items, volume.bytes, dict(volume.pages)),
                }
            )
        finally:
            default_task_transitions()
    return rows


def history_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| Pass | API calls | Hosts-table read pages | Items read | KB read |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        items, size, pages = row["read"]
        calls = ", ".join(f"{op} {n}" for op, n in sorted(row["calls"].items()))
        paged = ", ".join(f"{op} {n}" for op, n in sorted(pages.items()))
        lines.append(
            f"| {row['case']} | {sum(row['calls'].values())} ({calls}) | {paged} | "
            f"{items:,} | {size / 1024:,.0f} |"
        )
    return "\n".join(lines)


# Failover on the simulated clock -----------------------------------------------------------------


@dataclass(frozen=True)
class FailoverCase:
    """A pooled kind's shape for the failover measurement."""

    slots: int = 5
    headroom: int = 5
    observers: int = 12
    task_start_s: int = 0
    """Seconds from RunTask to the new host's first heartbeat (image pull, boot)."""


QUICK_FAILOVER = FailoverCase()
"""5 slots, 5 free, tasks that start at once: a failover that never waits for a task."""
EXAMPLE_FAILOVER = FailoverCase(slots=10, headroom=5, observers=35, task_start_s=60)
"""The example app's pooled kind (``app.py``: 10 slots, 5 free) with hosts full to the headroom
and a Fargate task that takes 60 s to start: a full host's observers outnumber the free slots."""


def measure_failover(by_event: bool, case: FailoverCase = QUICK_FAILOVER) -> float:
    """Seconds from the STOPPED event (or the last heartbeat) to all the host's observers RUNNING."""
    clock = ManualClock(START)
    with mock_aws():
        try:
            fleet = PooledFleet(clock, slots=case.slots, headroom=case.headroom)
            interval = int(fleet.settings.heartbeat_interval.total_seconds())
            beats = _Beats(fleet, interval, case.task_start_s)
            reconciler = fleet.reconciler()
            names = [f"f-{i:02d}" for i in range(case.observers)]
            for name in names:
                fleet.put(fleet.pooled(name))
            reconciler.resync("place")  # places them, starts hosts (headroom: free slots)
            for name in names:
                _settle(fleet, reconciler, name)
            reconciler.resync("headroom")
            warm = 3 * interval + case.task_start_s
            for second in range(warm):  # every host starts and heartbeats, observers claim
                clock.advance(1)
                beats.beat(second, skip=None)
            reconciler.resync("promote")
            victim = max(
                sorted(fleet.hosts().values(), key=lambda h: h.host_id),
                key=lambda h: len(h.assigned),
            ).host_id  # the fullest host
            moving = [n for n in names if fleet.item(n)["host"] == victim]
            for second in range(warm, warm + interval):  # its last heartbeat
                clock.advance(1)
                beats.beat(second, skip=None)
                if beats.phases.get(victim) == second % interval:
                    break
            t0 = clock()
            if by_event:
                fleet.stop_host_task(victim)
                reconciler.on_task_event(
                    task_state(host_event(fleet, victim, last_status="STOPPED", version=9))
                )
            second = int((clock() - START).total_seconds())
            while not all(
                fleet.item(n)["status"] == "RUNNING" and fleet.item(n)["host"] != victim
                for n in moving
            ):
                clock.advance(1)
                second += 1
                beats.beat(second, skip=victim)
                if second % 60 == 0:
                    reconciler.resync(f"minute-{second}")
                if (clock() - t0).total_seconds() > 900:
                    raise RuntimeError("failover did not finish in 15 minutes")
            return (clock() - t0).total_seconds()
        finally:
            default_task_transitions()


def _settle(fleet: PooledFleet, reconciler: Any, name: str) -> None:
    from tests.helpers.moto_fleet import stream
    from vigil.observers.reconciler import changed_records

    reconciler.on_records(changed_records([stream(fleet.item(name))]))


@dataclass
class _Beats:
    """Every started host heartbeats once per interval at its own phase; a host's task starts
    ``task_start_s`` after the second it is first seen with one."""

    fleet: PooledFleet
    interval: int
    task_start_s: int
    phases: dict[str, int] = field(default_factory=dict)
    ready: dict[str, int] = field(default_factory=dict)
    """Host -> the second its task has started."""

    def beat(self, second: int, skip: str | None) -> None:
        for host_id, host in self.fleet.hosts().items():
            if (
                host_id == skip
                or not host.task_arn
                or host.status in (HostStatus.LOST, HostStatus.STOPPED)
            ):
                continue
            ready = self.ready.setdefault(host_id, second + self.task_start_s)
            self.phases.setdefault(host_id, ready % self.interval)
            if second >= ready and self.phases[host_id] == second % self.interval:
                self.fleet.heartbeat(host_id)


# Cost -------------------------------------------------------------------------------------------


def fargate_month(vcpu: float, gb: float) -> float:
    return (vcpu * VCPU_HOUR + gb * GB_HOUR) * HOURS_PER_MONTH


def _resync_month(
    calls: int, own: float, read_units: float, memory_gb: float = 1.0
) -> tuple[float, float]:
    """(Lambda, DynamoDB reads) per month for one resync a minute."""
    passes = 60 * 24 * 30.4
    duration = own + calls * AWS_CALL_SECONDS
    lam = passes * (LAMBDA_PER_MILLION / 1e6 + duration * memory_gb * LAMBDA_GB_SECOND)
    return lam, passes * read_units * READ_PER_MILLION / 1e6


def cost_table(
    dedicated_pass: dict[str, Any], pooled_pass: dict[str, Any], host_item_bytes: int
) -> str:
    heartbeats_month = 30.4 * 24 * 3600 / 30  # one write per 30 s
    rows = []
    task = fargate_month(0.25, 0.5)
    pooled_tasks = {
        "pooled K=50, 0.25 vCPU / 2 GB (32 MiB a slot)": fargate_month(0.25, 2),
        "pooled K=50, 1 vCPU / 4 GB (64 MiB a slot)": fargate_month(1, 4),
    }
    host_wru = max(1, -(-host_item_bytes // 1024))
    for n in (1_000, 10_000):
        # Dedicated: a task and a heartbeat write per observer; the resync reads the fleet index
        # (~400 B an item, eventually consistent: 0.5 RRU per 4 KB).
        d_calls = sum(dedicated_pass["calls"].values()) * n / 1_000
        d_lambda, d_reads = _resync_month(
            int(d_calls), dedicated_pass["own"] * n / 1_000, n * 400 / 4096 * 0.5
        )
        d_writes = n * heartbeats_month * WRITE_PER_MILLION / 1e6
        rows.append(
            (
                f"{n:,}",
                "dedicated 0.25 vCPU / 0.5 GB",
                n * task,
                n * task * SPOT_FACTOR,
                d_writes + d_reads,
                d_lambda,
            )
        )
        for label, host_month in pooled_tasks.items():
            hosts = -(-n // K) + 1  # plus one host of headroom
            p_calls = sum(pooled_pass["calls"].values()) * hosts / 200
            # The pass scans the hosts (consistent: 1 RRU per 4 KB), nothing per observer.
            p_lambda, p_reads = _resync_month(
                int(p_calls), pooled_pass["own"] * hosts / 200, hosts * host_item_bytes / 4096
            )
            # A host beats BEATS_PER_INTERVAL times an interval: each beat leases its children.
            p_writes = (
                hosts * heartbeats_month * BEATS_PER_INTERVAL * host_wru * WRITE_PER_MILLION / 1e6
            )
            rows.append(
                (
                    f"{n:,}",
                    label,
                    hosts * host_month,
                    hosts * host_month * SPOT_FACTOR,
                    p_writes + p_reads,
                    p_lambda,
                )
            )
    lines = [
        "| Observers | Placement | Fargate on-demand $/mo | Fargate Spot $/mo | DynamoDB $/mo | Lambda (resync) $/mo | Total on-demand $/mo | $ per observer | vs dedicated |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    base: dict[str, float] = {}
    for (
        n,
        label,
        fargate,
        spot,
        dynamo,
        lam,
    ) in rows:
        total = fargate + dynamo + lam
        per = total / int(n.replace(",", ""))
        base.setdefault(n, per)
        lines.append(
            f"| {n} | {label} | {fargate:,.0f} | {spot:,.0f} | {dynamo:,.2f} | {lam:,.2f} | {total:,.0f} | {per:.3f} | {base[n] / per:.1f}x cheaper |"
            if per != base[n]
            else f"| {n} | {label} | {fargate:,.0f} | {spot:,.0f} | {dynamo:,.2f} | {lam:,.2f} | {total:,.0f} | {per:.3f} | - |"
        )
    lines.append("")
    lines.append(
        f"Prices ({PRICES_DATE}): Fargate ${VCPU_HOUR}/vCPU-h and ${GB_HOUR}/GB-h, Spot at "
        f"{int((1 - SPOT_FACTOR) * 100)} % off; DynamoDB on-demand ${WRITE_PER_MILLION}/M writes, "
        f"${READ_PER_MILLION}/M reads; Lambda ${LAMBDA_PER_MILLION}/M requests, ${LAMBDA_GB_SECOND}/GB-s "
        f"(1 GB reconciler, {AWS_CALL_SECONDS * 1000:.0f} ms per AWS call assumed). Heartbeats: one write "
        f"per 30 s per observer (dedicated), {BEATS_PER_INTERVAL} per 30 s per host ({host_wru} WRU: a "
        f"full host item is "
        f"{host_item_bytes:,} B). The host sizes are chosen to hold K = 50 slots of the example "
        "kind at the PSS per slot measured above (`host_memory`); a heavier kind needs the "
        "larger host."
    )
    return "\n".join(lines)


# The section ------------------------------------------------------------------------------------


def run(quick: bool = False) -> str:
    observers = 2_000 if quick else 10_000
    pooled, host_bytes = measure_pooled(observers)
    (dedicated, _) = measure_scale(1_000)
    dedicated.update(case="1,000 dedicated (today), all fresh")
    by_event = measure_failover(by_event=True)
    by_silence = measure_failover(by_event=False)
    example_event = measure_failover(by_event=True, case=EXAMPLE_FAILOVER)
    example_silence = measure_failover(by_event=False, case=EXAMPLE_FAILOVER)
    header = (
        "| Pass | Wall (s) | Reconciler's own (s) | API calls | " + " | ".join(OPERATIONS) + " |"
    )
    lines = [header, "|" + "---|" * (4 + len(OPERATIONS))]
    for row in (dedicated, *pooled):
        calls = row["calls"]
        lines.append(
            f"| {row['case']} | {row['wall']:.2f} | {row['own']:.2f} | {sum(calls.values())} | "
            + " | ".join(str(calls.get(op, 0)) for op in OPERATIONS)
            + " |"
        )
    lines.append("")
    lines.append(
        f"Failover on the simulated clock (30 s heartbeats, headroom held): from the host's STOPPED "
        f"event to all its observers RUNNING elsewhere {by_event:.0f} s (target: within 2 intervals, "
        f"60 s); from its last heartbeat {by_silence:.0f} s (3 missed intervals, then the next "
        f"minute's resync, then the new host's next heartbeat). With the example app's pooled "
        f"kind ({EXAMPLE_FAILOVER.slots} slots, {EXAMPLE_FAILOVER.headroom} free, "
        f"{EXAMPLE_FAILOVER.observers} observers: the fullest host's observers outnumber the free "
        f"slots) and tasks that take {EXAMPLE_FAILOVER.task_start_s} s to start: from the STOPPED "
        f"event {example_event:.0f} s, from the last heartbeat {example_silence:.0f} s (the rest "
        "wait for a new host's task)."
    )
    heartbeats = {
        "dedicated": 10_000 * 2,
        "pooled": (10_000 // K) * 2 * BEATS_PER_INTERVAL,
    }
    lines.append(
        f"Heartbeat writes per minute at 10,000 observers: dedicated {heartbeats['dedicated']:,}, "
        f"pooled {heartbeats['pooled']:,} ({BEATS_PER_INTERVAL} per interval per host, K = {K})."
    )
    lines.append("")
    lines.append(history_table(measure_history()))
    lines.append("")
    lines.append(cost_table(dedicated, pooled[0], host_bytes))
    return "\n".join(lines)


if __name__ == "__main__":
    offline_aws()
    import sys

    print(run(quick="--quick" in sys.argv))
