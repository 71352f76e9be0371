"""``make demo`` end to end: the synthesized stack on the emulator, under duplicates and faults."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.integration.demo.conftest import DemoRun


@pytest.fixture(scope="module")
def facts(demo_run: DemoRun) -> dict[str, Any]:
    return demo_run.facts  # the package's one run of the whole demo (conftest.py)


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
    assert facts["queues"]["JobsUndelivered"] == 0


def test_job_control_act_pauses_runs_now_catches_a_never_delivered_tick_and_backfills(
    facts: dict[str, Any],
) -> None:
    control = facts["control"]
    assert control["paused"] == "PAUSED"
    assert "SUCCEEDED" in control["run_now"]
    assert control["never_delivered"][0] == "cleanup 2026-11-23T07:05:00Z"
    assert "backfill of cleanup: 5/5 succeeded" in control["backfill"]


def test_tasks_act_runs_each_key_once_dead_letters_poison_and_survives_a_timeout_mid_batch(
    facts: dict[str, Any],
) -> None:
    """The tasks section's figures, read back from the records and the functions' logs (it
    adds a few seconds to the demo this package already runs once)."""
    tasks = facts["tasks"]
    assert tasks["once"]["ids"] == ["o-1"] * 3
    assert (tasks["once"]["status"], tasks["once"]["attempts"]) == ("SUCCEEDED", 1)
    # the second and third enqueue read the key's record and send nothing (one key, one request)
    assert tasks["once"]["deliveries"] == ["SUCCEEDED"]
    # InvalidOrder is in send-receipt's no_retry_on: FAILED at its first attempt, not retried
    assert (tasks["poison"]["status"], tasks["poison"]["attempts"]) == ("FAILED", 1)
    reasons = [reason for _, reason in tasks["poison"]["dead_letters"]]
    assert any(r.startswith("malformed: the body is not JSON") for r in reasons)
    assert any("InvalidOrder" in r for r in reasons)
    assert tasks["redrive"]["first"].startswith("redrove 1 task(s)")
    assert tasks["redrive"]["again"].startswith("redrove 0 task(s)")
    assert tasks["redrive"]["dead_letters"] == 2  # the poison once more, and the malformed one
    assert tasks["delayed"] == {"before": "QUEUED", "after": "SUCCEEDED"}
    assert tasks["ordered"] == ["create", "resize", "delete"]
    timeout = tasks["timeout"]
    assert (timeout["stalled"], timeout["timed_out"]) == (1, 1)
    assert timeout["first"] == [
        ("o-11", "SUCCEEDED"),
        ("o-12", "SUCCEEDED"),
        ("o-13", "DEFERRED"),
        ("o-14", "DEFERRED"),
    ]
    assert sorted(timeout["second"]) == [
        ("o-11", "DUPLICATE"),
        ("o-12", "DUPLICATE"),
        ("o-13", "SUCCEEDED"),
        ("o-14", "SUCCEEDED"),
    ]
    assert set(timeout["records"].values()) == {("SUCCEEDED", 1)}


def test_tasks_summary_counts_come_from_the_records(facts: dict[str, Any]) -> None:
    summary = facts["tasks"]["summary"]
    receipts = summary["send-receipt"]
    assert receipts["statuses"] == {"SUCCEEDED": 6, "FAILED": 1}
    # o-11 and o-12 again (their batch timed out); o-1's second and third enqueue read its
    # record and sent nothing (one key, one request)
    assert receipts["deliveries"]["DUPLICATE"] == 2
    assert receipts["deliveries"]["SUCCEEDED"] == 6  # once per succeeded key
    assert receipts["succeeded_twice"] == 0
    assert receipts["dead_letters"] == 2
    assert summary["provision-tenant"] == {
        "statuses": {"SUCCEEDED": 3},
        "deliveries": {"SUCCEEDED": 3},
        "dead_letters": 0,
        "succeeded_twice": 0,
    }


def test_effects_act_refuses_the_hung_runs_late_write_and_sends_one_email(
    facts: dict[str, Any],
) -> None:
    """The effects section's lines: the successor's summary is kept, the late write refused;
    the killed run's retry ends UNCERTAIN with one email sent, then settled."""
    fenced = facts["effects"]["fenced"]
    assert (fenced["successor"], fenced["late"]) == ("SUCCEEDED", "FENCED")
    assert fenced["summary_tick"] == fenced["successor_tick"]
    uncertain = facts["effects"]["uncertain"]
    assert uncertain["outcomes"] == ["FunctionKilled", "UNCERTAIN"]
    assert uncertain["emails"] == 1
    assert "UNCERTAIN" in uncertain["history"] and "report-email" in uncertain["history"]
    assert "SUCCEEDED: settled: effect 'report-email' done" in uncertain["settled"]


def test_flows_act_resumes_after_a_crash_sleeps_without_compute_wakes_on_a_signal_compensates(
    facts: dict[str, Any],
) -> None:
    """The flows section, read back from onboard-tenant's records, timelines and logs (a few
    seconds more of the demo this package runs once)."""
    flows = facts["flows"]
    crash = flows["crash"]
    assert crash["killed"] and (crash["status"], crash["attempts"]) == ("SLEEPING", 2)
    assert crash["accounts_created"] == 1  # the finished step was not rerun
    assert crash["step_attempts"] == {
        "create-account": 1,
        "provision-workspace": 1,
        "activate": 1,
        "welcome-email": 1,
    }
    assert flows["sleep"]["before"] == ("SLEEPING", 0)  # three days, no invocation
    assert flows["sleep"]["after"] == ("WAITING", 1)  # one invocation wakes it
    assert flows["sleep"]["outcomes"] == {"ran": 1}
    assert flows["signal"]["woke"] and flows["signal"]["status"] == "SUCCEEDED"
    assert flows["signal"]["result"]["verified"] is True
    assert flows["compensation"] == {
        "status": "COMPENSATED",
        "steps": ["create-account", "provision-workspace"],
        "compensated": ["provision-workspace", "create-account"],
        "reverse": True,
    }
    assert flows["summary"] == {"SUCCEEDED": 1, "COMPENSATED": 1}
