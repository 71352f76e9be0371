"""What a rollout costs the reconciler: API calls and own time per resync, and the pure planners.

On moto, 1,000 dedicated observers RUNNING on revision 1 of their kind's task definition:

* a pass with the rollout configured and nothing to roll (every record already names the current
  revision) against the same pass without it: the rollout must add no call;
* the first pass after a deploy to revision 2 (max_unavailable 10 %: 100 hand-overs, each one
  UpdateItem and one StopTask);
* a pass once their STOPPED events have started the next generations (100 STARTING, in flight:
  nothing more may move).

Then the pure pooled planner (``plan_pooled``) at 10,000 observers on 200 hosts (K = 50), and
``plan_rebalance`` moving up to 1,000 on 200 unevenly loaded hosts: time per call, no AWS.

``python -m benchmarks.rollout_scale`` prints the table.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime
from typing import Any

from moto import mock_aws

from benchmarks.offline import offline_aws
from benchmarks.reconciler_scale import PagedListTasks, Timing, pass_table, running_fleet
from tests.helpers.moto_fleet import KIND, MotoFleet, default_task_transitions, task_event
from vigil.clock import ManualClock
from vigil.contract.hosts import HostStatus
from vigil.observers.ecs_tasks import task_state
from vigil.observers.model import Status
from vigil.observers.reconciler import Rollouts
from vigil.observers.rollout import HostView, budget, plan_pooled, plan_rebalance

OBSERVERS = 1_000
PERCENT = 10
OPERATIONS = ("Query", "ListTasks", "DescribeTasks", "UpdateItem", "StopTask", "RunTask")
HOSTS, SLOTS = 200, 50
PLANNER_SAMPLES = 50


def _pass(
    fleet: MotoFleet, timing: Timing, ecs: PagedListTasks, rollouts: Rollouts | None, label: str
) -> dict[str, Any]:
    timing.reset()
    started = time.perf_counter()
    report = fleet.reconciler(ecs_client=ecs, rollouts=rollouts).resync(label)
    wall = time.perf_counter() - started
    assert report is not None
    return {
        "case": label,
        "wall": wall,
        "own": wall - timing.aws_seconds,
        "calls": dict(timing.calls),
        "handed_over": report.handed_over,
    }


def _hand_overs_stop(fleet: MotoFleet, rollouts: Rollouts, size: int) -> int:
    """The STOPPED events of the stopped tasks (UserInitiated, exit 0): the event passes start
    the next generations, which stay STARTING (not yet claimed)."""
    reconciler = fleet.reconciler(rollouts=rollouts)
    handled = 0
    for index in range(size):
        name = f"obs-{index:05d}"
        item = fleet.item(name)
        if item["status"] != Status.STOPPING.value:
            continue
        event = task_event(
            fleet,
            item["task_arn"],
            name=name,
            generation=int(item["generation"]),
            last_status="STOPPED",
            version=9,
            stop_code="UserInitiated",
            exit_code=0,
        )
        reconciler.on_task_event(task_state(event["detail"]))
        handled += 1
    return handled


def measure_dedicated(size: int = OBSERVERS) -> list[dict[str, Any]]:
    clock = ManualClock(datetime(2026, 11, 23, 12, 0, tzinfo=UTC))
    rows: list[dict[str, Any]] = []
    with mock_aws():
        try:
            fleet, timing, ecs = running_fleet(size, clock, record_revision=True)
            old, new = fleet.task_definition_arn, fleet.register_revision("vigil/observer:v2")
            _pass(fleet, timing, ecs, None, "warm-up (lease item)")
            rows.append(_pass(fleet, timing, ecs, None, "healthy, no rollout configured"))
            current = Rollouts(revisions={KIND: old}, max_unavailable={KIND: PERCENT})
            rows.append(_pass(fleet, timing, ecs, current, "healthy, rollout on, nothing to roll"))
            deploy = Rollouts(revisions={KIND: new}, max_unavailable={KIND: PERCENT})
            fleet.task_definition_arn = new
            rows.append(_pass(fleet, timing, ecs, deploy, "deploy: first rollout pass"))
            events = _hand_overs_stop(fleet, deploy, size)
            rows.append(_pass(fleet, timing, ecs, deploy, f"{events} starting: budget in flight"))
        finally:
            default_task_transitions()
    return rows


def _median_ms(call: Any) -> float:
    samples = []
    for _ in range(PLANNER_SAMPLES):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def measure_planners() -> list[str]:
    old = [
        HostView(f"h{i:03d}", "pool", "td:1", HostStatus.RUNNING, SLOTS, SLOTS)
        for i in range(HOSTS)
    ]
    fresh = [HostView(f"n{i:03d}", "pool", "td:2", HostStatus.RUNNING, 0, SLOTS) for i in range(20)]
    hosts = old + fresh
    step = plan_pooled("td:2", PERCENT, SLOTS, hosts)
    pooled_ms = _median_ms(lambda: plan_pooled("td:2", PERCENT, SLOTS, hosts))
    uneven = [
        HostView(f"h{i:03d}", "pool", "td:1", HostStatus.RUNNING, (i * 7) % (SLOTS + 1), SLOTS)
        for i in range(HOSTS)
    ]
    moves = plan_rebalance(uneven, 1000)
    rebalance_ms = _median_ms(lambda: plan_rebalance(uneven, 1000))
    return [
        f"`plan_pooled` at {HOSTS * SLOTS:,} observers on {HOSTS} old hosts (K = {SLOTS}) and "
        f"20 new empty ones, max_unavailable {PERCENT} %: moves {step.moves} "
        f"(budget {budget(PERCENT, HOSTS * SLOTS)}), drains {len(step.drain)} hosts, "
        f"starts {step.start_hosts}; "
        f"median {pooled_ms:.2f} ms per call ({PLANNER_SAMPLES} calls).",
        f"`plan_rebalance` on {HOSTS} hosts loaded 0-{SLOTS} unevenly, max 1,000: "
        f"{len(moves)} moves; median {rebalance_ms:.1f} ms per call.",
    ]


def run() -> str:
    rows = measure_dedicated()
    lines = pass_table(
        (f"Pass at {OBSERVERS:,} dedicated observers",),
        rows,
        lambda r: (r["case"],),
        OPERATIONS,
        (("Handed over", "handed_over"),),
    )
    lines.append("")
    lines.extend(measure_planners())
    return "\n".join(lines)


if __name__ == "__main__":
    offline_aws()
    print(run())
