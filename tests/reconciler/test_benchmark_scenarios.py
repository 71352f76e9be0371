"""The benchmark's scenarios still describe what the reconciler does (numbers are for make bench)."""

from __future__ import annotations

from benchmarks.reconciler_scale import measure_restart_latency


def test_every_crash_in_the_latency_scenario_leads_to_a_run_task_call() -> None:
    latencies = measure_restart_latency(samples=3)
    assert len(latencies) == 3
    assert all(latency > 0 for latency in latencies)
