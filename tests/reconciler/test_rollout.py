"""Rolling dedicated observers onto a new task definition, and Spot interruptions, on moto.

Each move is a hand-over: the resync stops the old task (STOPPING, desired still RUNNING), its
STOPPED event (UserInitiated, exit 0: the container checkpointed on SIGTERM) starts the next
generation on the new revision, which claims and resumes from the checkpoint.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from tests.helpers.moto_fleet import KIND, TABLE, MotoFleet, running, task_event
from vigil.contract.hosts import PLACEMENTS_ENV
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import task_state
from vigil.observers.fleet_store import record_from_item
from vigil.observers.model import Observer, Status, to_item
from vigil.observers.reconciler import Reconciler, ReconcilerConfig, Rollouts, dedicated_rollouts
from vigil.observers.registry import ObserverRegistry
from vigil.observers.rollout import budget

OBSERVERS = 10
PERCENT = 20  # two at a time


def new_revision(fleet: MotoFleet) -> tuple[str, str]:
    """Register revision 2 of the kind's family, as a deploy would; (old, new)."""
    return fleet.task_definition_arn, fleet.register_revision("vigil/observer:v2")


def running_on(fleet: MotoFleet, count: int, revision: str) -> list[str]:
    names = [f"obs-{i:02d}" for i in range(count)]
    for name in names:
        observer, _ = fleet.running_task(name, 1, checkpoint={"seen": name})
        fleet.put(
            observer,
            started_at_ms=int((fleet.clock() - timedelta(hours=1)).timestamp() * 1000),
            task_definition=revision,
            capacity="on-demand",
        )
    return names


def rolling(fleet: MotoFleet, new: str, percent: int = PERCENT) -> Reconciler:
    """The reconciler as a deploy leaves it: RunTask and the rollout on the new revision."""
    fleet.task_definition_arn = new
    return fleet.reconciler(
        rollouts=Rollouts(revisions={KIND: new}, max_unavailable={KIND: percent})
    )


def stopped_event_for(fleet: MotoFleet, name: str, version: int, **stop: object) -> dict:  # type: ignore[type-arg]
    item = fleet.item(name)
    return task_event(
        fleet,
        item["task_arn"],
        name=name,
        generation=int(item["generation"]),
        last_status="STOPPED",
        version=version,
        **stop,  # type: ignore[arg-type]
    )


def unavailable(fleet: MotoFleet, names: list[str]) -> int:
    return sum(1 for n in names if fleet.item(n)["status"] != Status.RUNNING.value)


def test_a_new_task_definition_reaches_every_observer_within_the_budget(fleet: MotoFleet) -> None:
    # Given ten observers RUNNING on revision 1, each with a checkpoint
    old, new = new_revision(fleet)
    names = running_on(fleet, OBSERVERS, old)
    registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=fleet.clock)
    reconciler = rolling(fleet, new)
    limit = budget(PERCENT, OBSERVERS)
    assert limit == 2
    # When resync passes run, STOPPED events arrive for the stopped tasks, and the new
    # generations claim only every other round (so starts stay in flight across passes)
    version = 10
    for round_ in range(30):
        report = reconciler.resync(f"pass-{round_}")
        assert report is not None
        assert report.handed_over <= limit
        # Then never more than the budget is unavailable at once
        assert unavailable(fleet, names) <= limit
        for name in names:
            item = fleet.item(name)
            if item["status"] == Status.STOPPING.value:
                assert item["desired"] == "RUNNING"
                version += 1
                reconciler.on_task_event(
                    task_state(
                        stopped_event_for(
                            fleet, name, version, stop_code="UserInitiated", exit_code=0
                        )["detail"]
                    )
                )
        assert unavailable(fleet, names) <= limit
        fleet.clock.advance(timedelta(seconds=20))
        for name in names:  # the running containers heartbeat; the new ones claim every other round
            item = fleet.item(name)
            if item["status"] == Status.RUNNING.value:
                registry.heartbeat(name, int(item["generation"]))
            elif item["status"] == Status.STARTING.value and round_ % 2:
                registry.claim_generation(name, int(item["generation"]))
        if all(fleet.item(n).get("task_definition") == new for n in names) and not unavailable(
            fleet, names
        ):
            break
    # Then every observer runs generation 2 on revision 2, from its checkpoint, with no failure
    for name in names:
        item = fleet.item(name)
        assert (item["status"], item["generation"]) == ("RUNNING", 2)
        assert item["task_definition"] == new
        assert item["checkpoint"] == {"seen": name}
        assert item["consecutive_failures"] == 0 and "next_start_at_ms" not in item
        assert item["last_exit"]["stop_code"] == "UserInitiated"
        assert fleet.describe(item["task_arn"])["taskDefinitionArn"] == new
    assert len(running(fleet)) == OBSERVERS
    # And a pass after the rollout hands nothing over
    report = reconciler.resync("after")
    assert report is not None and report.handed_over == 0 and report.stopped == 0


