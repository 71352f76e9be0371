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
