"""Gaps the closing review of pooled hosts left on the manager side, each reproduced on moto
before its fix: a host loss repaired in one pass, the fleet gauges on every pass, hand-overs in
the shortfall, alarms on lost and stuck hosts, and a kind whose hosts cannot start."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.helpers.clients import Delegating
from tests.helpers.moto_fleet import TABLE, default_task_transitions, running, stream
from tests.helpers.observers import HOSTS_TABLE
from tests.helpers.pooled_fleet import (
    POOLED,
    PooledFleet,
    an_ordinary_minute,
    create,
    gauges,
    host_event,
    placed,
    resync,
)
from vigil.clock import ManualClock
from vigil.contract.hosts import HOSTS_KEY, HostStatus
from vigil.dynamo import Update, to_wire
from vigil.observers.ecs_tasks import task_state
from vigil.observers.reconciler import PassReport, changed_records


def on_host(pool: PooledFleet, host_id: str) -> list[str]:
    return sorted(pool.host(host_id).assigned)


class FailingTable(Delegating):
    """The moto DynamoDB client, with GetItem of the named observers failing (a throttle)."""

    def __init__(self, client: Any, names: set[str]) -> None:
        super().__init__(client)
        self._names = names

    def get_item(self, **request: Any) -> Any:
        if request["TableName"] == TABLE and request["Key"]["name"]["S"] in self._names:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "GetItem"
            )
        return self._client.get_item(**request)


class RefusingStop(Delegating):
    """The moto ECS client, with StopTask refused (AccessDenied, a throttle, a timeout alike)."""

    def stop_task(self, **request: Any) -> Any:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "no"}}, "StopTask")


# 1. A host loss that failed part-way is repaired by the next regular pass ------------------------


def test_a_loss_interrupted_by_a_dynamodb_error_is_finished_by_the_next_pass(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c", "d")
    victim = pool.item("a")["host"]
    moving = on_host(pool, victim)
    pool.kill_host_task(victim)
    # When the pass that finds the host dead cannot read one of its observers
    an_ordinary_minute(pool)
    flaky = FailingTable(pool.dynamodb, {moving[1]})
    pool.reconciler(dynamodb=flaky).resync("interrupted")
    assert pool.host(victim).status is HostStatus.LOST
    assert pool.item(moving[1])["host"] == victim  # left behind
    # Then the next ordinary pass (no sweep) moves it
    an_ordinary_minute(pool)
    resync(pool, "repair")
    for name in moving:
        item = pool.item(name)
        assert item["host"] != victim and item["generation"] == 2, name
    # And once repaired, a healthy pass reads no observer again (O(hosts))
    an_ordinary_minute(pool)
    resync(pool, "settle")
    an_ordinary_minute(pool)
    pool.counter.reset()
    resync(pool, "healthy")
    assert pool.counter.calls["GetItem"] == 0


def test_a_stopped_event_whose_stop_task_fails_is_finished_by_the_next_pass(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a", "b")
    victim = pool.item("a")["host"]
    moving = on_host(pool, victim)
    # When the host's STOPPED event is handled but StopTask fails (its task runs on)
    event = task_state(host_event(pool, victim, last_status="STOPPED", version=3))
    pool.reconciler(ecs_client=RefusingStop(pool.ecs_client)).on_task_event(event)
    assert pool.host(victim).status is HostStatus.LOST
    assert pool.host(victim).task_arn in running(pool)
    # Then the next ordinary pass stops its task and moves every observer
    an_ordinary_minute(pool)
    resync(pool, "repair")
    assert pool.host(victim).task_arn not in running(pool)
    for name in moving:
        assert pool.item(name)["host"] != victim and pool.item(name)["generation"] == 2


def test_a_redelivered_stopped_event_finishes_an_interrupted_loss(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    create(pool, "a")
    victim = pool.item("a")["host"]
    event = task_state(host_event(pool, victim, last_status="STOPPED", version=3))
    pool.reconciler(dynamodb=FailingTable(pool.dynamodb, {"a"})).on_task_event(event)
    assert pool.item("a")["host"] == victim
    # When ECS delivers the event again (at least once) or Lambda retries it
    pool.reconciler().on_task_event(event)
    # Then the observer moved, and the host is finished with
    assert pool.item("a")["host"] != victim and pool.item("a")["generation"] == 2
    assert pool.host(victim).evacuated


# 2. The fleet gauges on every pass of an all-pooled fleet ----------------------------------------


def test_an_ordinary_pooled_pass_emits_desired_and_running_without_reading_observers(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c", "d")
    an_ordinary_minute(pool)
    pool.metrics.clear()
    pool.counter.reset()
    # When an ordinary pass (not a sweep's) runs on a healthy fleet
    resync(pool, "healthy")
    # Then desired and running are emitted, equal, from the hosts alone
    seen = gauges(pool)
    assert (seen["FleetDesiredRunning"], seen["FleetRunning"]) == (4, 4)
    assert pool.counter.calls["GetItem"] == 0
    # And when a host dies (its observers moved, not running yet), running drops below desired
    pool.kill_host_task(pool.item("a")["host"])
    pool.clock.advance(timedelta(seconds=30))
    pool.metrics.clear()
    resync(pool, "dead")
    seen = gauges(pool)
    assert seen["FleetDesiredRunning"] == 4 and seen["FleetRunning"] < 4


def test_observers_backing_off_count_as_desired_not_running(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    placed(pool, "a", "b")
    # When "a" crashes and backs off (PENDING until its next start, in the waiting index)
    for _ in range(2):
        change = pool.host_exit("a", 1, "crashed")
        pool.reconciler().on_records(changed_records([stream(change["new"], change["old"])]))
        pool.heartbeat_all()
    assert pool.item("a")["status"] in ("PENDING", "STARTING")
    an_ordinary_minute(pool)
    pool.metrics.clear()
    resync(pool, "backoff")
    seen = gauges(pool)
    assert seen["FleetDesiredRunning"] == 2 and seen["FleetRunning"] == 1


# 3. Hand-overs of a rollout are not a shortfall; a real one during a rollout is -----------------


def shortfall(pool: PooledFleet) -> float:
    """What the FleetShortfall alarm computes: desired - running - handing over."""
    seen = gauges(pool)
    return seen["FleetDesiredRunning"] - seen["FleetRunning"] - seen["FleetHandingOver"]


def new_revision(pool: PooledFleet) -> None:
    pool.pooled_definition_arn = pool.register_pooled_revision("vigil/observer:v2")


def test_observers_handed_over_by_a_rollout_are_not_a_shortfall(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c", "d", "e", "f")  # two full hosts of K = 3
    new_revision(pool)
    # When the rollout runs pass after pass, hand-overs always in flight
    seen_in_flight = 0
    for step in range(30):
        pool.clock.advance(timedelta(seconds=30))
        pool.heartbeat_all()
        pool.metrics.clear()
        resync(pool, f"roll-{step}")
        values = gauges(pool)
        # Then no pass counts a planned hand-over as missing
        assert shortfall(pool) == 0, (step, values)
        seen_in_flight = max(seen_in_flight, int(values["FleetHandingOver"]))
        pool.complete_hand_overs()
    assert seen_in_flight >= 1


def test_a_host_lost_during_a_rollout_is_still_a_shortfall(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c", "d", "e", "f")
    new_revision(pool)
    pool.clock.advance(timedelta(seconds=30))
    pool.heartbeat_all()
    resync(pool, "roll-0")
    pool.complete_hand_overs()
    # When a host that is not handing over dies in the middle of the rollout
    steady = next(
        h
        for h, host in pool.hosts().items()
        if host.status is HostStatus.RUNNING and host.assigned and not host.handover
    )
    pool.kill_host_task(steady)
    pool.clock.advance(timedelta(seconds=30))
    pool.metrics.clear()
    resync(pool, "roll-1")
    # Then its observers are missing beyond the hand-overs the rollout allows
    assert shortfall(pool) > 0


# 4. Metrics for hosts lost and hosts stuck STARTING ----------------------------------------------


def test_a_lost_host_is_counted_per_kind(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    create(pool, "a")
    victim = pool.item("a")["host"]
    pool.stop_host_task(victim)
    event = task_state(host_event(pool, victim, last_status="STOPPED", version=3))
    pool.reconciler().on_task_event(event)
    pool.reconciler().on_task_event(event)  # redelivered: counted once
    assert [m for m in pool.metrics if m[0] == "HostLost"] == [("HostLost", POOLED, 1)]


def test_hosts_starting_past_the_start_timeout_are_a_gauge_per_kind(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    pool.refuse_run_task()
    create(pool, "a")
    an_ordinary_minute(pool)
    pool.metrics.clear()
    resync(pool, "young")
    assert ("HostsStuckStarting", POOLED, 0) in pool.metrics
    pool.clock.advance(pool.settings.start_timeout)
    pool.metrics.clear()
    resync(pool, "stuck")
    assert ("HostsStuckStarting", POOLED, 1) in pool.metrics


# 5. A kind whose hosts cannot start answers clearly, and retries without a storm -----------------


def test_a_kind_without_host_capacity_says_so_backs_off_and_clears_the_reason(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    # Given ECS refuses every RunTask for the kind's host (capacity, quota)
    refused = pool.refuse_run_task()
    create(pool, "a", "b")
    # Then each waiting observer says why it waits, naming ECS's answer
    for name in ("a", "b"):
        item = pool.item(name)
        assert item["status"] == "STARTING" and item["pooled_waiting"] == POOLED
        assert item["last_start_error"].startswith("waiting for a host: RunTask failed: ")
        assert "RESOURCE:FARGATE" in item["last_start_error"]
        assert item["last_start_error"].endswith("; retrying")
    # And over ten minutes of passes RunTask is retried with backoff, not on every pass
    for minute in range(10):
        pool.clock.advance(timedelta(minutes=1))
        resync(pool, f"pass-{minute}")
    assert 2 <= len(refused) <= 7, refused
    assert set(refused) == {f"{POOLED}-h001"}  # one host, one clientToken: never a second host
    # When capacity is back, Then the host starts, the observers are placed, the reason is gone
    pool.allow_run_task()
    for minute in range(6):
        pool.clock.advance(timedelta(minutes=1))
        pool.heartbeat_all()
        resync(pool, f"back-{minute}")
    for name in ("a", "b"):
        item = pool.item(name)
        assert item["status"] == "RUNNING" and "last_start_error" not in item, item


# 6. A host that cannot start holds no observer a running host has room for ----------------------


@pytest.fixture
def roomy(aws: None, clock: ManualClock) -> Iterator[PooledFleet]:
    """Pooled only, K = 3, headroom 2."""
    built = PooledFleet(clock, with_dedicated=False, headroom=2)
    try:
        yield built
    finally:
        default_task_transitions()


def minute(pool: PooledFleet, holder: str) -> None:
    pool.clock.advance(timedelta(minutes=1))
    pool.heartbeat_all()
    resync(pool, holder)


def test_an_observer_waiting_for_a_failing_host_backs_off_instead_of_two_writes_every_pass(
    roomy: PooledFleet,
) -> None:
    pool = roomy
    create(pool, "a")
    minute(pool, "promote")
    pool.refuse_run_task()
    create(pool, "b")
    minute(pool, "spare")
    create(pool, "c")  # placed on the spare host, whose RunTask is refused (backing off)
    minute(pool, "first")
    before = pool.item("c")
    for n in range(5):
        minute(pool, f"p{n}")
    after = pool.item("c")
    # Not every pass re-placing c (record_placed resetting start_attempts and dropping the
    # reason, then the failure noted again): 2 registry writes a pass, the reason flapping.
    assert int(after["version"]) - int(before["version"]) <= 3, (
        after["version"],
        before["version"],
        after.get("start_attempts"),
    )


def test_observers_of_a_kind_whose_only_host_cannot_start_back_off_with_their_host(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    pool.refuse_run_task()
    create(pool, "a", "b")
    minute(pool, "first")
    before = {name: pool.item(name) for name in ("a", "b")}
    for n in range(5):
        minute(pool, f"p{n}")
    for name, was in before.items():
        now = pool.item(name)
        # One write per retry of their host (its backoff), the reason kept, attempts growing
        assert int(now["version"]) - int(was["version"]) <= 3, (name, now["version"], was)
        assert now["last_start_error"] == was["last_start_error"]
        assert int(now["start_attempts"]) > int(was["start_attempts"]) >= 1


def test_an_observer_is_not_parked_on_a_host_that_cannot_start_while_a_running_one_has_room(
    roomy: PooledFleet,
) -> None:
    pool = roomy
    create(pool, "a")
    minute(pool, "promote")
    (first,) = pool.hosts()
    assert pool.host(first).status is HostStatus.RUNNING
    # ECS starts nothing more from now on (quota reached, no Fargate capacity)
    pool.refuse_run_task()
    create(pool, "b")  # the first host: 2 of 3 used, 1 free < headroom 2 -> a spare host is tried
    minute(pool, "spare")
    spare = [h for h in pool.hosts() if h != first]
    assert spare and pool.host(spare[0]).status is HostStatus.STARTING
    # A new observer arrives: the running host still has a free slot
    create(pool, "c")
    for n in range(20):
        minute(pool, f"p{n}")
    c = pool.item("c")
    hosts = {h.host_id: (h.status.value, sorted(h.assigned)) for h in pool.hosts().values()}
    # Not on the spare host (least loaded) for 20 minutes, STARTING, "waiting for a host:
    # RunTask failed", while the first host runs with a free slot
    assert c["status"] == "RUNNING", (c.get("host"), c["status"], c.get("last_start_error"), hosts)


# 7. A rollout stops an old host only once its handed-over children have exited -----------------


def still_running(pool: PooledFleet, host_id: str, name: str, generation: int) -> None:
    """The host's heartbeat still reports a handed-over child: it is checkpointing."""
    update = Update().set_in("running", name, {"generation": generation, "state": "stopping"})
    pool.dynamodb.update_item(
        TableName=HOSTS_TABLE, Key=to_wire({HOSTS_KEY: host_id}), **update.request()
    )


