"""``vigil jobs`` against the deployed stack on the emulator."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from freezegun import freeze_time

from vigil_tools import jobs_cli
from vigil_tools.emulator.account import LocalAccount, local_account
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.emulator.scheduler import deployed_schedules
from vigil_tools.emulator.template import Synthesized

START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)


@pytest.fixture
def deployed(synthesized: Synthesized) -> Iterator[tuple[LocalAccount, LocalLambda]]:
    with freeze_time(START) as frozen, local_account(synthesized.outdir) as account:
        runtime = LocalLambda(account.session, now=lambda: datetime.now(UTC), advance=frozen.tick)
        cleanup = next(s for s in deployed_schedules(account.session) if "Cleanup" in s.name)
        for minutes in (0, 5):
            frozen.move_to(START + timedelta(minutes=minutes, seconds=1))
            event = json.loads(cleanup.render_input(START + timedelta(minutes=minutes)))
            runtime.invoke_async(cleanup.target_arn, event)
        runtime.invoke_async(cleanup.target_arn, {"garbage": True})
        yield account, runtime


def vigil_jobs(account: LocalAccount, runtime: LocalLambda | None, *argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    jobs_cli.add_parser(parser.add_subparsers(dest="group"))
    args = parser.parse_args(["jobs", *argv])
    out = io.StringIO()
    invoke = runtime.invoke_async if runtime else None
    return jobs_cli.run(args, account.session, out, invoke=invoke), out.getvalue()


def test_list_shows_every_job_and_its_latest_state(deployed: Any) -> None:
    code, out = vigil_jobs(deployed[0], None, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["JOB", "LAST", "TICK", "LAST", "STATUS", "LEASE", "PAUSED"]
    assert any(line.startswith("cleanup") and "2026-11-23T06:05:00Z" in line for line in lines)
    assert any(line.startswith("daily-report") for line in lines)


def test_history_is_newest_first(deployed: Any) -> None:
    code, out = vigil_jobs(deployed[0], None, "history", "cleanup")
    assert code == 0
    ticks = [line.split()[0] for line in out.splitlines()[1:]]
    assert ticks == ["2026-11-23T06:05:00Z", "2026-11-23T06:00:00Z"]


def test_redrive_hands_dead_letters_back_and_empties_the_queue(deployed: Any) -> None:
    account, runtime = deployed
    code, out = vigil_jobs(account, runtime, "redrive", "cleanup")
    assert code == 0
    assert "redrove 1 event(s) of cleanup" in out


def test_an_unknown_job_is_a_clear_error(deployed: Any) -> None:
    with pytest.raises(jobs_cli.JobsError, match=r"no job 'nope'.*cleanup, daily-report"):
        vigil_jobs(deployed[0], None, "history", "nope")


def test_a_stack_that_is_not_deployed_is_a_clear_error(deployed: Any) -> None:
    with pytest.raises(jobs_cli.JobsError, match="stack 'Other' not found"):
        vigil_jobs(deployed[0], None, "--stack", "Other", "list")


def test_settling_a_tick_that_is_not_uncertain_is_a_clear_error(deployed: Any) -> None:
    args = ("settle", "cleanup", "2026-11-23T06:00:00Z", "--effect", "welcome-email", "--done")
    with pytest.raises(jobs_cli.JobsError, match=r"is SUCCEEDED, not UNCERTAIN.*nothing changed"):
        vigil_jobs(deployed[0], None, *args)
    _, out = vigil_jobs(deployed[0], None, "history", "cleanup")
    assert "SUCCEEDED" in out.splitlines()[-1]
