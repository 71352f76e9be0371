"""The emulator's host task (built on the contract) under the real manager, on moto: observers
packed on a host run the unchanged runtime; a crashed one is restarted on its host from its
checkpoint; a host replaced by the manager is a zombie at its next heartbeat."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace

import pytest
from botocore.exceptions import ClientError

from tests.helpers.moto_fleet import TABLE, default_task_transitions, stream
from tests.helpers.observers import HOSTS_TABLE, TICKER_WRITES, create_ticker_counts_table
from tests.helpers.pooled_fleet import POOLED, PooledFleet, create, host_event
from vigil.clock import ManualClock
from vigil.contract.hosts import HOST_ID_ENV, HOST_SLOTS_ENV, HOSTS_TABLE_ENV, HostStatus
from vigil.contract.observers import ExitCode
from vigil.observers.ecs_tasks import task_state
from vigil.observers.model import to_item
from vigil.observers.reconciler import changed_records
from vigil_tools.emulator.hosts import ClockCalls, EmulatedHost, task_runner


@pytest.fixture
def pool(aws: None, clock: ManualClock) -> Iterator[PooledFleet]:
    built = PooledFleet(clock, with_dedicated=False)
    try:
        yield built
    finally:
        default_task_transitions()


def boot(pool: PooledFleet, host_id: str) -> EmulatedHost:
    host = pool.host(host_id)
    assert host.task_arn is not None
    environment = {
        "VIGIL_REGISTRY_TABLE": TABLE,
        "VIGIL_OBSERVER_KINDS": json.dumps({POOLED: "observers.ticker.run"}),
        "VIGIL_HEARTBEAT_SECONDS": "30",
        HOSTS_TABLE_ENV: HOSTS_TABLE,
        HOST_ID_ENV: host_id,
        HOST_SLOTS_ENV: str(pool.slots),  # the reconciler's RunTask override sets it
        **TICKER_WRITES,
    }
    create_ticker_counts_table(pool.dynamodb)
    runner = task_runner(
        host.task_arn, environment, pool.dynamodb, now=pool.clock, log=io.StringIO()
    )
    assert isinstance(runner, EmulatedHost)
    runner.start()
    return runner


def run(pool: PooledFleet, host: EmulatedHost, seconds: int) -> None:
    for _ in range(seconds // 5):
        pool.clock.advance(timedelta(seconds=5))
        host.step()


def a_and_b_running(pool: PooledFleet) -> tuple[str, EmulatedHost]:
    """Observers "a" and "b" packed on one emulated host, running for 30 s."""
    create(pool, "a", "b")
    host_id = str(pool.item("a")["host"])
    host = boot(pool, host_id)
    run(pool, host, 30)
    return host_id, host


def test_observers_run_on_an_emulated_host_and_a_crash_resumes_from_the_checkpoint(
    pool: PooledFleet,
) -> None:
    create(pool, "a", "b")
    host_id = pool.item("a")["host"]
    assert pool.item("b")["host"] == host_id  # packed on one host
    host = boot(pool, host_id)
    run(pool, host, 30)
    assert {pool.item(n)["status"] for n in "ab"} == {"RUNNING"}
    assert pool.item("a")["checkpoint"]["count"] >= 5
    # When child "a" dies (SIGKILL: no exit of its own), the host reports it
    before = pool.item("a")
    host.children["a"].kill()
    host.step()
    after = pool.item("a")
    assert after["host_exit"]["exit_code"] == ExitCode.CRASH
    pool.reconciler().on_records(changed_records([stream(after, before)]))
    # Then generation 2 is placed on the same host and resumes from the checkpoint
    assert (pool.item("a")["generation"], pool.item("a")["host"]) == (2, host_id)
    run(pool, host, 35)
    resumed = pool.item("a")
    assert resumed["status"] == "RUNNING" and host.children["a"].generation == 2
    assert resumed["checkpoint"]["count"] > before["checkpoint"]["count"]
    assert host.children["b"].generation == 1  # its neighbour never noticed


def test_a_host_replaced_by_the_manager_is_a_zombie_at_its_next_heartbeat(
    pool: PooledFleet,
) -> None:
    observer = pool.pooled("a")
    pool.put(observer)
    pool.reconciler().on_records(changed_records([stream(to_item(observer))]))
    host_id = pool.item("a")["host"]
    host = boot(pool, host_id)
    run(pool, host, 10)
    # The manager hears the host's task stopped (an event the zombie never sees) and moves "a"
    pool.reconciler().on_task_event(
        task_state(host_event(pool, host_id, last_status="STOPPED", version=7))
    )
    assert pool.host(host_id).status is HostStatus.LOST
    run(pool, host, 35)
    assert host.exit_code is ExitCode.FENCED
    assert not any(child.alive for child in host.children.values())
    assert pool.item("a")["generation"] == 2 and pool.item("a")["host"] != host_id


def test_stop_task_hands_every_child_over_and_the_host_exits_cleanly(pool: PooledFleet) -> None:
    create(pool, "a", "b")
    host = boot(pool, pool.item("a")["host"])
    run(pool, host, 30)
    counts = {n: pool.item(n)["checkpoint"]["count"] for n in "ab"}

    assert host.sigterm() is ExitCode.CLEAN  # StopTask's SIGTERM: no clock moves meanwhile

    for name in "ab":
        item = pool.item(name)
        assert item["host_exit"]["generation"] == 1
        assert item["host_exit"]["exit_code"] == ExitCode.CLEAN
        assert "host shutting down" in item["host_exit"]["reason"]
        assert item["checkpoint"]["count"] == counts[name]  # stopped at once, nothing lost
    assert host.children == {}


def test_a_host_told_to_stop_announces_it_and_its_observers_are_placed_elsewhere_at_once(
    pool: PooledFleet,
) -> None:
    host_id, host = a_and_b_running(pool)
    before = {n: pool.item(n) for n in "ab"}

    # ECS sends the host SIGTERM (scale-in, a Spot interruption, a deploy); no STOPPED event yet
    assert host.sigterm() is ExitCode.CLEAN
    assert pool.host(host_id).status is HostStatus.DRAINING
    reports = [stream(pool.item(n), before[n]) for n in "ab"]
    pool.reconciler().on_records(changed_records(reports))

    for name in "ab":
        item = pool.item(name)
        assert item["generation"] == 2 and item["host"] != host_id
        assert item["checkpoint"]["count"] == before[name]["checkpoint"]["count"]
    assert pool.host(host_id).status is HostStatus.DRAINING  # takes nothing back


def sigterm_and_report(pool: PooledFleet, host: EmulatedHost, host_id: str) -> None:
    """ECS sends the host SIGTERM: it hands every child over (their exit reports reach the
    stream pass), exits, and its task stops."""
    before = {n: pool.item(n) for n in "ab"}
    assert host.sigterm() is ExitCode.CLEAN
    reports = [stream(pool.item(n), before[n]) for n in "ab"]
    pool.reconciler().on_records(changed_records(reports))
    pool.stop_host_task(host_id)


def test_a_host_that_drained_itself_ends_stopped_without_an_extra_host(pool: PooledFleet) -> None:
    host_id, host = a_and_b_running(pool)
    sigterm_and_report(pool, host, host_id)
    # Then its observers left it: it no longer names them
    assert pool.host(host_id).assigned == {}
    # When the next pass finds its task gone (no STOPPED event yet)
    pool.clock.advance(timedelta(seconds=30))
    pool.heartbeat_all()
    assert pool.reconciler().resync("after") is not None
    # Then it is STOPPED, not LOST, and the one new host holds both observers with the headroom
    assert pool.host(host_id).status is HostStatus.STOPPED
    others = {h: x for h, x in pool.hosts().items() if h != host_id}
    assert len(others) == 1, others
    assert sorted(next(iter(others.values())).assigned) == ["a", "b"]


def test_the_stopped_event_of_a_host_that_drained_itself_marks_it_stopped(
    pool: PooledFleet,
) -> None:
    host_id, host = a_and_b_running(pool)
    sigterm_and_report(pool, host, host_id)
    # When its task's STOPPED event arrives, every observer handed over
    event = task_state(host_event(pool, host_id, last_status="STOPPED", version=9))
    pool.reconciler().on_task_event(event)
    # Then it is STOPPED (a clean shutdown), finished with, and not counted as a loss
    assert pool.host(host_id).status is HostStatus.STOPPED
    assert not [m for m in pool.metrics if m[0] == "HostLost"]
    assert all(pool.item(n)["host"] != host_id for n in "ab")


def test_a_crash_whose_exit_report_is_throttled_once_still_restarts_the_observer(
    pool: PooledFleet,
) -> None:
    # issue 19: one throttled exit report used to lose the observer for good
    host_id, host = a_and_b_running(pool)
    reports = host.supervisor._exits.reports
    calls = []

    def throttled_once(*args: object, **kwargs: object) -> bool:
        calls.append(args)
        if len(calls) == 1:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                "UpdateItem",
            )
        return bool(reports.report_host_exit(*args, **kwargs))  # type: ignore[arg-type]

    host.supervisor._exits.reports = SimpleNamespace(report_host_exit=throttled_once)  # type: ignore[assignment]
    before = pool.item("a")
    host.crash_child("a")

    after = pool.item("a")
    assert len(calls) == 2 and after["host_exit"]["exit_code"] == ExitCode.CRASH
    pool.reconciler().on_records(changed_records([stream(after, before)]))
    assert (pool.item("a")["generation"], pool.item("a")["host"]) == (2, host_id)
    run(pool, host, 35)
    assert pool.item("a")["status"] == "RUNNING" and host.children["a"].generation == 2


def test_clock_calls_give_a_calls_time_back_and_show_its_answer_when_the_clock_gets_there(
    clock: ManualClock,
) -> None:
    # What lets the soak's hosts step on while their calls hang, as the real host's loop does
    calls = ClockCalls(clock)
    began = clock()

    def hangs_then_answers() -> str:
        clock.advance(timedelta(seconds=2.5))  # the call's own time
        return "answer"

    call = calls.start(hangs_then_answers)

    assert clock() == began and not call.done()
    assert calls.next_end == began + timedelta(seconds=2.5)
    clock.advance(timedelta(seconds=2.4))
    assert not call.done()
    clock.advance(timedelta(seconds=0.1))
    assert call.done() and call.result() == "answer" and calls.next_end is None
    instant = calls.start(lambda: "at once")
    assert instant.done() and instant.result() == "at once"
