"""The reconciler's rules as pure functions: examples for each rule, properties for the invariants."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.contract.observers import ExitCode
from vigil.observers import decisions as d
from vigil.observers.model import Desired, LastExit, Observer, Status

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SETTINGS = d.Settings()
ARN = "arn:aws:ecs:us-east-1:123456789012:task/fleet/current"
OLD_ARN = "arn:aws:ecs:us-east-1:123456789012:task/fleet/old"


def observer(**fields: object) -> Observer:
    values: dict[str, object] = {
        "name": "btc-usd",
        "kind": "ticker",
        "config": {},
        "desired": Desired.RUNNING,
        "status": Status.RUNNING,
        "created_at": NOW - timedelta(days=1),
        "updated_at": NOW - timedelta(minutes=1),
        "generation": 3,
        "task_arn": ARN,
        "heartbeat_at": NOW - timedelta(seconds=10),
    }
    values.update(fields)
    return Observer(**values)  # type: ignore[arg-type]


def record(started_ago: timedelta = timedelta(hours=2), **fields: object) -> d.Record:
    return d.Record(
        observer=observer(**fields),
        tracking=d.Tracking(task_version=3, started_at=NOW - started_ago),
    )


def stopped(
    arn: str = ARN,
    *,
    exit_code: int | None = 1,
    stop_code: str = "EssentialContainerExited",
    version: int = 5,
    generation: int = 3,
) -> d.TaskState:
    return d.TaskState(
        arn=arn,
        last_status="STOPPED",
        version=version,
        observer="btc-usd",
        generation=generation,
        stop_code=stop_code,
        exit_code=exit_code,
        stopped_at=NOW,
    )


def decide(*args: Any) -> list[d.Action]:
    """The plan's actions as a list, in order (effects, then the write)."""
    plan = d.decide(*args)
    assert isinstance(plan, d.Plan)
    return list(plan.actions)


def decide_event(*args: Any) -> list[d.Action]:
    plan = d.decide_event(*args)
    assert isinstance(plan, d.Plan)
    return list(plan.actions)


def kinds(actions: list[d.Action]) -> list[type]:
    return [type(a) for a in actions]


# Starting --------------------------------------------------------------------------------------


def test_a_new_observer_is_started_as_generation_one() -> None:
    # Given a PENDING observer that never ran
    new = record(status=Status.PENDING, generation=0, task_arn=None, heartbeat_at=None)
    # When the reconciler looks at it
    actions = decide(new, None, NOW, SETTINGS)
    # Then it starts generation 1, which is not a restart
    assert actions == [
        d.StartTask(
            generation=1,
            restart=False,
            consecutive_failures=0,
            retry_at=NOW + SETTINGS.run_task_retry_base,
        )
    ]


def test_a_start_in_flight_is_not_repeated_until_its_retry_time() -> None:
    starting = record(
        status=Status.STARTING, task_arn=None, next_start_at=NOW + timedelta(seconds=5)
    )
    assert kinds(decide(starting, None, NOW, SETTINGS)) == [d.Ignore]
    later = NOW + timedelta(seconds=6)
    assert decide(starting, None, later, SETTINGS) == [d.RetryStart(3)]


# Restarting ------------------------------------------------------------------------------------


def test_first_crash_restarts_at_once_with_the_next_generation() -> None:
    actions = decide(record(), stopped(), NOW, SETTINGS)
    assert len(actions) == 1
    start = actions[0]
    assert isinstance(start, d.StartTask)
    assert (start.generation, start.restart, start.consecutive_failures) == (4, True, 1)
    assert start.last_exit is not None and start.last_exit.exit_code == 1


def test_repeated_quick_crashes_back_off() -> None:
    quick = record(started_ago=timedelta(seconds=20), consecutive_failures=2)
    actions = decide(quick, stopped(), NOW, SETTINGS)
    assert actions == [
        d.Backoff(
            until=NOW + 2 * SETTINGS.backoff_base,
            consecutive_failures=3,
            last_exit=stopped().last_exit(NOW),
        )
    ]


