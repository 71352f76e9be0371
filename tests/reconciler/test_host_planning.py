"""The pure host rules: placement, headroom, scale-in, dead hosts, and one pooled observer's plan."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from vigil.contract.hosts import HostStatus, Placement
from vigil.observers import decisions as d
from vigil.observers.host_fleet.decide import HOST_LOST, decide_pooled
from vigil.observers.host_fleet.model import BeatSeen, Host
from vigil.observers.host_fleet.planning import (
    choose_host,
    host_dead,
    plan_hosts,
    task_ended,
    to_witness,
)
from vigil.observers.kind_options import KindOptions, parse_kind_options
from vigil.observers.model import Desired, Observer, Status

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SETTINGS = d.Settings()
KIND = "pooled-ticker"
POOL = {KIND: KindOptions(Placement.POOLED, slots_per_host=3, headroom=2)}


def host(
    host_id: str, *names: str, status: HostStatus = HostStatus.RUNNING, **fields: object
) -> Host:
    values: dict[str, object] = {
        "host_id": host_id,
        "kind": KIND,
        "status": status,
        "slots": 3,
        "created_at": NOW - timedelta(hours=1),
        "assigned": {n: 1 for n in names},
        "task_arn": f"arn:task/{host_id}",
        "heartbeat_at": NOW - timedelta(seconds=10),
    }
    values.update(fields)
    return Host(**values)  # type: ignore[arg-type]


# Placement --------------------------------------------------------------------------------------


def test_the_least_loaded_host_with_a_free_slot_is_chosen() -> None:
    hosts = [host("h1", "a", "b"), host("h2", "c"), host("h3", "d", "e", "f")]
    assert choose_host(hosts, KIND).host_id == "h2"  # type: ignore[union-attr]


def test_ties_go_to_a_running_host_then_the_smaller_id() -> None:
    hosts = [host("h2", "a"), host("h0", "b", status=HostStatus.STARTING), host("h1", "c")]
    assert choose_host(hosts, KIND).host_id == "h1"  # type: ignore[union-attr]


def test_full_draining_lost_and_other_kind_hosts_take_nothing() -> None:
    hosts = [
        host("h1", "a", "b", "c"),
        host("h2", status=HostStatus.DRAINING),
        host("h3", status=HostStatus.LOST),
        host("h4", kind="other"),
    ]
    assert choose_host(hosts, KIND) is None


def test_placement_is_sticky_while_the_current_host_takes_it() -> None:
    hosts = [host("h1", "a", "b"), host("h2")]
    assert choose_host(hosts, KIND, prefer="h1").host_id == "h1"  # type: ignore[union-attr]
    full = [host("h1", "a", "b", "c"), host("h2")]
    assert choose_host(full, KIND, prefer="h1").host_id == "h2"  # type: ignore[union-attr]


# Capacity ---------------------------------------------------------------------------------------


def test_hosts_are_started_when_free_slots_fall_below_headroom_plus_waiting() -> None:
    hosts = [host("h1", "a", "b", "c"), host("h2", "d", "e")]  # 1 free
    plan = plan_hosts(hosts, None, {KIND: 4}, POOL, NOW, SETTINGS)
    assert plan.start == {KIND: 2}  # need 2 + 4, have 1: ceil(5 / 3)
    assert plan_hosts(hosts, None, {}, POOL, NOW, SETTINGS).start == {KIND: 1}


def test_scale_in_drains_the_emptiest_running_host_while_the_headroom_holds() -> None:
    hosts = [host("h1", "a"), host("h2", "b", "c"), host("h3", "d")]  # 5 free
    plan = plan_hosts(hosts, None, {}, POOL, NOW, SETTINGS)
    assert plan.drain == ("h1",) and not plan.start
    tight = [host("h1", "a", "b"), host("h2", "c")]  # 3 free: one fewer leaves 0 < 2
    assert plan_hosts(tight, None, {}, POOL, NOW, SETTINGS).drain == ()
    assert plan_hosts(hosts, None, {KIND: 1}, POOL, NOW, SETTINGS).drain == ()


def test_observers_on_a_draining_host_count_as_waiting() -> None:
    hosts = [host("h1", "a", "b", status=HostStatus.DRAINING), host("h2", "c")]
    assert plan_hosts(hosts, None, {}, POOL, NOW, SETTINGS).start == {KIND: 1}


def test_a_drained_host_that_runs_nothing_is_finished() -> None:
    hosts = [host("h1", status=HostStatus.DRAINING), host("h2", "a", status=HostStatus.DRAINING)]
    assert plan_hosts(hosts, None, {}, POOL, NOW, SETTINGS).finish == ("h1",)


def test_a_heartbeating_starting_host_is_promoted_and_one_without_a_task_is_run_again() -> None:
    hosts = [
        host("h1", status=HostStatus.STARTING),
        host("h2", status=HostStatus.STARTING, task_arn=None, heartbeat_at=None),
    ]
    plan = plan_hosts(hosts, None, {}, POOL, NOW, SETTINGS)
    assert plan.promote == ("h1",) and plan.retry_run == ("h2",)


# Dead hosts -------------------------------------------------------------------------------------


def test_a_silent_host_is_dead_once_the_reconciler_saw_its_heartbeat_unchanged() -> None:
    interval = SETTINGS.heartbeat_interval
    watch = SETTINGS.stale_after - interval
    beat = NOW - 2 * interval
    unseen = host("h", heartbeat_at=beat)
    # One interval old on the host's clock: watched (noted by the pass), not judged on it
    assert host_dead(unseen, None, NOW, SETTINGS) is None
    assert to_witness(unseen, NOW, SETTINGS)
    early = replace(unseen, beat_seen=BeatSeen(beat, NOW - watch + timedelta(seconds=1)))
    assert host_dead(early, None, NOW, SETTINGS) is None
    assert not to_witness(early, NOW, SETTINGS)
    late = replace(unseen, beat_seen=BeatSeen(beat, NOW - watch))
    assert "no heartbeat" in (host_dead(late, None, NOW, SETTINGS) or "")
    # A host that beat since it was noted is alive, and noted again
    beat_again = replace(late, heartbeat_at=beat + timedelta(seconds=1))
    assert host_dead(beat_again, None, NOW, SETTINGS) is None
    assert to_witness(beat_again, NOW, SETTINGS)
    # A host in time is neither judged nor noted (no write on a healthy fleet)
    assert not to_witness(host("h"), NOW, SETTINGS)


def test_a_host_whose_task_is_not_running_is_dead() -> None:
    assert "no longer running" in (host_dead(host("h"), set(), NOW, SETTINGS) or "")
    assert host_dead(host("h"), {"arn:task/h"}, NOW, SETTINGS) is None


def test_an_unlisted_host_task_has_ended_only_when_ecs_says_its_container_is_gone() -> None:
    def task(last_status: str, stop_code: str | None = None) -> d.TaskState:
        return d.TaskState(arn="arn:task/h", last_status=last_status, stop_code=stop_code)

    # Gone: STOPPED, unknown to ECS, or stopping because its container ended
    assert task_ended(task(d.STOPPED))
    assert task_ended(task(d.MISSING))
    assert task_ended(task("DEPROVISIONING", "EssentialContainerExited"))
    assert task_ended(task("STOPPING", "TaskFailedToStart"))
    # Not yet: ECS was told to stop it and its container (sent SIGTERM) still runs
    for status in ("RUNNING", "DEACTIVATING", "STOPPING"):
        for code in (None, "UserInitiated", "SpotInterruption", "ServiceSchedulerInitiated"):
            assert not task_ended(task(status, code)), (status, code)


def test_a_starting_host_has_the_start_timeout_to_heartbeat() -> None:
    young = host("h", status=HostStatus.STARTING, heartbeat_at=None, created_at=NOW)
    assert host_dead(young, None, NOW, SETTINGS) is None
    old = host(
        "h", status=HostStatus.STARTING, heartbeat_at=None, created_at=NOW - timedelta(hours=1)
    )
    assert host_dead(old, None, NOW, SETTINGS) is not None


def test_lost_hosts_are_planned_and_take_no_part_in_capacity() -> None:
    beat = NOW - timedelta(minutes=5)
    seen = BeatSeen(beat, NOW - timedelta(minutes=2))
    hosts = [host("h1", "a", heartbeat_at=beat, beat_seen=seen), host("h2")]
    plan = plan_hosts(hosts, None, {}, POOL, NOW, SETTINGS)
    assert [h for h, _ in plan.lost] == ["h1"]
    assert plan.start == {}  # h2's 3 free slots cover the headroom of 2


# One pooled observer ---------------------------------------------------------------------------


def record(
    status: Status = Status.RUNNING, host_id: str | None = "h1", **fields: object
) -> d.Record:
    observer = Observer(
        name="a",
        kind=KIND,
        config={},
        desired=fields.pop("desired", Desired.RUNNING),  # type: ignore[arg-type]
        status=status,
        created_at=NOW - timedelta(hours=2),
        updated_at=NOW,
        generation=1,
        **fields,  # type: ignore[arg-type]
    )
    started = d.Tracking(started_at=NOW - timedelta(minutes=1))
    return d.Record(observer, started, d.Pooled(host=host_id))


RUNS_A = {"a": {"generation": 1, "state": "running"}}
"""A host's heartbeat listing generation 1 of "a" (a RUNNING child it does not list is gone)."""


