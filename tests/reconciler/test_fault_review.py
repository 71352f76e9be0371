"""An adversarial review of issue 21's fixes: each test is a defect found and reproduced."""

from __future__ import annotations

from datetime import timedelta

from tests.helpers.moto_fleet import running
from tests.helpers.pooled_fleet import POOLED, PooledFleet, create, resync
from tests.reconciler.test_stuck import SpotThenTimeouts
from vigil.contract.hosts import Capacity


def test_a_hosts_fallback_that_timed_out_is_retried_on_demand_never_on_spot(
    pool: PooledFleet,
) -> None:
    # Given a pooled Spot kind: Spot refuses, on-demand starts the host's task but the answer
    # times out (the pass records a start failure and retries the host later)
    pool.capacities[POOLED] = Capacity.SPOT
    ecs = SpotThenTimeouts(pool.ecs_client, timeouts=1)
    pool.ecs_client = ecs
    create(pool, "p1")
    assert ecs.asked == ["spot", "on-demand"]
    # When a later pass retries the host's start (Spot has capacity again by then)
    pool.clock.advance(pool.settings.run_task_retry_base * 4 + timedelta(seconds=1))
    resync(pool, "later")
    # Then the retry asked on-demand under the same token: one task for the host, not two
    assert ecs.asked == ["spot", "on-demand", "on-demand"]
    assert len(running(pool)) == 1
