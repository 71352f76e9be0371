"""``vigil jobs`` against the deployed stack on the emulator."""

from __future__ import annotations

import argparse
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vigil_tools import jobs_cli
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.emulator.queues import peek
from vigil_tools.emulator.scheduler import deployed_schedules
from vigil_tools.testing import VigilStack

START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)


@pytest.fixture
def deployed(vigil_stack: VigilStack) -> tuple[LocalAccount, LocalLambda]:
    """Two ticks of cleanup run and one malformed event dead-lettered, on the session's one
    deployment (``vigil_stack``: deployed once, emptied per test, ~0.5 s instead of ~6 s)."""
    account, runtime = vigil_stack.account, vigil_stack.runtime
    cleanup = next(s for s in deployed_schedules(account.session) if "Cleanup" in s.name)
    for minutes in (0, 5):
        vigil_stack.fire("cleanup", at=START + timedelta(minutes=minutes))
    runtime.invoke_async(cleanup.target_arn, {"garbage": True})
    return account, runtime


def vigil_jobs(account: LocalAccount, runtime: LocalLambda | None, *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    jobs_cli.add_parser(parser.add_subparsers(dest="group"))
    args = parser.parse_args(["jobs", *argv])
    out = io.StringIO()
    invoke = runtime.invoke_async if runtime else None
    call = runtime.invoke if runtime else None
    return jobs_cli.run(args, account.session, out, invoke=invoke, call=call), out.getvalue()


def test_list_shows_every_job_and_its_latest_state(deployed: Any) -> None:
    code, out = vigil_jobs(deployed[0], None, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["JOB", "STATE", "LAST", "TICK", "LEASE", "PAUSED"]
    assert any(line.startswith("cleanup") and "2026-11-23T06:05:00Z" in line for line in lines)
    assert any(line.startswith("daily-report") for line in lines)
    assert lines[-1] == "2 of 2 matching"


def listed(account: LocalAccount, now: datetime, *argv: str, as_json: bool = False) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    jobs_cli.add_parser(parser.add_subparsers(dest="group"))
    out = io.StringIO()
    args = parser.parse_args([*(["--json"] if as_json else []), "jobs", "list", *argv])
    assert jobs_cli.run(args, account.session, out, clock=lambda: now) == 0
    return out.getvalue()


def test_list_puts_a_late_job_first_filters_and_pages(deployed: Any) -> None:
    """cleanup's last tick is 06:05: at 06:20 its 06:10 tick is past its 2 minutes of lateness.
    (~0.1 s after ``deployed``.)"""
    account = deployed[0]
    late = START + timedelta(minutes=20)
    rows = listed(account, late, "--limit", "1").splitlines()
    assert rows[1].split()[:2] == ["cleanup", "LATE"]
    more = rows[-1]
    assert more.startswith("1 of 2 matching; more: vigil jobs list --limit=1 --next ")
    token = more.rsplit(" ", 1)[-1]
    rest = listed(account, late, "--limit", "1", "--next", token).splitlines()
    assert rest[1].split()[:2] == ["daily-report", "NEVER"] and rest[-1] == "1 of 1 matching"
    early = listed(account, START + timedelta(minutes=6), "--status", "late", as_json=True)
    assert json.loads(early) == {"jobs": [], "next": None, "matching": 0}
    never = json.loads(
        listed(account, late, "--status", "never,late", "--prefix", "d", as_json=True)
    )
    assert [(j["job"], j["state"]) for j in never["jobs"]] == [("daily-report", "NEVER")]
    with pytest.raises(jobs_cli.JobsError, match="jobs list: --next: not a page token"):
        listed(account, late, "--next", "nonsense")


def test_history_is_newest_first(deployed: Any) -> None:
    code, out = vigil_jobs(deployed[0], None, "history", "cleanup")
    assert code == 0
    ticks = [line.split()[0] for line in out.splitlines()[1:]]
    assert ticks == ["2026-11-23T06:05:00Z", "2026-11-23T06:00:00Z"]


def test_redrive_hands_dead_letters_back_and_empties_the_queue(deployed: Any) -> None:
    account, runtime = deployed
    code, out = vigil_jobs(account, runtime, "redrive", "daily-report")
    assert code == 0
    assert "redrove 0 event(s) of daily-report" in out
    code, out = vigil_jobs(account, runtime, "redrive", "cleanup")
    assert code == 0
    assert "redrove 1 event(s) of cleanup" in out


def test_a_skip_jobs_redrive_goes_one_tick_at_a_time_and_keeps_what_fails_again(
    deployed: Any,
) -> None:
    """Handed back all at once, a skip job's dead-lettered ticks met each other's leases and went
    back to the queue together (the chaos soak's lost ticks). One at a time, oldest first, each
    answered before the next; the malformed one fails again and stays, visible, with its error."""
    account, runtime = deployed
    cleanup = next(s for s in deployed_schedules(account.session) if "Cleanup" in s.name)
    for minutes in (15, 10):  # dead letters of two ticks, the newer first
        event = json.loads(cleanup.render_input(START + timedelta(minutes=minutes)))
        _dead_letter(account, "cleanup", event)
    started: list[str] = []

    def call(function: str, event: Any) -> Any:
        started.append(event["requestPayload"].get("vigil", {}).get("scheduled_time", "none"))
        answer = runtime.invoke(function, event)
        started.append("answered")
        return answer

    code, out = vigil_jobs_calling(account, runtime, call, "redrive", "cleanup")

    assert code == 0
    assert started == [  # oldest first, each answered before the next, the malformed one last
        *("2026-11-23T06:10:00Z", "answered", "2026-11-23T06:15:00Z", "answered"),
        *("none", "answered"),
    ]
    assert "3 event(s) of cleanup" in out and "one at a time, oldest tick first" in out
    assert "2 ran, 1 failed again and stay in the dead-letter queue" in out
    assert "MalformedEvent" in out
    _, history = vigil_jobs(account, None, "history", "cleanup")
    assert [line.split()[:2] for line in history.splitlines()[1:3]] == [
        ["2026-11-23T06:15:00Z", "SUCCEEDED"],
        ["2026-11-23T06:10:00Z", "SUCCEEDED"],
    ]
    queue = jobs_cli.JobsCatalog.from_stack(account.session, account.deployed.stack_name).job(
        "cleanup"
    )["failed_runs"]
    kept = peek(account.session, queue)  # (visible again at once: moto shows it once time moves)
    assert [json.loads(m["Body"])["requestPayload"] for m in kept] == [{"garbage": True}]


def vigil_jobs_calling(
    account: LocalAccount, runtime: LocalLambda, call: Any, *argv: str
) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    jobs_cli.add_parser(parser.add_subparsers(dest="group"))
    out = io.StringIO()
    args = parser.parse_args(["jobs", *argv])
    code = jobs_cli.run(args, account.session, out, invoke=runtime.invoke_async, call=call)
    return code, out.getvalue()


def _dead_letter(account: LocalAccount, job: str, event: Any) -> None:
    """What Lambda's on-failure destination receives for ``event`` (the shape the redrive reads)."""
    queue = jobs_cli.JobsCatalog.from_stack(account.session, account.deployed.stack_name).job(job)[
        "failed_runs"
    ]
    record = {
        "version": "1.0",
        "requestContext": {"requestId": "r-1", "condition": "RetriesExhausted"},
        "requestPayload": event,
        "responseContext": {"statusCode": 200, "functionError": "Unhandled"},
        "responsePayload": {"errorType": "RuntimeError", "errorMessage": "it failed then"},
    }
    account.session.client("sqs").send_message(QueueUrl=queue, MessageBody=json.dumps(record))


def test_an_unknown_job_is_a_clear_error(vigil_stack: VigilStack) -> None:
    """(The deployed stack's catalog, no run in it: ``deployed``'s ticks would only cost time.)"""
    with pytest.raises(jobs_cli.JobsError, match=r"no job 'nope'.*cleanup, daily-report"):
        vigil_jobs(vigil_stack.account, None, "history", "nope")


def test_a_stack_that_is_not_deployed_is_a_clear_error(vigil_stack: VigilStack) -> None:
    with pytest.raises(jobs_cli.JobsError, match="stack 'Other' not found"):
        vigil_jobs(vigil_stack.account, None, "--stack", "Other", "list")


def test_settling_a_tick_that_is_not_uncertain_is_a_clear_error(deployed: Any) -> None:
    args = ("settle", "cleanup", "2026-11-23T06:00:00Z", "--effect", "welcome-email", "--done")
    with pytest.raises(jobs_cli.JobsError, match=r"is SUCCEEDED, not UNCERTAIN.*nothing changed"):
        vigil_jobs(deployed[0], None, *args)
    _, out = vigil_jobs(deployed[0], None, "history", "cleanup")
    assert "SUCCEEDED" in out.splitlines()[-1]