def test_a_crash_after_a_long_healthy_run_resets_the_streak() -> None:
    healthy = record(started_ago=timedelta(hours=3), consecutive_failures=4)
    (start,) = decide(healthy, stopped(), NOW, SETTINGS)
    assert isinstance(start, d.StartTask) and start.consecutive_failures == 1


def test_a_task_that_never_claims_counts_as_a_quick_failure_and_ends_failed() -> None:
    # Started 11 minutes ago and never claimed (past the 10-minute start timeout).
    silent = record(
        started_ago=timedelta(minutes=11),
        status=Status.STARTING,
        heartbeat_at=None,
        consecutive_failures=SETTINGS.failure_threshold - 1,
    )
    up = d.TaskState(arn=ARN, last_status="RUNNING", version=4)
    actions = decide(silent, up, NOW, SETTINGS)
    assert [type(a) for a in actions] == [d.StopTask, d.MarkFailed]


def test_the_threshold_of_quick_failures_marks_the_observer_failed() -> None:
    streak = record(started_ago=timedelta(seconds=5), consecutive_failures=4)
    (failed,) = decide(streak, stopped(), NOW, SETTINGS)
    assert isinstance(failed, d.MarkFailed)
    assert failed.consecutive_failures == 5
    assert "5 consecutive quick failures" in failed.reason and "exit code 1" in failed.reason


def test_a_bad_config_exit_fails_at_once() -> None:
    (failed,) = decide(record(), stopped(exit_code=ExitCode.BAD_CONFIGURATION), NOW, SETTINGS)
    assert isinstance(failed, d.MarkFailed) and "bad config" in failed.reason


def test_a_task_stopped_by_a_person_restarts_without_counting_a_failure() -> None:
    manual = stopped(exit_code=0, stop_code="UserInitiated")
    (start,) = decide(record(consecutive_failures=2), manual, NOW, SETTINGS)
    assert isinstance(start, d.StartTask) and start.consecutive_failures == 2


def test_a_stale_heartbeat_is_looked_at_then_the_task_is_replaced() -> None:
    silent = record(heartbeat_at=NOW - 3 * SETTINGS.heartbeat_interval - timedelta(seconds=1))
    assert decide(silent, None, NOW, SETTINGS) == [d.Describe(ARN)]
    up = d.TaskState(arn=ARN, last_status="RUNNING", version=4)
    stop, start = decide(silent, up, NOW, SETTINGS)
    assert stop == d.StopTask(ARN, "no heartbeat")
    assert isinstance(start, d.StartTask) and start.generation == 4


def test_a_heartbeat_just_inside_three_intervals_is_fresh() -> None:
    alive = record(heartbeat_at=NOW - 3 * SETTINGS.heartbeat_interval)
    assert kinds(decide(alive, None, NOW, SETTINGS)) == [d.Ignore]
    assert kinds(decide(alive, d.Listed(running=True), NOW, SETTINGS)) == [d.Ignore]


def test_a_task_missing_from_the_running_list_is_described() -> None:
    assert decide(record(), d.Listed(running=False), NOW, SETTINGS) == [d.Describe(ARN)]


def test_a_restart_request_replaces_the_current_task() -> None:
    asked = record(restart_generation=3)
    stop, start = decide(asked, None, NOW, SETTINGS)
    assert stop == d.StopTask(ARN, "restart requested")
    assert isinstance(start, d.StartTask) and start.generation == 4
    # Once the new generation runs, the same request asks nothing more.
    done = record(restart_generation=3, generation=4)
    assert kinds(decide(done, None, NOW, SETTINGS)) == [d.Ignore]


# Stopping --------------------------------------------------------------------------------------


def test_desired_stopped_stops_the_task_then_marks_stopped() -> None:
    wanted_stopped = record(desired=Desired.STOPPED)
    assert decide(wanted_stopped, None, NOW, SETTINGS) == [
        d.StopTask(ARN, "stop requested"),
        d.MarkStopping(),
    ]
    stopping = record(desired=Desired.STOPPED, status=Status.STOPPING)
    assert decide(stopping, None, NOW, SETTINGS) == [d.StopTask(ARN, "stop requested")]
    done = stopped(exit_code=0, stop_code="UserInitiated")
    assert decide(stopping, done, NOW, SETTINGS) == [d.MarkStopped(done.last_exit(NOW))]


