"""Review of issue 7 (pooled hosts): defects found at the seams, each reproduced on moto before its fix."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.moto_fleet import running, stream
from tests.helpers.observers import HOSTS_TABLE
from tests.helpers.pooled_fleet import POOLED, PooledFleet, create, resync
from vigil.contract.hosts import LIVE_HOST_STATUSES
from vigil.observers.fleet_store import FleetStore
from vigil.observers.rebalance_requests import RebalanceRequests
from vigil.observers.reconciler import changed_records


def assigned_on(pool: PooledFleet, name: str) -> dict[str, int]:
    """host id -> generation, for every live host whose ``assigned`` map holds ``name``."""
    return {
        host_id: host.assigned[name]
        for host_id, host in pool.hosts().items()
        if host.status in LIVE_HOST_STATUSES and name in host.assigned
    }


def host_ids_of_tasks(pool: PooledFleet) -> list[str]:
    ids = []
    for arn in running(pool):
        env = pool.describe(arn)["overrides"]["containerOverrides"][0]["environment"]
        ids += [e["value"] for e in env if e["name"] == "VIGIL_HOST_ID"]
    return ids


def test_a_rebalance_marker_is_read_as_a_host_and_gets_a_fargate_task(pool: PooledFleet) -> None:
    # Given a healthy pooled kind
    create(pool, "a", "b")
    pool.heartbeat_all()
    resync(pool, "p0")
    # When an operator asks for a rebalance (POST /observers/rebalance writes this marker)
    RebalanceRequests(pool.dynamodb, HOSTS_TABLE).request(POOLED, 4, "ops", pool.clock())
    pool.clock.advance(timedelta(seconds=30))
    pool.heartbeat_all()
    # Then the resync pass completes (it raises HostConflict, uncaught by ``isolated``: scan()
    # has no is_rebalance_item filter, the marker is a STARTING "host" without a task, retry_run
    # RunTasks it, and record_task's version condition can never hold on the marker)
    resync(pool, "p1")
    # And no Fargate task was started for the marker
    assert not [h for h in host_ids_of_tasks(pool) if h.startswith("#")]


def test_a_rebalance_request_is_acted_on_and_cleared(pool: PooledFleet) -> None:
    create(pool, "a", "b", "c", "d")  # h001: a b c, h002: d
    pool.heartbeat_all()
    resync(pool, "p0")
    RebalanceRequests(pool.dynamodb, HOSTS_TABLE).request(POOLED, 4, "ops", pool.clock())
    for step in range(3):
        pool.clock.advance(timedelta(seconds=30))
        pool.heartbeat_all()
        resync(pool, f"p{step + 1}")
    # Then the marker was acted on and deleted (plan_rebalance is never called by the manager)
    marker = pool.dynamodb.get_item(
        TableName=HOSTS_TABLE, Key={"host_id": {"S": f"#rebalance#{POOLED}"}}
    )
    assert "Item" not in marker


def test_a_new_pooled_revision_is_rolled_out_to_running_observers(pool: PooledFleet) -> None:
    create(pool, "a", "b")
    pool.heartbeat_all()
    resync(pool, "p0")
    old = pool.pooled_definition_arn
    # When a deploy registers a new revision of the pooled kind's task definition
    pool.pooled_definition_arn = pool.register_pooled_revision("vigil/observer:v2")
    assert pool.pooled_definition_arn != old
    # And many passes run, hosts heartbeating and children exiting when told to stop
    for step in range(20):
        pool.clock.advance(timedelta(seconds=30))
        pool.heartbeat_all()
        resync(pool, f"p{step + 1}")
    # Then no observer is still placed on a host of the old revision (plan_pooled is never used)
    on_old = {
        name
        for host in pool.hosts().values()
        if host.status in LIVE_HOST_STATUSES and host.task_definition == old
        for name in host.assigned
    }
    assert on_old == set()


def test_a_crash_between_placer_steps_runs_one_generation_on_two_hosts(
    pool: PooledFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the Lambda dies after step 3 (assigned on h001) and before step 4 (record_placed)
    # for "c", the third observer on a K = 3 host
    real = FleetStore.record_placed
    died: list[str] = []

    def dies_once(self: FleetStore, name: str, *args: Any, **kwargs: Any) -> bool:
        if name == "c" and not died:
            died.append(name)
            raise RuntimeError("Lambda timed out")
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(FleetStore, "record_placed", dies_once)
    with pytest.raises(RuntimeError):
        create(pool, "a", "b", "c")
    assert assigned_on(pool, "c") == {f"{POOLED}-h001": 1}
    # And h001 heartbeats: its child of c claims generation 1 and runs
    pool.heartbeat_all()
    assert pool.item("c")["status"] == "RUNNING"
    # When the next pass runs (c is still in the waiting index, its retry time passed)
    pool.clock.advance(timedelta(seconds=30))
    pool.heartbeat_all()
    resync(pool, "p0")
    # Then c is assigned on one host only: the RetryStart found h001 "full" (it counts c itself),
    # moved the SAME generation to another host and left it on h001, so two copies of
    # generation 1 run and write checkpoints (neither is fenced: same generation)
    assert len(assigned_on(pool, "c")) == 1, assigned_on(pool, "c")


def test_a_clean_exit_on_a_full_host_restarts_in_place_and_leaks_no_slot(
    pool: PooledFleet,
) -> None:
    create(pool, "a", "b", "c")  # h001 full (K = 3)
    pool.heartbeat_all()
    resync(pool, "p0")
    host_id = pool.item("a")["host"]
    # When a's child exits (its host reports it) and the reconciler restarts it
    change = pool.host_exit("a", 0, "exited cleanly")
    pool.reconciler().on_records(changed_records([stream(change["new"], change["old"])]))
    item = pool.item("a")
    assert item["generation"] == 2
    # Then no host keeps a stale assignment of generation 1 (a ghost slot nobody frees: the
    # host never runs it again, yet it counts as used for placement, headroom and scale-in)
    assert assigned_on(pool, "a") == {item["host"]: 2}
    # And placement was sticky: its own slot on h001 was free for it
    assert item["host"] == host_id


def test_scale_in_does_not_drain_a_full_host_while_new_hosts_are_empty() -> None:
    from datetime import UTC, datetime

    from vigil.contract.hosts import HostStatus, Placement
    from vigil.observers import decisions as d
    from vigil.observers.host_fleet.model import Host
    from vigil.observers.host_fleet.planning import plan_hosts
    from vigil.observers.kind_options import KindOptions

    now = datetime(2026, 1, 1, tzinfo=UTC)
    full = Host(
        "h001",
        POOLED,
        HostStatus.RUNNING,
        3,
        now,
        assigned={"a": 1, "b": 1, "c": 1},
        task_arn="arn:h001",
        heartbeat_at=now,
    )
    # Two hosts just started (one for a waiting observer, one for the headroom: the pass that
    # places waiting observers also starts hosts for them), not heartbeating yet
    empty = [
        Host(f"h00{i}", POOLED, HostStatus.STARTING, 3, now, task_arn=f"arn:h00{i}") for i in (2, 3)
    ]
    plan = plan_hosts(
        [full, *empty], None, {}, {POOLED: KindOptions(Placement.POOLED, 3, 1)}, now, d.Settings()
    )
    # Then the surplus is an empty host, not the full one whose 3 observers would be handed over
    assert "h001" not in plan.drain
