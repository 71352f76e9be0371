"""Issue 19, manager side: a lost exit report, observers that end on a host, the rollout's budget
and finished hand-overs. Each reproduced on moto with the pooled fleet helpers before its fix."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers.moto_fleet import TABLE, default_task_transitions, stream
from tests.helpers.observers import HOSTS_TABLE
from tests.helpers.pooled_fleet import (
    POOLED,
    PooledFleet,
    an_ordinary_minute,
    gauges,
    placed,
    resync,
)
from vigil.clock import ManualClock
from vigil.contract.hosts import LIVE_HOST_STATUSES, HostStatus
from vigil.observers import decisions as d
from vigil.observers.host_fleet.decide import decide_pooled
from vigil.observers.host_fleet.model import Host
from vigil.observers.model import Desired, Observer, Status
from vigil.observers.rebalance_requests import RebalanceRequests
from vigil.observers.reconciler import changed_records
from vigil.observers.registry import ObserverRegistry
from vigil.observers.rollout import HostView, plan_pooled


def holders(pool: PooledFleet, name: str) -> dict[str, int]:
    """Live host id -> generation, for every live host whose ``assigned`` names ``name``."""
    return {
        h.host_id: h.assigned[name]
        for h in pool.hosts().values()
        if h.status in LIVE_HOST_STATUSES and name in h.assigned
    }


def report(pool: PooledFleet, name: str, exit_code: int) -> None:
    """The host's exit report of ``name``'s child, and the stream pass that reads it."""
    item = pool.item(name)
    pool.finished.add((item["host"], name, int(item["generation"])))
    change = pool.host_exit(name, exit_code, "exited")
    pool.reconciler().on_records(changed_records([stream(change["new"], change["old"])]))


# 1. A child whose exit report was lost is restarted ----------------------------------------------


def test_a_running_observer_whose_exit_report_was_lost_is_restarted(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a", "b")
    host_id = pool.item("a")["host"]
    assert pool.item("a")["status"] == "RUNNING"
    # When a's child exits and its host's one exit report fails (a throttle): the host never
    # runs generation 1 again, its heartbeats no longer list it, the record says nothing
    pool.finished.add((host_id, "a", 1))
    # And an hour of heartbeats and passes go by
    for step in range(12):
        pool.clock.advance(timedelta(minutes=5))
        pool.heartbeat_all()
        resync(pool, f"p{step}")
    # Then a was noticed and restarted: a newer generation runs
    item = pool.item("a")
    host = pool.host(item["host"])
    assert int(item["generation"]) >= 2, item
    assert item["status"] == "RUNNING" and host.runs("a", int(item["generation"]))
    assert pool.item("b")["generation"] == 1  # its neighbour untouched


def pooled_record(heartbeat_at: datetime, **fields: object) -> d.Record:
    values: dict[str, object] = {
        "name": "a",
        "kind": POOLED,
        "config": {},
        "desired": Desired.RUNNING,
        "status": Status.RUNNING,
        "created_at": heartbeat_at,
        "updated_at": heartbeat_at,
        "generation": 1,
        "host": "h1",
        "heartbeat_at": heartbeat_at,
    }
    values.update(fields)
    return d.Record(Observer(**values), pooled=d.Pooled(host="h1"))  # type: ignore[arg-type]


def test_a_child_missing_from_running_is_given_one_heartbeat_interval() -> None:
    claimed = datetime(2026, 1, 1, tzinfo=UTC)
    settings = d.Settings()
    record = pooled_record(claimed)

    def on_host(beat: timedelta, **fields: object) -> Host:
        values: dict[str, object] = {
            "assigned": {"a": 1},
            "running": {},
            "task_arn": "arn:h1",
            "heartbeat_at": claimed + beat,
        }
        values.update(fields)
        return Host("h1", POOLED, HostStatus.RUNNING, 3, claimed, **values)  # type: ignore[arg-type]

    now = claimed + timedelta(minutes=2)
    # A heartbeat within one interval of the claim may predate the child: nothing yet
    quiet = decide_pooled(record, on_host(settings.heartbeat_interval), now, settings)
    assert quiet.write is None
    # A later one that does not list it: the child is gone, restarted as after a crash
    gone = decide_pooled(record, on_host(settings.heartbeat_interval * 2), now, settings)
    assert isinstance(gone.write, d.StartTask) and gone.write.generation == 2
    assert gone.write.last_exit is not None and gone.write.last_exit.crashed
    # One handed over (told to stop) whose report was lost: restarted, no failure counted
    handed = on_host(settings.heartbeat_interval * 2, assigned={}, handover={"a": 1})
    moved = decide_pooled(record, handed, now, settings)
    assert isinstance(moved.write, d.StartTask) and moved.write.consecutive_failures == 0
    assert moved.write.last_exit is not None and not moved.write.last_exit.crashed
    # One listed running is left alone
    fine = decide_pooled(
        record,
        on_host(timedelta(hours=1), running={"a": {"generation": 1, "state": "running"}}),
        now,
        settings,
    )
    assert fine.write is None


# 2. An observer that ends (FAILED, STOPPED) leaves its host --------------------------------------


def test_a_failed_observer_frees_its_slot_and_is_no_shortfall(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c")
    # When a's child exits with a bad configuration (code 2): FAILED at once
    report(pool, "a", 2)
    assert pool.item("a")["status"] == "FAILED"
    # Then its slot is free, and the gauges want only what should run
    an_ordinary_minute(pool)
    pool.metrics.clear()
    resync(pool, "after")
    assert holders(pool, "a") == {}
    seen = gauges(pool)
    assert (seen["FleetDesiredRunning"], seen["FleetRunning"]) == (2, 2), seen


def test_an_observer_stopped_while_backing_off_frees_its_slot(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    placed(pool, "a", "b")
    # When a crashes twice (the second time it backs off: PENDING) and is then stopped
    report(pool, "a", 1)
    an_ordinary_minute(pool)
    report(pool, "a", 1)
    assert pool.item("a")["status"] == "PENDING"
    before = pool.item("a")
    ObserverRegistry(pool.dynamodb, TABLE, clock=pool.clock).request_stop("a")
    pool.reconciler().on_records(changed_records([stream(pool.item("a"), before)]))
    an_ordinary_minute(pool)
    pool.metrics.clear()
    resync(pool, "after")
    # Then it is STOPPED on no host, and not wanted
    assert pool.item("a")["status"] == "STOPPED"
    assert holders(pool, "a") == {}
    seen = gauges(pool)
    assert (seen["FleetDesiredRunning"], seen["FleetRunning"]) == (1, 1), seen


def test_a_failed_observer_on_an_old_host_does_not_stall_a_rollout(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c", "d", "e")
    report(pool, "a", 2)  # FAILED, on a host of the old revision
    old = pool.pooled_definition_arn
    pool.pooled_definition_arn = pool.register_pooled_revision("vigil/observer:v2")
    for step in range(15):
        pool.clock.advance(timedelta(seconds=30))
        pool.heartbeat_all()
        resync(pool, f"roll-{step}")
        pool.complete_hand_overs()
    on_old = sorted(
        n
        for h in pool.hosts().values()
        if h.status in LIVE_HOST_STATUSES and h.task_definition == old
        for n in h.assigned
    )
    assert on_old == []
    for name in "bcde":
        assert pool.item(name)["status"] == "RUNNING", name


# 3. A pooled rollout keeps max_unavailable while children stop slowly ----------------------------


@pytest.fixture
def twenty(aws: None, clock: ManualClock) -> Iterator[PooledFleet]:
    """Pooled only, K = 5, headroom 1, max_unavailable 10 % (20 observers: budget 2); a
    handed-over child checkpoints for two heartbeats (longer than a pass) before it exits."""
    built = PooledFleet(clock, with_dedicated=False, slots=5, stop_beats=2)
    try:
        yield built
    finally:
        default_task_transitions()


def unavailable(pool: PooledFleet, names: list[str]) -> int:
    """Observers not running at their current generation on their current host."""
    up = {
        (n, g)
        for h in pool.hosts().values()
        if h.status in LIVE_HOST_STATUSES
        for n, g in h.assigned.items()
        if h.runs(n, g)
    }
    return sum(1 for n in names if (n, int(pool.item(n)["generation"])) not in up)


def test_a_pooled_rollout_never_has_more_than_its_budget_unavailable(twenty: PooledFleet) -> None:
    pool = twenty
    names = [f"o{i:02d}" for i in range(20)]
    placed(pool, *names)
    an_ordinary_minute(pool)
    assert unavailable(pool, names) == 0
    pool.pooled_definition_arn = pool.register_pooled_revision("vigil/observer:v2")
    seen: list[int] = []
    for step in range(8):
        pool.clock.advance(timedelta(seconds=30))
        pool.heartbeat_all()
        resync(pool, f"roll-{step}")
        seen.append(unavailable(pool, names))
        pool.complete_hand_overs()
    # Then never more than the budget (2) was unavailable after a pass, and the rollout moved
    assert max(seen) <= 2, seen
    moved = sum(
        1 for n in names if pool.item(n).get("task_definition") == pool.pooled_definition_arn
    )
    assert moved >= 2, (moved, seen)


def test_hand_overs_still_stopping_use_the_budget() -> None:
    def old(leaving: int) -> HostView:
        return HostView("h1", POOLED, "td:1", HostStatus.DRAINING, 18, 20, leaving=leaving)

    fresh = HostView("h2", POOLED, "td:2", HostStatus.RUNNING, 0, 20)
    # 20 observers at 10 %: budget 2; two handed over, their children still stopping
    assert plan_pooled("td:2", 10, 20, [old(2), fresh]).moves == 0
    assert plan_pooled("td:2", 10, 20, [old(1), fresh]).moves == 1


# 4. A finished hand-over leaves no entry behind ---------------------------------------------------


def test_a_finished_hand_over_is_cleared_from_its_old_host(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c", "d")  # h001: a b c, h002: d
    source = pool.item("a")["host"]
    RebalanceRequests(pool.dynamodb, HOSTS_TABLE).request(POOLED, 1, "ops", pool.clock())
    an_ordinary_minute(pool)
    resync(pool, "rebalance")
    handed = dict(pool.host(source).handover)
    assert len(handed) == 1
    pool.complete_hand_overs()
    # When the next generation runs on its new host and a pass goes by
    an_ordinary_minute(pool)
    resync(pool, "after")
    an_ordinary_minute(pool)
    resync(pool, "later")
    # Then the old host no longer keeps the hand-over (it may take the observer back one day)
    (name,) = handed
    assert pool.item(name)["host"] != source and pool.item(name)["status"] == "RUNNING"
    assert pool.host(source).handover == {}