def test_a_restart_while_stopping_finishes_the_stop_then_starts_afresh() -> None:
    # Given a stop that was withdrawn by a restart request before the task stopped
    withdrawn = record(status=Status.STOPPING, restart_generation=3)
    # The task is still up: it is stopped (its container would keep running otherwise)
    assert decide(withdrawn, d.Listed(running=True), NOW, SETTINGS) == [
        d.StopTask(ARN, "stopping before a restart")
    ]
    # Once it stopped, the next generation starts at once
    done = stopped(exit_code=0, stop_code="UserInitiated")
    (start,) = decide(withdrawn, done, NOW, SETTINGS)
    assert isinstance(start, d.StartTask) and start.generation == 4


def test_desired_stopped_without_a_task_is_stopped_at_once() -> None:
    pending = record(desired=Desired.STOPPED, status=Status.PENDING, task_arn=None)
    assert kinds(decide(pending, None, NOW, SETTINGS)) == [d.MarkStopped]


# Events ----------------------------------------------------------------------------------------


def test_an_event_for_an_older_task_is_stale() -> None:
    (ignored,) = decide_event(record(), stopped(OLD_ARN, generation=2), NOW, SETTINGS)
    assert isinstance(ignored, d.Ignore) and ignored.stale


def test_an_event_not_newer_than_the_recorded_version_is_ignored() -> None:
    late = d.TaskState(arn=ARN, last_status="STOPPED", version=3, exit_code=1)
    (ignored,) = decide_event(record(), late, NOW, SETTINGS)
    assert isinstance(ignored, d.Ignore) and ignored.stale


def test_a_running_event_is_recorded_with_its_version() -> None:
    running = d.TaskState(arn=ARN, last_status="RUNNING", version=4)
    assert decide_event(record(), running, NOW, SETTINGS) == [d.SeeTask(ARN, 4, "RUNNING")]


def test_a_live_task_that_is_not_current_is_an_orphan() -> None:
    old = d.TaskState(arn=OLD_ARN, last_status="RUNNING", version=2, observer="btc-usd")
    (stop,) = decide_event(record(), old, NOW, SETTINGS)
    assert isinstance(stop, d.StopTask) and stop.arn == OLD_ARN


def test_an_event_adopts_the_task_of_a_start_in_flight() -> None:
    starting = record(status=Status.STARTING, task_arn=None, generation=4)
    event = d.TaskState(arn=ARN, last_status="PROVISIONING", version=1, generation=4)
    assert decide_event(starting, event, NOW, SETTINGS) == [d.SeeTask(ARN, 1, "PROVISIONING")]


def test_orphans_are_stopped_but_a_young_task_of_the_current_generation_is_spared() -> None:
    rec = record(generation=4)
    older = d.TaskState(arn=OLD_ARN, last_status="RUNNING", observer="btc-usd", generation=3)
    assert isinstance(d.classify_orphan(older, rec, NOW, SETTINGS), d.StopTask)
    young = replace(older, generation=5, created_at=NOW - timedelta(seconds=10))
    assert isinstance(d.classify_orphan(young, rec, NOW, SETTINGS), d.Ignore)
    unmarked = replace(older, observer=None)
    assert isinstance(d.classify_orphan(unmarked, rec, NOW, SETTINGS), d.Ignore)
    assert isinstance(d.classify_orphan(older, None, NOW, SETTINGS), d.StopTask)


# Properties ------------------------------------------------------------------------------------

statuses = st.sampled_from(list(Status))
desireds = st.sampled_from(list(Desired))
offsets = st.integers(min_value=-3600, max_value=3600).map(lambda s: timedelta(seconds=s))
ecs_statuses = st.sampled_from(["PROVISIONING", "PENDING", "RUNNING", "STOPPED", d.MISSING])
exits = st.one_of(st.none(), st.integers(min_value=0, max_value=3), st.just(137))
stop_codes = st.sampled_from(
    [None, "EssentialContainerExited", "UserInitiated", "TaskFailedToStart", "SpotInterruption"]
)