def test_a_pass_with_nothing_to_roll_makes_no_extra_call(fleet: MotoFleet) -> None:
    # Given observers all on the current revision
    old, _ = new_revision(fleet)
    running_on(fleet, 5, old)
    assert fleet.reconciler().resync("first") is not None  # creates the lease item
    fleet.counter.reset()
    # When one pass runs without rollouts and one with them
    assert fleet.reconciler().resync("plain") is not None
    plain = dict(fleet.counter.calls)
    fleet.counter.reset()
    report = rolling(fleet, old).resync("rolling")
    # Then both make the same calls
    assert report is not None and report.handed_over == 0
    assert dict(fleet.counter.calls) == plain


def test_observers_with_no_recorded_revision_are_left_to_their_next_start(
    fleet: MotoFleet,
) -> None:
    # Given an observer started before the reconciler recorded task definitions
    _, new = new_revision(fleet)
    fleet.running_task("legacy", 1)
    # When a rollout pass runs
    report = rolling(fleet, new).resync("pass")
    # Then it is not stopped
    assert report is not None and report.handed_over == 0
    assert fleet.item("legacy")["status"] == "RUNNING"


def test_a_hand_over_that_misses_its_event_completes_in_the_next_pass(fleet: MotoFleet) -> None:
    # Given a rollout that stopped an observer's task
    old, new = new_revision(fleet)
    running_on(fleet, 1, old)
    reconciler = rolling(fleet, new)
    report = reconciler.resync("one")
    assert report is not None and report.handed_over == 1
    assert fleet.item("obs-00")["status"] == "STOPPING"
    # When its STOPPED event is lost and the next pass runs
    report = reconciler.resync("two")
    # Then the pass sees the task gone and starts generation 2 on the new revision
    item = fleet.item("obs-00")
    assert (item["status"], item["generation"], item["consecutive_failures"]) == ("STARTING", 2, 0)
    assert item["task_definition"] == new


def test_a_stop_requested_during_a_hand_over_stops_the_observer(fleet: MotoFleet) -> None:
    # Given an observer being handed over
    old, new = new_revision(fleet)
    running_on(fleet, 1, old)
    reconciler = rolling(fleet, new)
    reconciler.resync("one")
    # When the operator stops it before the task's STOPPED event arrives
    registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=fleet.clock)
    registry.request_stop("obs-00")
    event = stopped_event_for(fleet, "obs-00", 20, stop_code="UserInitiated", exit_code=0)
    reconciler.on_task_event(task_state(event["detail"]))
    # Then it ends STOPPED, not restarted
    item = fleet.item("obs-00")
    assert (item["status"], item["generation"]) == ("STOPPED", 1)


# Spot interruptions ----------------------------------------------------------------------------


def spot_interrupted(fleet: MotoFleet, exit_code: int, **fields: object) -> Observer:
    """A Spot observer (generation 3) whose task ECS stopped with SpotInterruption, its event
    handed to the reconciler."""
    observer, arn = fleet.running_task("spot", 3, **fields)
    fleet.ecs_client.stop_task(cluster=fleet.cluster_arn, task=arn, reason="spot")
    event = task_event(
        fleet,
        arn,
        name="spot",
        generation=3,
        last_status="STOPPED",
        version=7,
        stop_code="SpotInterruption",
        exit_code=exit_code,
        stopped_reason="Your Spot Task was interrupted.",
    )
    fleet.reconciler().on_task_event(task_state(event["detail"]))
    return observer


