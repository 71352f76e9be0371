"""The reconciler as the manager of pooled hosts, on moto, with a fake host that heartbeats and
reports exits through the tables as the contract says the host process does."""

from __future__ import annotations

from datetime import timedelta

from tests.helpers.moto_fleet import default_task_transitions, running, stream
from tests.helpers.observers import HOSTS_TABLE
from tests.helpers.pooled_fleet import POOLED, PooledFleet, create, host_event, resync
from vigil.clock import ManualClock
from vigil.contract.hosts import HostStatus
from vigil.observers.ecs_tasks import task_state
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.model import Desired, Status
from vigil.observers.reconciler import changed_records


def placement(pool: PooledFleet) -> dict[str, tuple[str, int]]:
    return {
        name: (host_id, generation)
        for host_id, host in pool.hosts().items()
        for name, generation in host.assigned.items()
    }


# Placement --------------------------------------------------------------------------------------


def test_new_observers_are_packed_on_hosts_least_loaded_first(pool: PooledFleet) -> None:
    # Given no host at all, When 4 pooled observers are created (K = 3)
    create(pool, "a", "b", "c", "d")
    # Then two hosts were started (a full one, then one more), each a RunTask with its host id
    hosts = pool.hosts()
    assert sorted(hosts) == [f"{POOLED}-h001", f"{POOLED}-h002"]
    assert sorted(h.used for h in hosts.values()) == [1, 3]
    assert len(running(pool)) == 2
    for host_id, host in hosts.items():
        assert host.task_arn is not None and host.status is HostStatus.STARTING
        env = pool.describe(host.task_arn)["overrides"]["containerOverrides"][0]["environment"]
        assert {"name": "VIGIL_HOST_ID", "value": host_id} in env
        assert {"name": "VIGIL_HOST_SLOTS", "value": "3"} in env
    # And each observer names its host, generation 1, out of the waiting index
    for name, (host_id, generation) in placement(pool).items():
        item = pool.item(name)
        assert (item["host"], item["generation"], item["status"]) == (
            host_id,
            generation,
            "STARTING",
        )
        assert generation == 1
        assert "pooled_waiting" not in item and "next_start_at_ms" not in item
        assert item["task_arn"] == pool.host(host_id).task_arn


def test_resync_keeps_the_headroom_and_promotes_heartbeating_hosts(pool: PooledFleet) -> None:
    create(pool, "a", "b", "c")  # one full host: no free slot
    pool.heartbeat_all()
    # When the resync runs, Then it promotes the host and starts one for the headroom (1 slot)
    resync(pool)
    hosts = pool.hosts()
    assert hosts[f"{POOLED}-h001"].status is HostStatus.RUNNING
    assert len(hosts) == 2 and hosts[f"{POOLED}-h002"].used == 0
    assert {pool.item(n)["status"] for n in "abc"} == {"RUNNING"}


def test_placement_is_sticky_across_passes(pool: PooledFleet) -> None:
    create(pool, "a", "b", "c", "d")
    before = placement(pool)
    for minute in range(5):
        pool.heartbeat_all()
        pool.clock.advance(timedelta(seconds=30))
        resync(pool, f"pass-{minute}")
    # Then no observer moved or changed generation, however uneven the hosts are
    assert placement(pool) == before


# Dead hosts -------------------------------------------------------------------------------------


def test_a_host_stopped_event_moves_its_observers_at_once(pool: PooledFleet) -> None:
    create(pool, "a", "b", "c", "d")
    pool.heartbeat_all()
    resync(pool)  # promotes, and keeps a free slot of headroom
    victim = placement(pool)["a"][0]
    moved = sorted(n for n, (h, _) in placement(pool).items() if h == victim)
    arn = pool.stop_host_task(victim)
    # When the host's STOPPED event arrives
    report = pool.reconciler().on_task_event(
        task_state(host_event(pool, victim, last_status="STOPPED", version=3))
    )
    # Then the host is LOST and each of its observers is on another host, next generation
    assert pool.host(victim).status is HostStatus.LOST
    after = placement(pool)
    for name in moved:
        item = pool.item(name)
        assert item["host"] != victim and item["generation"] == 2
        assert after[name] == (item["host"], 2)
        assert item["last_exit"]["stop_code"] == "HostLost"
        assert item["consecutive_failures"] == 0  # the host's loss is not the observer's failure
    assert report.started == len(moved)
    assert arn not in running(pool)
    # And the zombie's next heartbeat is refused
    assert pool.heartbeat(victim) is False


def test_a_silent_host_is_lost_after_three_intervals(pool: PooledFleet) -> None:
    create(pool, "a", "b", "c", "d")
    pool.heartbeat_all()
    resync(pool)
    victim = placement(pool)["d"][0]
    # When every host but the victim heartbeats for 3 intervals and more
    for step in range(4):
        pool.clock.advance(pool.settings.heartbeat_interval)
        for host_id, host in pool.hosts().items():
            if (
                host_id != victim
                and host.task_arn
                and host.status
                in (
                    HostStatus.STARTING,
                    HostStatus.RUNNING,
                )
            ):
                pool.heartbeat(host_id)
        resync(pool, f"pass-{step}")
    # Then it is LOST and its observer runs elsewhere from its checkpoint (next generation)
    assert pool.host(victim).status is HostStatus.LOST
    item = pool.item("d")
    assert item["host"] != victim and item["generation"] == 2