@st.composite
def records(draw: st.DrawFn) -> d.Record:
    has_task = draw(st.booleans())
    has_heartbeat = draw(st.booleans())
    return d.Record(
        observer=observer(
            status=draw(statuses),
            desired=draw(desireds),
            generation=draw(st.integers(min_value=0, max_value=50)),
            task_arn=ARN if has_task else None,
            heartbeat_at=NOW + draw(offsets) if has_heartbeat else None,
            consecutive_failures=draw(st.integers(min_value=0, max_value=10)),
            next_start_at=draw(st.one_of(st.none(), offsets.map(lambda o: NOW + o))),
            restart_generation=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=50))),
        ),
        tracking=d.Tracking(
            task_version=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=10))),
            started_at=draw(st.one_of(st.none(), offsets.map(lambda o: NOW + o))),
        ),
    )


@st.composite
def evidences(draw: st.DrawFn) -> d.Evidence:
    choice = draw(st.integers(min_value=0, max_value=2))
    if choice == 0:
        return None
    if choice == 1:
        return d.Listed(running=draw(st.booleans()))
    return d.TaskState(
        arn=draw(st.sampled_from([ARN, OLD_ARN])),
        last_status=draw(ecs_statuses),
        version=draw(st.one_of(st.none(), st.integers(min_value=0, max_value=10))),
        observer="btc-usd",
        generation=draw(st.integers(min_value=0, max_value=50)),
        stop_code=draw(stop_codes),
        exit_code=draw(exits),
    )


def apply(rec: d.Record, actions: list[d.Action]) -> d.Record:
    """What the store's write does to the fields the decisions read (the tests' model of it)."""
    o = rec.observer
    for a in actions:
        match a:
            case d.StartTask():
                o = replace(
                    o,
                    generation=a.generation,
                    status=Status.STARTING,
                    task_arn=None,
                    heartbeat_at=None,
                    consecutive_failures=a.consecutive_failures,
                    next_start_at=a.retry_at,
                )
                rec = d.Record(o, d.Tracking(started_at=NOW))
            case d.Backoff():
                o = replace(o, status=Status.PENDING, next_start_at=a.until)
            case d.MarkStopping():
                o = replace(o, status=Status.STOPPING)
            case d.MarkStopped():
                o = replace(o, status=Status.STOPPED)
            case d.MarkFailed():
                o = replace(o, status=Status.FAILED)
            case d.SeeTask():
                o = replace(o, task_arn=a.arn)
    return d.Record(o, rec.tracking)


@settings(max_examples=400, deadline=None)
@given(records(), evidences())
def test_one_decision_starts_at_most_one_task_for_the_next_generation(
    rec: d.Record, evidence: d.Evidence
) -> None:
    actions = decide(rec, evidence, NOW, SETTINGS)
    starts = [a for a in actions if isinstance(a, d.StartTask | d.RetryStart)]
    writes = [a for a in actions if isinstance(a, d.WRITES)]
    assert len(starts) <= 1 and len(writes) <= 1
    for start in starts:
        expected = rec.observer.generation + (1 if isinstance(start, d.StartTask) else 0)
        assert start.generation == expected
        assert rec.observer.desired is Desired.RUNNING
    if any(isinstance(a, d.Describe) for a in actions):
        assert actions == [d.Describe(rec.observer.task_arn or "")]


@settings(max_examples=400, deadline=None)
@given(records(), evidences(), st.integers(min_value=0, max_value=5))
def test_deciding_again_after_acting_never_starts_the_same_generation_twice(
    rec: d.Record, evidence: d.Evidence, seconds_later: int
) -> None:
    first = decide(rec, evidence, NOW, SETTINGS)
    started = {a.generation for a in first if isinstance(a, d.StartTask)}
    after = apply(rec, first)
    # The same evidence delivered again (a duplicate event, a second pass) a moment later.
    again = decide(after, evidence, NOW + timedelta(seconds=seconds_later), SETTINGS)
    started_again = {a.generation for a in again if isinstance(a, d.StartTask | d.RetryStart)}
    assert not started & started_again


