"""Issue 19, manager side: when a host is judged dead (the order of the pass's reads, the start
timeout, clock skew), who owns a host's task, and what the healthy pass reads. Each reproduced
on moto before its fix."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.clients import Delegating, ItemReads
from tests.helpers.moto_fleet import running
from tests.helpers.observers import HOSTS_TABLE
from tests.helpers.pooled_fleet import (
    POOLED,
    PooledFleet,
    an_ordinary_minute,
    create,
    resync,
)
from vigil.contract.hosts import HOSTS_KEY, LIVE_HOST_ATTRIBUTE, LIVE_INDEX_MARKER, HostStatus
from vigil.dynamo import Update, to_wire
from vigil.observers.host_fleet.store import HostStore


def placed(pool: PooledFleet, *names: str) -> None:
    """Pooled observers created, their hosts heartbeating, promoted by an ordinary pass."""
    create(pool, *names)
    an_ordinary_minute(pool)
    resync(pool, "promote")


class PlacesWhileListing(Delegating):
    """The moto ECS client; right after the resync lists the cluster's tasks, a stream pass
    places new observers (a new host: its item, RunTask, its task ARN recorded)."""

    def __init__(self, client: Any, pool: PooledFleet, names: list[str]) -> None:
        super().__init__(client)
        self._pool = pool
        self._names = names

    def list_tasks(self, **request: Any) -> Any:
        page = self._client.list_tasks(**request)
        if self._names:
            names, self._names = self._names, []
            create(self._pool, *names)
        return page


# Defect 3: a host whose task was recorded while the pass listed the cluster ----------------------


def test_a_host_started_while_the_pass_lists_tasks_is_not_lost(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    placed(pool, "a", "b")  # h001 full up to the headroom (K = 3, headroom 1)
    an_ordinary_minute(pool)
    before = set(pool.hosts())
    # When a stream pass starts a host between the resync's ListTasks and its read of the hosts
    racing = PlacesWhileListing(pool.ecs_client, pool, ["c", "d", "e", "f"])
    resync_report = pool.reconciler(ecs_client=racing).resync("racing")
    assert resync_report is not None
    new = set(pool.hosts()) - before
    assert new
    # Then the new hosts are not declared LOST (nor their tasks stopped)
    assert {h: pool.host(h).status for h in new} == dict.fromkeys(new, HostStatus.STARTING)
    assert not [m for m in pool.metrics if m[0] == "HostLost"]


# Defect 6: the start timeout counts from RunTask's success ---------------------------------------


def test_a_host_started_after_a_long_run_task_outage_has_its_start_timeout(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    pool.refuse_run_task()
    create(pool, "a")
    (host_id,) = pool.hosts()
    # Given RunTask refused for longer than the start timeout (10 minutes)
    for step in range(12):
        an_ordinary_minute(pool)
        resync(pool, f"outage-{step}")
    assert pool.host(host_id).task_arn is None
    # When ECS takes the task again, and the pass that retries the host starts it
    pool.allow_run_task()
    for step in range(10):
        pool.clock.advance(timedelta(minutes=1))
        resync(pool, f"retry-{step}")
        if pool.host(host_id).task_arn:
            break
    assert pool.host(host_id).task_arn
    # Then the next pass, a minute later (the task still booting, no heartbeat yet), keeps it
    pool.clock.advance(timedelta(minutes=1))
    resync(pool, "booting")
    assert pool.host(host_id).status is HostStatus.STARTING
    # And a start that never heartbeats is still lost at its own start timeout
    pool.clock.advance(pool.settings.start_timeout)
    resync(pool, "silent")
    assert pool.host(host_id).status is HostStatus.LOST


# run_host: a task ARN already recorded is never overwritten ---------------------------------------


class AnotherPassRecordsFirst(Delegating):
    """The moto ECS client; while this RunTask is answered, another pass starts its own task for
    the same host and records it (its write bumps the host's ``version``)."""

    def __init__(self, client: Any, pool: PooledFleet) -> None:
        super().__init__(client)
        self._pool = pool
        self.theirs: str | None = None

    def run_task(self, **request: Any) -> Any:
        answer = self._client.run_task(**request)
        if self.theirs is None:
            other = self._client.run_task(**{**request, "clientToken": "another-pass"})
            self.theirs = str(other["tasks"][0]["taskArn"])
            host_id = request["clientToken"]
            host = self._pool.host(host_id)
            update = Update().set("task_arn", self.theirs).set("version", host.version + 1)
            self._pool.dynamodb.update_item(
                TableName=HOSTS_TABLE, Key=to_wire({HOSTS_KEY: host_id}), **update.request()
            )
        return answer


def test_run_host_never_overwrites_a_task_arn_another_pass_recorded(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    pool.refuse_run_task()
    create(pool, "a")
    (host_id,) = pool.hosts()
    pool.allow_run_task()
    # When the pass retrying the host's RunTask loses the race to record its task
    racing = AnotherPassRecordsFirst(pool.ecs_client, pool)
    pool.clock.advance(timedelta(minutes=1))
    assert pool.reconciler(ecs_client=racing).resync("late") is not None
    # Then the ARN recorded first stays, and the task this pass started is stopped
    assert pool.host(host_id).task_arn == racing.theirs
    assert running(pool) == [racing.theirs]


# Liveness is judged on the reconciler's clock, not the host's --------------------------------------


def minutes_of_beats(pool: PooledFleet, host_id: str, minutes: int, skew: timedelta) -> None:
    """``minutes`` of a host beating every 30 s with its clock ``skew`` off, a resync a minute."""
    for minute in range(minutes):
        for _ in range(2):
            pool.clock.advance(timedelta(seconds=30))
            assert pool.heartbeat(host_id, skew=skew)
        resync(pool, f"beating-{minute}")


def test_a_healthy_host_whose_clock_is_five_minutes_off_is_never_lost(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a")
    (host_id,) = pool.hosts()
    for skew in (timedelta(minutes=-5), timedelta(minutes=5)):
        minutes_of_beats(pool, host_id, 10, skew)
        assert pool.host(host_id).status is HostStatus.RUNNING
    assert not [m for m in pool.metrics if m[0] == "HostLost"]
    assert pool.item("a")["generation"] == 1


@pytest.mark.parametrize("skew", [timedelta(minutes=-5), timedelta(minutes=5)], ids=str)
def test_a_host_whose_clock_is_off_is_still_lost_once_it_stops_beating(
    pooled_only: PooledFleet, skew: timedelta
) -> None:
    pool = pooled_only
    placed(pool, "a")
    (host_id,) = pool.hosts()
    minutes_of_beats(pool, host_id, 2, skew)
    # When it stops beating (its task still listed: a hung host)
    passes = 0
    while pool.host(host_id).status is HostStatus.RUNNING and passes < 10:
        pool.clock.advance(timedelta(minutes=1))
        resync(pool, f"silent-{passes}")
        passes += 1
    # Then it is lost within 3 intervals and a pass of its last beat, as a host in time is
    assert pool.host(host_id).status is HostStatus.LOST
    assert passes <= 3


# The healthy pass reads the live hosts only, whatever the deploy history --------------------------


def dead_hosts(pool: PooledFleet, count: int) -> None:
    """A deploy history: hosts LOST or STOPPED and finished, kept for their retention with their
    last maps, as rollouts leave them."""
    for index in range(count):
        host_id = f"old-{index:03d}"
        store = HostStore(pool.dynamodb, HOSTS_TABLE)
        host = store.create(host_id, POOLED, 3, pool.pooled_definition_arn, pool.clock())
        host = store.assign(host, f"gone-{index}", 1)
        status = HostStatus.LOST if index % 2 else HostStatus.STOPPED
        store.mark_evacuated(store.mark(host, status, "history", now=pool.clock()))


def test_the_healthy_pass_reads_only_live_hosts_whatever_the_history(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a", "b")
    an_ordinary_minute(pool)
    resync(pool, "warm")  # a first pass may backfill the index (once per table)
    live = len(pool.hosts())
    dead_hosts(pool, 30)
    an_ordinary_minute(pool)
    reads = ItemReads(pool.dynamodb)
    resync(pool, "healthy")
    # Then the pass read the live hosts (and its index's keys), not the 30 dead ones
    assert reads.items <= 2 * live + 1
    # And a stream pass placing an observer reads no more
    reads.items = 0
    create(pool, "c")
    assert reads.items <= 2 * live + 2


def test_a_lost_host_leaves_the_passes_reads_once_its_observers_moved(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a")
    victim = pool.item("a")["host"]
    pool.kill_host_task(victim)
    an_ordinary_minute(pool)
    resync(pool, "loses it")
    assert pool.host(victim).status is HostStatus.LOST
    assert pool.item("a")["host"] != victim
    live, _ = HostStore(pool.dynamodb, HOSTS_TABLE).live([POOLED], pool.clock())
    assert victim not in {h.host_id for h in live}
    assert victim in pool.hosts()  # still there for inspection (GET /hosts) until it expires


def test_hosts_started_before_the_live_index_are_found_by_a_one_time_backfill(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a")
    (host_id,) = pool.hosts()
    # Given a table from before the index: no marker, the host without the index attribute
    pool.dynamodb.delete_item(TableName=HOSTS_TABLE, Key=to_wire({HOSTS_KEY: LIVE_INDEX_MARKER}))
    pool.dynamodb.update_item(
        TableName=HOSTS_TABLE,
        Key=to_wire({HOSTS_KEY: host_id}),
        **Update().remove(LIVE_HOST_ATTRIBUTE).request(),
    )
    an_ordinary_minute(pool)
    resync(pool, "backfills")
    an_ordinary_minute(pool)
    resync(pool, "reads the index")
    live, _ = HostStore(pool.dynamodb, HOSTS_TABLE).live([POOLED], pool.clock())
    assert [h.host_id for h in live] == [host_id]
    assert pool.host(host_id).status is HostStatus.RUNNING
    assert len(pool.hosts()) == 1  # no second host started for an observer it could not see
