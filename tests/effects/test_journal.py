"""``run.once`` through the real jobs guard: an effect done at most once per tick, a crash
between its intent and its completion ends UNCERTAIN (not a second send), a ``check`` settles it
in-run, and a superseded run cannot journal."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.effects.test_takeover import create
from vigil.clock import ManualClock
from vigil.effects import InvalidEffect
from vigil.jobs.events import Tick, Trigger
from vigil.jobs.guard import JobGuard, Run
from vigil.jobs.model import JobSettings, Outcome, RunStatus
from vigil.jobs.store import RunStore
from vigil.settle import NotSettleable

TICK = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class Crash(Exception):
    """The process dying between the effect and its completion, as far as the record knows."""


class Harness:
    def __init__(self, client: Any, clock: ManualClock) -> None:
        self.client = client
        self.clock = clock
        self.store = RunStore(client, "runs", sleep=lambda s: None)
        settings = JobSettings(job="welcome", table="runs", lease_margin=timedelta(seconds=5))
        self.guard = JobGuard(settings, self.store, clock, sleep=lambda s: None)
        self.tick = Tick(job="welcome", scheduled_at=TICK, source="scheduler")
        self.sent: list[int] = []

    def deliver(self, body: Any, holder: str = "a") -> Any:
        return self.guard.execute(self.tick, body, remaining_ms=lambda: 10_000, holder=holder)

    def send(self, run: Run) -> None:
        self.sent.append(run.fencing_token)

    def record(self) -> Any:
        return self.store.history("welcome")[0]


@pytest.fixture
def harness() -> Any:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create(client, "runs", "pk", "sk")
        yield Harness(client, ManualClock(TICK))


def test_an_effect_runs_once_and_is_journalled_done(harness: Harness) -> None:
    def body(run: Run) -> None:
        with run.once("welcome-email") as first:
            if first:
                harness.send(run)

    assert harness.deliver(body).outcome is Outcome.SUCCEEDED
    assert len(harness.sent) == 1
    entry = (harness.record().effects or {})["welcome-email"]
    assert entry["state"] == "DONE" and entry["fence"] == harness.sent[0]


def test_a_crash_between_intent_and_completion_ends_uncertain_not_a_second_send(
    harness: Harness,
) -> None:
    def body(run: Run) -> None:
        with run.once("welcome-email") as first:
            if first:
                harness.send(run)
                if len(harness.sent) == 1:
                    raise Crash("died after sending, before the completion was written")

    with pytest.raises(Crash):
        harness.deliver(body)  # FAILED: Lambda retries the delivery
    harness.clock.advance(1)
    retried = harness.deliver(body)

    assert retried.outcome is Outcome.UNCERTAIN
    assert "welcome-email" in retried.reason
    assert len(harness.sent) == 1  # not a second email
    record = harness.record()
    assert record.status is RunStatus.UNCERTAIN
    assert record.uncertain_effect == "welcome-email"
    # Final: a later delivery neither runs it nor retries it.
    harness.clock.advance(1)
    assert harness.deliver(body, holder="c").outcome is Outcome.DUPLICATE
    assert len(harness.sent) == 1


def test_a_completed_effect_is_skipped_by_the_retry_of_a_failed_run(harness: Harness) -> None:
    def body(run: Run) -> None:
        with run.once("welcome-email") as first:
            if first:
                harness.send(run)
        if run.attempt == 1:
            raise Crash("failed after the effect was recorded done")

    with pytest.raises(Crash):
        harness.deliver(body)
    harness.clock.advance(1)
    assert harness.deliver(body).outcome is Outcome.SUCCEEDED
    assert len(harness.sent) == 1


@pytest.mark.parametrize(("happened", "sends"), [(True, 1), (False, 2)])
def test_a_check_settles_an_unfinished_effect_in_the_run(
    harness: Harness, happened: bool, sends: int
) -> None:
    checked: list[bool] = []

    def check() -> bool:
        checked.append(happened)
        return happened

    def body(run: Run) -> None:
        with run.once("welcome-email", check=check) as first:
            if first:
                harness.send(run)
                if run.attempt == 1:
                    raise Crash("died before the completion")

    with pytest.raises(Crash):
        harness.deliver(body)
    harness.clock.advance(1)
    assert harness.deliver(body).outcome is Outcome.SUCCEEDED
    assert checked == [happened] and len(harness.sent) == sends
    assert (harness.record().effects or {})["welcome-email"]["state"] == "DONE"


def test_a_superseded_run_cannot_journal_an_intent(harness: Harness) -> None:
    def successor(run: Run) -> None:
        with run.once("welcome-email") as first:
            if first:
                harness.send(run)

    def zombie(run: Run) -> None:
        harness.clock.advance(120)  # frozen past its lease; the tick is taken over meanwhile
        assert harness.deliver(successor, holder="b").outcome is Outcome.SUCCEEDED
        with run.once("welcome-email") as first:
            if first:
                harness.send(run)

    assert harness.deliver(zombie).outcome is Outcome.FENCED
    assert len(harness.sent) == 1


@pytest.mark.parametrize("name", ["", "has space", "-leading", "x" * 101, "a/b"])
def test_a_bad_effect_name_is_refused_before_any_request(harness: Harness, name: str) -> None:
    seen: list[BaseException] = []

    def body(run: Run) -> None:
        requests: list[str] = []
        harness.client.meta.events.register(
            "before-call.dynamodb.*", lambda model, **_: requests.append(model.name)
        )
        try:
            with run.once(name):
                pass
        except InvalidEffect as error:
            seen.append(error)
        assert requests == []

    assert harness.deliver(body).outcome is Outcome.SUCCEEDED
    assert seen and "effect name" in str(seen[0])


def uncertain(harness: Harness) -> None:
    """A tick left UNCERTAIN on ``welcome-email``: sent, then a crash before the completion."""

    def body(run: Run) -> None:
        with run.once("welcome-email") as first:
            if first:
                harness.send(run)
                if len(harness.sent) == 1:
                    raise Crash("died after sending")

    with pytest.raises(Crash):
        harness.deliver(body)
    harness.clock.advance(1)
    assert harness.deliver(body).outcome is Outcome.UNCERTAIN
    harness.body = body  # type: ignore[attr-defined]


def test_settled_done_records_the_completion_and_the_tick_succeeded(harness: Harness) -> None:
    uncertain(harness)
    settled = harness.store.settle(
        "welcome", harness.tick.key, "welcome-email", done=True, now=harness.clock()
    )
    assert settled.status is RunStatus.SUCCEEDED and "settled" in (settled.detail or "")
    assert (settled.effects or {})["welcome-email"]["state"] == "DONE"
    assert settled.uncertain_effect is None
    assert len(harness.sent) == 1


def test_settled_not_done_clears_the_intent_and_a_rerun_sends_it(harness: Harness) -> None:
    uncertain(harness)
    settled = harness.store.settle(
        "welcome", harness.tick.key, "welcome-email", done=False, now=harness.clock()
    )
    assert settled.status is RunStatus.FAILED
    assert "welcome-email" not in (settled.effects or {})
    harness.clock.advance(1)
    rerun = replace(harness.tick, trigger=Trigger.AT)
    result = harness.guard.execute(
        rerun,
        harness.body,  # type: ignore[attr-defined]
        remaining_ms=lambda: 10_000,
        holder="operator",
    )
    assert result.outcome is Outcome.SUCCEEDED
    assert len(harness.sent) == 2


@pytest.mark.parametrize("effect", ["receipt-email", "welcome-email"])
def test_settling_what_is_not_uncertain_on_that_effect_changes_nothing(
    harness: Harness, effect: str
) -> None:
    uncertain(harness)
    if effect == "welcome-email":  # settled once already: no longer UNCERTAIN
        harness.store.settle("welcome", harness.tick.key, effect, done=True, now=harness.clock())
    before = harness.record()
    with pytest.raises(NotSettleable, match="nothing changed"):
        harness.store.settle("welcome", harness.tick.key, effect, done=False, now=harness.clock())
    assert harness.record() == before
    with pytest.raises(NotSettleable, match="no such record"):
        harness.store.settle("welcome", "2026-01-01T00:00:00Z", effect, done=True, now=TICK)