# Failures ---------------------------------------------------------------------------------------


def test_a_run_task_failure_keeps_observers_starting_with_a_reason_and_retries(
    pool: PooledFleet,
) -> None:
    # Given ECS refuses RunTask (a capacity failure answer)
    real = pool.ecs_client.run_task
    calls: list[str] = []

    def refuse(**request: object) -> dict[str, object]:
        calls.append(str(request["clientToken"]))
        return {"tasks": [], "failures": [{"reason": "RESOURCE:CPU", "detail": "no capacity"}]}

    pool.ecs_client.run_task = refuse  # type: ignore[method-assign]
    create(pool, "a")
    item = pool.item("a")
    host = pool.host(item["host"])
    assert item["status"] == "STARTING" and "RESOURCE:CPU" in item["last_start_error"]
    assert item["pooled_waiting"] == POOLED  # never lost: the next pass places it again
    assert host.task_arn is None and "RESOURCE:CPU" in (host.status_reason or "")
    # When ECS has capacity again and a pass runs after the retry delay
    pool.ecs_client.run_task = real  # type: ignore[method-assign]
    pool.clock.advance(timedelta(minutes=1))
    resync(pool)
    # Then the same host (same clientToken) got its task and the observer left the waiting index
    assert set(calls) == {host.host_id}
    item = pool.item("a")
    assert pool.host(item["host"]).task_arn is not None
    assert "pooled_waiting" not in item and item["generation"] == 1


def test_host_exit_drives_restart_backoff_and_failed_as_a_stopped_task_does(
    pool: PooledFleet,
) -> None:
    create(pool, "a")
    pool.heartbeat_all()
    host_id = pool.item("a")["host"]

    def exit_with(code: int) -> None:
        change = pool.host_exit("a", code)
        pool.reconciler().on_records(changed_records([stream(change["new"], change["old"])]))

    # A first crash restarts at once, on the same host (sticky), next generation
    exit_with(1)
    item = pool.item("a")
    assert (item["status"], item["generation"], item["host"]) == ("STARTING", 2, host_id)
    assert pool.host(host_id).assigned == {"a": 2}
    assert "host_exit" not in item
    # A second quick crash backs off (PENDING until then)
    pool.heartbeat(host_id)
    exit_with(1)
    item = pool.item("a")
    assert item["status"] == "PENDING" and item["consecutive_failures"] == 2
    assert item["pooled_waiting"] == POOLED  # the resync finds it when the backoff ends
    # After the backoff, the resync places it again
    pool.clock.advance(timedelta(minutes=2))
    resync(pool)
    item = pool.item("a")
    assert (item["status"], item["generation"]) == ("STARTING", 3)
    # A bad-config exit (2) is FAILED at once, with a notice
    pool.heartbeat(host_id)
    exit_with(2)
    item = pool.item("a")
    assert item["status"] == "FAILED" and "bad config" in item["failure_reason"]
    assert pool.dlq_messages()[0]["name"] == "a"


def test_a_stop_request_takes_the_observer_off_its_host_then_marks_it_stopped(
    pool: PooledFleet,
) -> None:
    create(pool, "a")
    pool.heartbeat_all()
    host_id = pool.item("a")["host"]
    old = pool.item("a")
    pool.put(
        pool.pooled("a", status=Status.RUNNING, desired=Desired.STOPPED, generation=1), host=host_id
    )
    pool.reconciler().on_records(changed_records([stream(pool.item("a"), old)]))
    assert pool.item("a")["status"] == "STOPPING"
    assert "a" not in pool.host(host_id).assigned
    change = pool.host_exit("a", 0, "stopped")
    pool.reconciler().on_records(changed_records([stream(change["new"], change["old"])]))
    assert pool.item("a")["status"] == "STOPPED"


# Scale-in ---------------------------------------------------------------------------------------


def test_scale_in_drains_the_emptiest_surplus_host_and_hands_its_observers_over(
    pool: PooledFleet,
) -> None:
    create(pool, "a", "b", "c", "d")  # h001: a b c, h002: d
    pool.heartbeat_all()
    resync(pool)
    # When two observers stop for good, one host fewer still leaves the headroom
    for name in ("a", "b"):
        host = pool.host(pool.item(name)["host"])
        HostStore(pool.dynamodb, HOSTS_TABLE).unassign(host, name)
        pool.put(pool.pooled(name, status=Status.STOPPED, desired=Desired.STOPPED))
    pool.heartbeat_all()
    resync(pool, "scale")
    # Then the emptiest (a tie at one observer: the smaller id) drains, handing "c" over
    drained = [h for h in pool.hosts().values() if h.status is HostStatus.DRAINING]
    assert [h.host_id for h in drained] == [f"{POOLED}-h001"]
    host = drained[0]
    assert host.handover == {"c": 1} and host.assigned == {}
    assert pool.item("c")["status"] == "RUNNING"  # still running until its child checkpoints
    for name in host.handover:
        change = pool.host_exit(name, 0, "handed over")
        pool.reconciler().on_records(changed_records([stream(change["new"], change["old"])]))
        moved = pool.item(name)
        assert moved["host"] != host.host_id and moved["generation"] == 2
        assert moved["consecutive_failures"] == 0
    pool.heartbeat(host.host_id)  # its running map is empty now
    resync(pool, "finish")
    assert pool.host(host.host_id).status is HostStatus.STOPPED
    assert host.task_arn not in running(pool)


