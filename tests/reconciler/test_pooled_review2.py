"""Second adversarial review of pooled hosts (after issue 19's fixes): defects found at the seams
between the fixes, each reproduced on moto before its fix."""

from __future__ import annotations

from datetime import timedelta

from tests.helpers.pooled_fleet import PooledFleet, resync
from tests.reconciler.test_pooled_drain_gaps import drains_itself, placed
from vigil.contract.hosts import HostStatus
from vigil.telemetry import ObserverMetric

# 1. A host stopped by ECS (Spot interruption, StopTask, a deploy) drains; it is not lost --------


def test_a_host_whose_task_ecs_is_stopping_drains_and_is_not_lost_while_children_checkpoint(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    host_id = placed(pool, "a", "b")
    # Given ECS stops the host's task (a Spot interruption): from now on ListTasks
    # (desiredStatus RUNNING) no longer lists it, though its container runs until it exits
    # (up to the stop timeout), and the host heartbeats DRAINING at once (its SIGTERM) while
    # its children checkpoint
    pool.stop_host_task(host_id)
    pool.clock.advance(timedelta(seconds=5))
    drains_itself(pool, host_id, "a", "b")
    pool.metrics.clear()
    # When the next pass runs before the children have exited (no STOPPED event yet)
    resync(pool, "during-drain")
    # Then the host is still draining, not LOST: its children are still checkpointing, and
    # their exit reports place the next generations (a LOST host is refused its heartbeat and
    # fences them: their last checkpoints are lost, and HostLost pages for a routine drain)
    assert pool.host(host_id).status is HostStatus.DRAINING
    assert [m for m in pool.metrics if m[0] == ObserverMetric.HOST_LOST.value] == []
    assert (pool.item("a")["host"], pool.item("a")["generation"]) == (host_id, 1)


def test_a_host_whose_task_ecs_just_stopped_is_not_lost_before_its_draining_beat(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    host_id = placed(pool, "a")
    # Given ECS has just stopped the host's task; its DRAINING heartbeat has not landed yet
    pool.stop_host_task(host_id)
    # When a pass runs in that window
    resync(pool, "before-drain-beat")
    # Then the host is not LOST (its next beat would announce the drain)
    assert pool.host(host_id).status is not HostStatus.LOST


def test_a_host_told_to_stop_that_never_drains_is_lost_once_ecs_has_stopped_its_task(
    pooled_only: PooledFleet,
) -> None:
    pool = pooled_only
    host_id = placed(pool, "a")
    # Given ECS was told to stop the host's task, and the host announces no drain (hung)
    pool.stop_host_task(host_id)
    pool.counter.reset()
    resync(pool, "stopping")
    assert pool.host(host_id).status is HostStatus.RUNNING
    assert pool.counter.calls["DescribeTasks"] == 1  # ECS is asked about the unlisted task
    # When ECS ends the task at its stop timeout (SIGKILL: STOPPED), its STOPPED event lost
    pool.clock.advance(timedelta(seconds=30))
    pool.kill_host_task(host_id)
    resync(pool, "stopped")
    # Then the very next pass finds it LOST and moves its observer, as for any dead task
    assert pool.host(host_id).status is HostStatus.LOST
    assert (pool.item("a")["host"], pool.item("a")["generation"]) != (host_id, 1)
