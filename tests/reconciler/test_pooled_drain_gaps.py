"""Gaps in the manager's handling of a host that drains itself (SIGTERM: it heartbeats DRAINING
at once), and of dead hosts' items, each reproduced on moto before its fix."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.clients import Delegating
from tests.helpers.hosts import host_item, mark_host
from tests.helpers.observers import HOSTS_TABLE
from tests.helpers.pooled_fleet import (
    PooledFleet,
    an_ordinary_minute,
    create,
    host_event,
    resync,
)
from vigil.clock import epoch_ms
from vigil.contract.hosts import HOST_EXPIRES, HOSTS_KEY, HostStatus, SlotState
from vigil.dynamo import to_wire
from vigil.observers.ecs_tasks import task_state
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.host_process.heartbeat_store import HeartbeatStore, HostFenced, Slot


class DrainsAfterScan(Delegating):
    """The moto DynamoDB client; right after the pass's read of the hosts, the named host's own
    heartbeat announces DRAINING (its SIGTERM), which bumps no ``version``."""

    def __init__(self, client: Any, host_id: str) -> None:
        super().__init__(client)
        self._host_id = host_id

    def scan(self, **request: Any) -> Any:
        page = self._client.scan(**request)
        if request["TableName"] == HOSTS_TABLE:
            mark_host(self._client, HOSTS_TABLE, self._host_id, status=HostStatus.DRAINING)
        return page

    def batch_get_item(self, **request: Any) -> Any:
        page = self._client.batch_get_item(**request)
        if HOSTS_TABLE in request["RequestItems"]:
            mark_host(self._client, HOSTS_TABLE, self._host_id, status=HostStatus.DRAINING)
        return page


# c. A promotion applies to a STARTING host only ------------------------------------------------


def test_a_promotion_never_writes_running_over_a_host_that_drains_itself(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    create(pool, "a")
    host_id = pool.item("a")["host"]
    assert pool.heartbeat(host_id)
    assert pool.host(host_id).status is HostStatus.STARTING
    # When the host announces its shutdown between the pass's scan and its promotion
    pool.clock.advance(timedelta(minutes=1))
    pool.reconciler(dynamodb=DrainsAfterScan(pool.dynamodb, host_id)).resync("promote")
    # Then it stays DRAINING (a RUNNING host would take observers back)
    assert pool.host(host_id).status is HostStatus.DRAINING


def placed(pool: PooledFleet, *names: str) -> str:
    """Pooled observers created on one host, heartbeating, promoted; answers the host."""
    create(pool, *names)
    an_ordinary_minute(pool)
    resync(pool, "promote")
    host_id = str(pool.item(names[0])["host"])
    assert all(pool.item(n)["host"] == host_id for n in names)
    return host_id


def drains_itself(pool: PooledFleet, host_id: str, *runs: str) -> None:
    """The host's SIGTERM heartbeat: DRAINING, running only ``runs`` (at their generations)."""
    mark_host(
        pool.dynamodb,
        HOSTS_TABLE,
        host_id,
        status=HostStatus.DRAINING,
        heartbeat_at_ms=epoch_ms(pool.clock()),
        running={n: {"generation": pool.item(n)["generation"], "state": "RUNNING"} for n in runs},
    )


# a. An observer its draining host never started is moved at once --------------------------------


def test_an_observer_a_draining_host_never_started_is_placed_elsewhere_by_the_next_pass(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    host_id = placed(pool, "a")
    create(pool, "b")
    assert (pool.item("b")["host"], pool.item("b")["status"]) == (host_id, "STARTING")
    # Given the host runs "a" but has not started "b" yet when it is told to stop
    pool.clock.advance(timedelta(minutes=1))
    drains_itself(pool, host_id, "a")
    # When the next ordinary pass runs
    resync(pool, "drain")
    # Then "b" is placed on another host at once (same generation: it never ran), "a" stays
    moved = pool.item("b")
    assert moved["host"] != host_id and moved["generation"] == 1
    assert pool.host(moved["host"]).assigned == {"b": 1}
    assert pool.item("a")["host"] == host_id


# e. Dead hosts expire a week after their end -----------------------------------------------------


def test_a_dead_host_expires_a_week_after_its_end_and_the_pass_skips_it_once_expired(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    host_id = placed(pool, "a")
    victim = pool.host(host_id)
    pool.stop_host_task(host_id)
    lost_at = pool.clock()
    pool.reconciler().on_task_event(
        task_state(host_event(pool, host_id, last_status="STOPPED", version=5))
    )
    # Then its item carries the TTL attribute, 7 days on, in epoch seconds
    item = host_item(pool.dynamodb, HOSTS_TABLE, host_id)
    assert pool.host(host_id).status is HostStatus.LOST
    assert item[HOST_EXPIRES] == int((lost_at + timedelta(days=7)).timestamp())
    survivor = pool.item("a")["host"]
    assert HOST_EXPIRES not in host_item(pool.dynamodb, HOSTS_TABLE, survivor)  # live: never
    store = HostStore(pool.dynamodb, HOSTS_TABLE)
    # Still inspectable during the week
    assert host_id in {h.host_id for h in store.scan(lost_at + timedelta(days=6))}
    # When the week is over (DynamoDB has not deleted it yet), Then the manager skips it
    later = lost_at + timedelta(days=7, seconds=1)
    assert {h.host_id for h in store.scan(later)} == {survivor}
    assert victim.host_id in pool.hosts()  # the item itself is still there


def test_a_zombie_heartbeat_against_a_deleted_host_item_is_fenced(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    host_id = placed(pool, "a")
    arn = pool.host(host_id).task_arn
    assert arn is not None
    # Given DynamoDB deleted the host's item (its TTL), and the host still runs somewhere
    pool.dynamodb.delete_item(TableName=HOSTS_TABLE, Key=to_wire({HOSTS_KEY: host_id}))
    beats = HeartbeatStore(pool.dynamodb, HOSTS_TABLE, host_id=host_id, task_arn=arn)
    # When it heartbeats, Then it is refused (a zombie), and no item is written back
    with pytest.raises(HostFenced, match="its item is gone"):
        beats.beat({"a": Slot(1, SlotState.RUNNING)})
    assert host_id not in pool.hosts()