def test_a_healthy_pooled_pass_reads_no_observer(aws: None, clock: ManualClock) -> None:
    # Given a pooled-only fleet, its observers placed and heartbeating
    pool = PooledFleet(clock, with_dedicated=False)
    try:
        create(pool, "a", "b", "c", "d", "e")
        pool.heartbeat_all()
        resync(pool, "promote")
        pool.clock.advance(timedelta(minutes=1))  # an ordinary minute (not a sweep's)
        pool.heartbeat_all()
        pool.counter.reset()
        # When the resync runs
        resync(pool, "healthy")
        # Then it read the live hosts (their index, then one BatchGetItem of them), listed
        # tasks, asked the waiting index: no observer read, no scan
        calls = pool.counter.calls
        assert calls["Query"] == 2 and calls["BatchGetItem"] == 1 and calls["ListTasks"] == 1
        assert calls["GetItem"] == 0 and calls["Scan"] == 0
        assert calls["UpdateItem"] == 2  # the resync lease, taken and released
    finally:
        default_task_transitions()


def test_a_repeated_stopped_event_of_a_lost_host_does_nothing(pool: PooledFleet) -> None:
    create(pool, "a")
    victim = pool.item("a")["host"]
    pool.stop_host_task(victim)
    event = task_state(host_event(pool, victim, last_status="STOPPED", version=3))
    pool.reconciler().on_task_event(event)
    moved = pool.item("a")
    pool.counter.reset()
    pool.reconciler().on_task_event(event)
    assert pool.item("a") == moved
    assert pool.counter.calls["GetItem"] == 1  # the host item (pool.item reads no request)
    assert pool.counter.calls["UpdateItem"] == 0 and pool.counter.calls["StopTask"] == 0


# Moving observers on purpose: rollouts and rebalances --------------------------------------------


def test_a_new_task_definition_rolls_every_pooled_observer_onto_new_hosts(
    pool: PooledFleet,
) -> None:
    create(pool, "a", "b", "c", "d", "e", "f")  # two full hosts of K = 3
    pool.heartbeat_all()
    resync(pool)
    old_hosts = set(pool.hosts())
    # A deploy registers a new revision of the pooled kind's task definition
    new = pool.register_pooled_revision("vigil/observer:v2")
    pool.pooled_definition_arn = new
    in_flight = []
    for step in range(40):
        pool.clock.advance(timedelta(seconds=30))
        pool.heartbeat_all()
        resync(pool, f"roll-{step}")
        in_flight.append(sum(len(h.handover) for h in pool.hosts().values() if h.assigned == {}))
        pool.complete_hand_overs()
        if all(pool.item(n).get("host") not in old_hosts for n in "abcdef"):
            break
    hosts = pool.hosts()
    for name in "abcdef":
        item = pool.item(name)
        assert item["host"] not in old_hosts and hosts[item["host"]].task_definition == new
        assert item["generation"] == 2 and item["consecutive_failures"] == 0
    pool.heartbeat_all()
    resync(pool, "after")
    assert {hosts_id: pool.host(hosts_id).status for hosts_id in old_hosts} == {
        h: HostStatus.STOPPED for h in old_hosts
    }


def test_a_rebalance_request_evens_the_load_and_is_cleared(pool: PooledFleet) -> None:
    from vigil.observers.rebalance_requests import RebalanceRequests

    create(pool, "a", "b", "c")  # h001 full
    pool.heartbeat_all()
    resync(pool)  # h002 started for the headroom
    create(pool, "d")  # the least loaded: h002
    pool.heartbeat_all()
    resync(pool)
    assert sorted(h.used for h in pool.hosts().values()) == [1, 3]
    RebalanceRequests(pool.dynamodb, HOSTS_TABLE).request(POOLED, 5, "operator", pool.clock())
    resync(pool, "rebalance")
    pool.complete_hand_overs()
    pool.heartbeat_all()
    assert sorted(h.used for h in pool.hosts().values()) == [2, 2]
    markers = pool.dynamodb.scan(TableName=HOSTS_TABLE, ConsistentRead=True)["Items"]
    assert all(not m["host_id"]["S"].startswith("#rebalance#") for m in markers)  # cleared
    resync(pool, "after")  # a marker-free pass moves nothing more
    assert sorted(h.used for h in pool.hosts().values()) == [2, 2]
