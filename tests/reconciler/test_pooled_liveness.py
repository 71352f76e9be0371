"""Issue 19, manager side: when a host is judged dead (the order of the pass's reads, the start
timeout, clock skew), who owns a host's task, and what the healthy pass reads. Each reproduced
on moto before its fix."""

from __future__ import annotations

from typing import Any

from tests.helpers.pooled_fleet import (
    Delegating,
    PooledFleet,
    an_ordinary_minute,
    create,
    resync,
)
from vigil.contract.hosts import HostStatus


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