def test_a_rollout_does_not_stop_an_old_host_whose_handed_over_child_still_checkpoints(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    placed(pool, "a", "b", "c")
    old = pool.item("a")["host"]
    new_revision(pool)
    # When the rollout hands the old host's observers over, one at a time, until none is left
    for step in range(12):
        pool.clock.advance(timedelta(seconds=30))
        pool.heartbeat_all()
        resync(pool, f"roll-{step}")
        if not pool.host(old).assigned:
            break
        pool.complete_hand_overs()
    host = pool.host(old)
    assert not host.assigned and host.handover, host
    # And its last child is still checkpointing (the host's next heartbeat still reports it)
    name, generation = sorted(host.handover.items())[-1]
    pool.clock.advance(timedelta(seconds=30))
    pool.heartbeat_all()
    still_running(pool, old, name, generation)
    resync(pool, "checkpointing")
    # Then the host is not stopped under it
    assert pool.host(old).status is HostStatus.DRAINING
    assert pool.host(old).task_arn in running(pool)


# 8. A loss two passes find at once is counted once -----------------------------------------------


def test_a_host_two_passes_find_dead_at_once_is_counted_lost_once(pooled_only: PooledFleet) -> None:
    pool = pooled_only
    create(pool, "a")
    victim = pool.item("a")["host"]
    seen = pool.host(victim)  # what both passes read before either marked it
    pool.stop_host_task(victim)
    first, second = pool.reconciler().events.hosts, pool.reconciler().events.hosts
    assert first is not None and second is not None
    first.lose(seen, "its task stopped", PassReport())
    moved = pool.item("a")
    # When the slower pass finds it already LOST on its write
    second.lose(seen, "no heartbeat", PassReport())
    # Then the loss is counted (HostLost) and its observers moved by the first pass only
    assert [m for m in pool.metrics if m[0] == "HostLost"] == [("HostLost", POOLED, 1)]
    assert pool.item("a")["version"] == moved["version"]
