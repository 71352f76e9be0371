"""Job fixtures: the runs table exactly as the synthesized template defines it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.jobs import GuardFactory
from vigil.clock import ManualClock
from vigil.jobs.guard import JobGuard
from vigil.jobs.model import JobSettings, Overlap
from vigil.jobs.store import RunStore
from vigil_tools.emulator.template import Synthesized, create_tables, logical_id_of


@pytest.fixture
def runs_table(dynamodb: Any, synthesized: Synthesized) -> str:
    names = create_tables(synthesized, dynamodb)
    return names[logical_id_of(synthesized, "AWS::DynamoDB::Table", "Vigil/JobRuns")]


@pytest.fixture
def store(dynamodb: Any, runs_table: str) -> RunStore:
    return RunStore(dynamodb, runs_table)


@pytest.fixture
def make_guard(dynamodb: Any, runs_table: str, clock: ManualClock) -> GuardFactory:
    def make(
        job: str = "cleanup",
        overlap: Overlap = Overlap.SKIP,
        client: Any = None,
        clock_: ManualClock | None = None,
        **settings: Any,
    ) -> JobGuard:
        resolved = JobSettings(job=job, table=runs_table, overlap=overlap, **settings)
        store = RunStore(client or dynamodb, runs_table, sleep=lambda seconds: None)
        now = clock_ or clock
        # A guard is a container: it sleeps on the test's clock, and remembers its own outcomes.
        return JobGuard(resolved, store, now, sleep=lambda seconds: now.advance(seconds))

    return make