def test_a_spot_interruption_restarts_at_once_without_counting_a_failure(
    fleet: MotoFleet,
) -> None:
    # Given a Spot observer with one earlier quick failure on record, when its task stops with
    # SpotInterruption after the container checkpointed (exit 0)
    observer = spot_interrupted(fleet, 0, consecutive_failures=1)
    # Then the next generation starts at once and the failure count is unchanged
    item = fleet.item("spot")
    assert (item["status"], item["generation"]) == ("STARTING", 4)
    assert item["consecutive_failures"] == 1 and item["restarts"] == observer.restarts + 1
    assert item["last_exit"]["stop_code"] == "SpotInterruption"
    assert fleet.metrics.count(("ObserverRestarted", KIND, 1)) == 1


def test_a_spot_interruption_the_container_did_not_survive_is_a_crash(fleet: MotoFleet) -> None:
    # Given a Spot observer whose container was killed after the interruption (exit 137)
    spot_interrupted(fleet, 137)
    # Then it counts as a failure, as a crash always has
    item = fleet.item("spot")
    assert item["consecutive_failures"] == 1
    assert item["last_exit"]["exit_code"] == 137


def test_the_deployed_reconciler_rolls_dedicated_kinds_only() -> None:
    config = ReconcilerConfig.from_env(
        {
            "VIGIL_REGISTRY_TABLE": "t",
            "VIGIL_CLUSTER_ARN": "arn:aws:ecs:us-east-1:123456789012:cluster/c",
            "VIGIL_TASK_DEFINITIONS": '{"ticker": "td-ticker:2", "pool": "td-pool:5"}',
            "VIGIL_CONTAINER_NAME": "observer",
            "VIGIL_SUBNETS": "subnet-1",
            "VIGIL_SECURITY_GROUPS": "sg-1",
            "VIGIL_OBSERVERS_DLQ_URL": "https://sqs/dlq",
            "VIGIL_HEARTBEAT_SECONDS": "30",
            PLACEMENTS_ENV: '{"ticker": {"max_unavailable": 25}, "pool": {"placement": "pooled"}}',
        }
    )
    rollouts = dedicated_rollouts(config)
    assert rollouts.revisions == {"ticker": "td-ticker:2"}
    assert rollouts.max_unavailable == {"ticker": 25}


def test_a_due_observer_that_needs_a_look_is_not_handed_over_this_pass(fleet: MotoFleet) -> None:
    # Given an outdated observer whose heartbeat is stale (the resync must describe its task)
    _, new = new_revision(fleet)
    observer, _ = fleet.running_task("stale", 1)
    record = fleet.reconciler().resyncs.store.get("stale")
    assert record is not None
    rollouts = Rollouts(revisions={KIND: new})
    due = {"stale": new}
    look = d.Plan(effects=(d.Describe(observer.task_arn or ""),))
    # Then the look wins; a healthy one is handed over
    assert rollouts.replace(record, look, due) is look
    healthy = d.Plan(effects=(d.Ignore("heartbeat fresh"),))
    handed = rollouts.replace(record, healthy, due)
    assert isinstance(handed.write, d.HandOver) and handed.write.task_definition == new
    assert rollouts.replace(record, healthy, {}) is healthy


def test_the_recorded_task_definition_is_read_into_one_field(fleet: MotoFleet) -> None:
    # Given a pooled observer's item, placed and started on a revision
    item = to_item(fleet.observer("obs-1", host="h1", task_definition=fleet.task_definition_arn))

    # When the reconciler reads it
    record = record_from_item(item)

    # Then the observer carries the revision, and nothing else parses it a second time
    assert record.observer.task_definition == fleet.task_definition_arn
    for part in (d.Tracking, d.Pooled):
        assert "task_definition" not in {f.name for f in dataclasses.fields(part)}