def test_a_pooled_observer_on_a_live_host_needs_nothing() -> None:
    plan = decide_pooled(record(), host("h1", "a", running=RUNS_A), NOW, SETTINGS)
    assert plan.write is None and isinstance(plan.effects[0], d.Ignore)


def test_a_lost_host_moves_its_observer_without_counting_a_failure() -> None:
    plan = decide_pooled(record(), host("h1", "a", status=HostStatus.LOST), NOW, SETTINGS)
    assert isinstance(plan.write, d.StartTask)
    assert plan.write.generation == 2 and plan.write.consecutive_failures == 0
    assert plan.write.last_exit is not None and plan.write.last_exit.stop_code == HOST_LOST


def test_a_host_exit_is_decided_as_a_stopped_task() -> None:
    crashed = d.Pooled(host="h1", host_exit=d.HostExit(generation=1, exit_code=1, at=NOW))
    quick = d.Record(record().observer, d.Tracking(started_at=NOW - timedelta(minutes=1)), crashed)
    again = d.Record(record(consecutive_failures=1).observer, quick.tracking, crashed)
    first = decide_pooled(quick, host("h1", "a"), NOW, SETTINGS)
    assert isinstance(first.write, d.StartTask)
    assert isinstance(decide_pooled(again, host("h1", "a"), NOW, SETTINGS).write, d.Backoff)
    bad = d.Pooled(host="h1", host_exit=d.HostExit(generation=1, exit_code=2, at=NOW))
    failed = decide_pooled(d.Record(quick.observer, quick.tracking, bad), host("h1"), NOW, SETTINGS)
    assert isinstance(failed.write, d.MarkFailed)


