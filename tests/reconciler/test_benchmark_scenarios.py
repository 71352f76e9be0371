"""The benchmark's scenarios still describe what the reconciler does (numbers are for make bench)."""

from __future__ import annotations

import pytest

from benchmarks.reconciler_scale import measure_restart_latency

pytestmark = pytest.mark.slow  # the benchmarks' fleets (MotoFleet: tables from the synth)


def test_every_crash_in_the_latency_scenario_leads_to_a_run_task_call() -> None:
    latencies = measure_restart_latency(samples=3)
    assert len(latencies) == 3
    assert all(latency > 0 for latency in latencies)


def test_the_rollout_scenario_rolls_within_budget_and_costs_nothing_when_idle() -> None:
    from benchmarks.rollout_scale import measure_dedicated, measure_planners

    plain, idle, first, in_flight = measure_dedicated(size=30)
    assert idle["calls"] == plain["calls"] and idle["handed_over"] == 0
    assert first["handed_over"] == 3 and first["calls"]["StopTask"] == 3
    assert in_flight["handed_over"] == 0 and "StopTask" not in in_flight["calls"]
    assert len(measure_planners()) == 2