@settings(max_examples=300, deadline=None)
@given(records(), evidences(), st.integers(min_value=0, max_value=10))
def test_stale_events_change_nothing(rec: d.Record, evidence: d.Evidence, back: int) -> None:
    if not isinstance(evidence, d.TaskState) or rec.observer.task_arn is None:
        return  # with no current task an event may adopt its task: not stale by definition
    seen = rec.tracking.task_version if rec.tracking.task_version is not None else back
    rec = replace(rec, tracking=replace(rec.tracking, task_version=seen))
    older = replace(evidence, arn=rec.observer.task_arn, version=seen - back)
    foreign = replace(evidence, arn=OLD_ARN)
    for event in (older, foreign):
        actions = decide_event(rec, event, NOW, SETTINGS)
        assert not any(isinstance(a, (*d.WRITES, d.StartTask, d.RetryStart)) for a in actions)
        assert all(a.arn == OLD_ARN for a in actions if isinstance(a, d.StopTask))
        assert all(a.stale for a in actions if isinstance(a, d.Ignore))


@given(st.integers(min_value=0, max_value=200))
def test_backoff_is_monotone_capped_and_the_first_restart_is_immediate(failures: int) -> None:
    assert d.backoff_delay(0, SETTINGS) == d.backoff_delay(1, SETTINGS) == timedelta(0)
    here, there = d.backoff_delay(failures, SETTINGS), d.backoff_delay(failures + 1, SETTINGS)
    assert timedelta(0) <= here <= there <= SETTINGS.backoff_cap
    retry, retry_next = (
        d.run_task_retry_delay(failures, SETTINGS),
        d.run_task_retry_delay(failures + 1, SETTINGS),
    )
    assert timedelta(0) < retry <= retry_next <= SETTINGS.run_task_retry_cap


def test_last_exit_distinguishes_crash_from_stop() -> None:
    assert not stopped(exit_code=0, stop_code="UserInitiated").last_exit(NOW).crashed
    assert stopped(exit_code=1).last_exit(NOW).crashed
    assert LastExit(stop_code="TaskFailedToStart").crashed


@settings(max_examples=300, deadline=None)
@given(records(), evidences())
def test_a_plan_holds_at_most_one_write_and_says_when_it_looks_or_starts(
    rec: d.Record, evidence: d.Evidence
) -> None:
    plan = d.decide(rec, evidence, NOW, SETTINGS)
    assert not any(isinstance(e, d.WRITES) for e in plan.effects)
    if plan.write is not None:
        assert plan.actions[-1] == plan.write
    assert plan.starts == any(isinstance(a, d.StartTask | d.RetryStart) for a in plan.actions)
    assert (plan.look is not None) == any(isinstance(a, d.Describe) for a in plan.actions)


def test_a_young_task_is_an_orphan_at_once_when_the_record_names_another_of_its_generation() -> (
    None
):
    young = d.TaskState(
        arn=OLD_ARN,
        last_status="RUNNING",
        observer="btc-usd",
        generation=3,
        created_at=NOW - timedelta(seconds=10),
    )
    assert isinstance(d.classify_orphan(young, record(generation=3), NOW, SETTINGS), d.StopTask)
    # A newer generation than the record's may still be its starter's: spared a moment
    newer = replace(young, generation=4)
    assert isinstance(d.classify_orphan(newer, record(generation=3), NOW, SETTINGS), d.Ignore)


def test_a_task_still_running_under_a_stopped_record_is_an_orphan() -> None:
    # A STOPPED record leaves the live fleet index, so only the orphan sweep meets its task: a
    # stop that did not take (or a container that wrote STOPPED and hangs) must not run on.
    task = d.TaskState(arn=ARN, last_status="RUNNING", observer="btc-usd", generation=4)
    done = record(generation=4, task_arn=ARN, status=Status.STOPPED, desired=Desired.STOPPED)
    assert isinstance(d.classify_orphan(task, done, NOW, SETTINGS), d.StopTask)
    assert isinstance(d.classify_orphan(task, record(generation=4), NOW, SETTINGS), d.Ignore)
    # ...but a young task of a newer generation may be a start about to be recorded
    starting = replace(task, generation=5, created_at=NOW - timedelta(seconds=10))
    assert isinstance(d.classify_orphan(starting, done, NOW, SETTINGS), d.Ignore)
