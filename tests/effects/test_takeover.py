"""The issue's scenario through the real jobs guard: a run frozen past its lease is taken over;
the successor's write lands, the zombie's late write is refused (``Fenced``), the item keeps the
successor's value."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.helpers.tables import create_table as create
from vigil.clock import ManualClock
from vigil.contract.effects import WRITES_ENV
from vigil.effects import Fenced
from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard, Run
from vigil.jobs.model import JobSettings, Outcome, RunStatus
from vigil.jobs.store import RunStore

TICK = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


@contextmanager
def cleanup_job(
    monkeypatch: pytest.MonkeyPatch, clock: ManualClock
) -> Iterator[tuple[Any, RunStore, JobGuard]]:
    """On moto: the runs table, the job's ``Sessions`` table granted, and the job's guard."""
    monkeypatch.setenv(WRITES_ENV, json.dumps({"tables": {"Sessions": "sessions"}}))
    with mock_aws():
        client = boto3.client("dynamodb")
        create(client, "runs", "pk", "sk")
        create(client, "sessions", "id")
        settings = JobSettings(job="cleanup", table="runs", lease_margin=timedelta(seconds=5))
        store = RunStore(client, "runs")
        yield client, store, JobGuard(settings, store, clock)


def test_a_zombies_late_write_is_refused_after_its_successors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = ManualClock(TICK)
    with cleanup_job(monkeypatch, clock) as (client, _, guard):
        tick = Tick(job="cleanup", scheduled_at=TICK, source="scheduler")
        refused: list[Fenced] = []

        def write(run: Run, value: str) -> None:
            run.fenced.table("Sessions").put_item(
                Item={"id": {"S": "s-1"}, "written_by": {"S": value}}
            )

        def successor(run: Run) -> None:
            write(run, "successor")

        def zombie(run: Run) -> None:
            clock.advance(120)  # frozen well past its lease; the tick is taken over meanwhile
            taken = guard.execute(tick, successor, remaining_ms=lambda: 60_000, holder="b")
            assert taken.outcome is Outcome.SUCCEEDED
            try:
                write(run, "zombie")
            except Fenced as error:
                refused.append(error)
                raise

        late = guard.execute(tick, zombie, remaining_ms=lambda: 10_000, holder="a")

        assert late.outcome is Outcome.FENCED  # not FAILED: not retried, not alarmed

        item = client.get_item(TableName="sessions", Key={"id": {"S": "s-1"}})["Item"]
        assert item["written_by"] == {"S": "successor"}
        assert refused[0].newer is not None and refused[0].newer > refused[0].token


@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "caught-by-the-body"])
def test_a_hung_runs_write_refused_after_a_later_ticks_ends_its_own_tick_fenced_not_failed(
    monkeypatch: pytest.MonkeyPatch, swallowed: bool
) -> None:
    """No run took the hung run's own tick over, so its record is its own to finish: FENCED
    (superseded: a retry would claim a newer token still and write over its successor), not
    FAILED, raised, retried and dead-lettered. Nor SUCCEEDED when a "best effort" body catches
    the ``Fenced`` and returns: nothing else would say it was superseded."""
    clock = ManualClock(TICK)
    with cleanup_job(monkeypatch, clock) as (client, store, guard):
        first = Tick(job="cleanup", scheduled_at=TICK, source="scheduler")
        later = Tick(job="cleanup", scheduled_at=TICK + timedelta(minutes=5), source="scheduler")

        def write(run: Run) -> None:
            run.fenced.table("Sessions").put_item(
                Item={"id": {"S": "summary"}, "tick": {"S": run.tick}}
            )

        def hung(run: Run) -> None:
            clock.advance(360)  # frozen past its lease; the next tick runs meanwhile
            done = guard.execute(later, write, remaining_ms=lambda: 60_000, holder="b")
            assert done.outcome is Outcome.SUCCEEDED
            if not swallowed:
                write(run)
            with contextlib.suppress(Exception):  # "logged and ignored": the body returns
                write(run)

        late = guard.execute(first, hung, remaining_ms=lambda: 10_000, holder="a")

        assert late.outcome is Outcome.FENCED and "superseded" in late.reason
        newer, own = store.history("cleanup")
        assert (newer.status, own.status, own.error_type) == (
            RunStatus.SUCCEEDED,
            RunStatus.FENCED,
            "Fenced",
        )
        item = client.get_item(TableName="sessions", Key={"id": {"S": "summary"}})["Item"]
        assert item["tick"] == {"S": newer.tick}
