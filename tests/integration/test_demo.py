"""``make demo`` end to end: the synthesized stack on the emulator, under duplicates and faults."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from vigil_tools import demo


@pytest.fixture(scope="module")
def facts() -> dict[str, Any]:
    return demo.simulate()


def test_every_tick_ran_exactly_once_or_is_visibly_missed(facts: dict[str, Any]) -> None:
    cleanup = facts["jobs"]["cleanup"]
    assert len(cleanup) == 9
    statuses = Counter(status for _, status, _ in cleanup)
    assert statuses == {"SUCCEEDED": 8, "MISSED": 1}
    assert all(attempts <= 1 for _, _, attempts in cleanup)


def test_duplicates_were_suppressed_and_bodies_ran_once_per_tick(facts: dict[str, Any]) -> None:
    outcomes = facts["outcomes"]
    ran_ticks = sum(
        1 for job in facts["jobs"].values() for _, status, _ in job if status == "SUCCEEDED"
    )
    assert outcomes["SUCCEEDED"] == ran_ticks
    assert outcomes["DUPLICATE"] >= 2 * 9


def test_the_throttled_report_ran_once_from_the_redrive(facts: dict[str, Any]) -> None:
    assert facts["jobs"]["daily-report"] == [("2026-11-23T06:30:00Z", "SUCCEEDED", 1)]
    assert facts["queues"]["DailyReportFailedRuns"] == 0


def test_the_poison_event_stays_dead_lettered(facts: dict[str, Any]) -> None:
    assert facts["queues"]["CleanupFailedRuns"] >= 1
    assert facts["queues"]["CleanupUndelivered"] == 0


def test_job_control_act_pauses_runs_now_catches_a_never_delivered_tick_and_backfills(
    facts: dict[str, Any],
) -> None:
    control = facts["control"]
    assert control["paused"] == "PAUSED"
    assert "SUCCEEDED" in control["run_now"]
    assert control["never_delivered"][0] == "cleanup 2026-11-23T07:05:00Z"
    assert "backfill of cleanup: 5/5 succeeded" in control["backfill"]