def test_an_exit_of_an_older_generation_is_not_this_one() -> None:
    old = d.Pooled(host="h1", host_exit=d.HostExit(generation=0, exit_code=1))
    plan = decide_pooled(
        d.Record(record().observer, d.Tracking(), old), host("h1", "a"), NOW, SETTINGS
    )
    assert plan.write is None


def test_a_stop_takes_it_off_its_host_and_it_is_stopped_once_off() -> None:
    asked = record(desired=Desired.STOPPED)
    plan = decide_pooled(asked, host("h1", "a", running=RUNS_A), NOW, SETTINGS)
    assert isinstance(plan.write, d.MarkStopping)
    assert any(isinstance(e, d.StopTask) for e in plan.effects)
    stopping = record(Status.STOPPING, desired=Desired.STOPPED)
    assert isinstance(decide_pooled(stopping, host("h1"), NOW, SETTINGS).write, d.MarkStopped)


def test_an_unplaced_observer_is_placed_again_after_its_retry_time() -> None:
    waiting = record(Status.STARTING, host_id=None, next_start_at=NOW + timedelta(seconds=5))
    assert decide_pooled(waiting, None, NOW, SETTINGS).write is None
    later = decide_pooled(waiting, None, NOW + timedelta(seconds=6), SETTINGS)
    assert later.effects == (d.RetryStart(1),)


def test_placements_parse_and_refuse_nonsense() -> None:
    parsed = parse_kind_options(
        '{"a": {"placement": "pooled", "slots_per_host": 5, "headroom": 1}}'
    )
    assert parsed["a"] == KindOptions(Placement.POOLED, 5, 1)
    for bad in ('{"a": {"placement": "shared"}}', '{"a": {"slots_per_host": 0}}', "[]"):
        try:
            parse_kind_options(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_a_kind_without_observers_keeps_no_host() -> None:
    assert plan_hosts([], None, {}, POOL, NOW, SETTINGS).start == {}
    idle = [host("h2"), host("h1")]
    assert plan_hosts(idle, None, {}, POOL, NOW, SETTINGS).drain == ("h1",)


def test_an_observer_a_draining_host_has_not_started_is_placed_elsewhere_at_once() -> None:
    starting = record(Status.STARTING)  # placed (no retry time), not running yet
    draining = host("h1", "a", status=HostStatus.DRAINING)
    assert decide_pooled(starting, draining, NOW, SETTINGS).effects == (d.RetryStart(1),)
    # One the host already runs is handed over by the host (its exit report moves it)
    runs = host("h1", "a", status=HostStatus.DRAINING, running={"a": {"generation": 1}})
    assert decide_pooled(starting, runs, NOW, SETTINGS).write is None
    assert not any(
        isinstance(e, d.RetryStart) for e in decide_pooled(starting, runs, NOW, SETTINGS).effects
    )
    # On a RUNNING host it waits for its host as before
    assert isinstance(decide_pooled(starting, host("h1", "a"), NOW, SETTINGS).effects[0], d.Ignore)


def test_observers_already_placed_elsewhere_are_not_counted_as_leaving_again() -> None:
    # h1 drained itself: "a" and "b" were placed on h2, its last heartbeat still lists them
    gone = {n: {"generation": 1} for n in "abc"}
    draining = host("h1", "c", status=HostStatus.DRAINING, running=gone)
    hosts = [draining, host("h2", "a", "b"), host("h3")]
    # c leaving + headroom 2 = 3 <= 4 free: no host to start (a and b have their slots)
    assert plan_hosts(hosts, None, {}, POOL, NOW, SETTINGS).start == {}
    # Once every observer left it, it is finished, even with its task gone (not lost)
    emptied = host("h1", status=HostStatus.DRAINING, running=gone)
    listed = {"arn:task/h2"}
    plan = plan_hosts([emptied, host("h2", "a", "b")], listed, {}, POOL, NOW, SETTINGS)
    assert plan.finish == ("h1",) and plan.lost == ()
