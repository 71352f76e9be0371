"""``run.once`` through the real jobs guard: an effect done at most once per tick, a crash
between its intent and its completion ends UNCERTAIN (not a second send), a ``check`` settles it
in-run, and a superseded run cannot journal."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ReadTimeoutError
from moto import mock_aws

from tests.effects.test_takeover import create
from vigil.clock import ManualClock
from vigil.contract.journal import Verdict
from vigil.effects import Fenced, InvalidEffect, journal
from vigil.fenced_write import RunRecordSite
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
        self.rest: list[int] = []

    def deliver(self, body: Any, holder: str = "a") -> Any:
        return self.guard.execute(self.tick, body, remaining_ms=lambda: 10_000, holder=holder)

    def send(self, run: Run) -> None:
        self.sent.append(run.fencing_token)

    def record(self) -> Any:
        return self.store.history("welcome")[0]

    def crash_after_sending(self, check: Any) -> Any:
        """Deliver a body that sends, then dies before the completion on its first attempt;
        the body, for the retry to deliver again."""

        def body(run: Run) -> None:
            with run.once("welcome-email", check=check) as first:
                if first:
                    self.send(run)
                    if run.attempt == 1:
                        raise Crash("died before the completion")

        with pytest.raises(Crash):
            self.deliver(body)
        self.clock.advance(1)
        return body


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

    body = harness.crash_after_sending(check)
    assert harness.deliver(body).outcome is Outcome.SUCCEEDED
    assert checked == [happened] and len(harness.sent) == sends
    entry = (harness.record().effects or {})["welcome-email"]
    # The entry names the run that did the effect: the first when the check says it happened
    # (the jobs soak compares it with its ledger), the retry when it did it again.
    assert (entry["state"], entry["fence"]) == ("DONE", harness.sent[-1])


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
    """A tick left UNCERTAIN on ``welcome-email``: sent, then a crash before the completion;
    what the body does after the effect is counted in ``harness.rest``."""

    def body(run: Run) -> None:
        with run.once("welcome-email") as first:
            if first:
                harness.send(run)
                if len(harness.sent) == 1:
                    raise Crash("died after sending")
        harness.rest.append(run.attempt)

    with pytest.raises(Crash):
        harness.deliver(body)
    harness.clock.advance(1)
    assert harness.deliver(body).outcome is Outcome.UNCERTAIN
    harness.body = body  # type: ignore[attr-defined]


def test_settled_done_records_the_completion_and_the_tick_succeeded(harness: Harness) -> None:
    uncertain(harness)
    settled = harness.store.settle(
        "welcome", harness.tick.key, "welcome-email", verdict=Verdict.DONE, now=harness.clock()
    )
    assert settled.status is RunStatus.SUCCEEDED and "settled" in (settled.detail or "")
    assert (settled.effects or {})["welcome-email"]["state"] == "DONE"
    assert settled.uncertain_effect is None
    assert len(harness.sent) == 1


@pytest.mark.parametrize(
    ("verdict", "entry", "sends"),
    [(Verdict.NOT_DONE, None, 2), (Verdict.DONE_RERUN, "DONE", 1)],
    ids=["not-done: a rerun sends it", "done-rerun: a rerun runs the rest, not the effect"],
)
def test_settled_for_a_rerun_the_tick_is_failed_and_the_operators_rerun_runs_it(
    harness: Harness, verdict: Verdict, entry: str | None, sends: int
) -> None:
    """Not done: the intent cleared, the rerun sends it. Done, rerun ("it happened, run the
    rest"): the journal says DONE and the tick is left FAILED, so the operator's rerun (``vigil
    jobs run --at``) runs the body again, skipping the effect, where a rerun of a tick settled
    done would be a DUPLICATE and the rest never run."""
    uncertain(harness)
    settled = harness.store.settle(
        "welcome", harness.tick.key, "welcome-email", verdict=verdict, now=harness.clock()
    )
    assert settled.status is RunStatus.FAILED and "vigil jobs run" in (settled.error_message or "")
    assert ((settled.effects or {}).get("welcome-email") or {}).get("state") == entry

    harness.clock.advance(1)
    rerun = replace(harness.tick, trigger=Trigger.AT)
    result = harness.guard.execute(
        rerun,
        harness.body,  # type: ignore[attr-defined]
        remaining_ms=lambda: 10_000,
        holder="operator",
    )

    assert result.outcome is Outcome.SUCCEEDED
    assert len(harness.sent) == sends and harness.rest == [3]


@pytest.mark.parametrize("effect", ["receipt-email", "welcome-email"])
def test_settling_what_is_not_uncertain_on_that_effect_changes_nothing(
    harness: Harness, effect: str
) -> None:
    uncertain(harness)
    if effect == "welcome-email":  # settled once already: no longer UNCERTAIN
        harness.store.settle(
            "welcome", harness.tick.key, effect, verdict=Verdict.DONE, now=harness.clock()
        )
    before = harness.record()
    with pytest.raises(NotSettleable, match="nothing changed"):
        harness.store.settle(
            "welcome", harness.tick.key, effect, verdict=Verdict.NOT_DONE, now=harness.clock()
        )
    assert harness.record() == before
    with pytest.raises(NotSettleable, match="no such record"):
        harness.store.settle(
            "welcome", "2026-01-01T00:00:00Z", effect, verdict=Verdict.DONE, now=TICK
        )


# -- adversarial review (issue 17) -------------------------------------------------------------


class LostAnswer:
    """The tick's DynamoDB client, whose first journal intent lands but whose answer is lost:
    ``"retried"`` as botocore's own retry sees it (the repeat is refused: the entry exists),
    ``"raised"`` as a timeout the caller sees."""

    def __init__(self, client: Any, how: str) -> None:
        self._client, self._how, self.lost = client, how, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def update_item(self, **request: Any) -> Any:
        intent = "INTENT" in json.dumps(request.get("ExpressionAttributeValues", {}))
        if not intent or self.lost:
            return self._client.update_item(**request)
        self.lost += 1
        self._client.update_item(**request)  # landed; its answer never arrives
        if self._how == "raised":
            raise ReadTimeoutError(endpoint_url="https://dynamodb")
        return self._client.update_item(**request)  # botocore's retry of it: refused


@pytest.mark.parametrize("how", ["retried", "raised"])
def test_an_intent_whose_answer_was_lost_is_this_runs_own_not_uncertain(
    harness: Harness, how: str
) -> None:
    """The intent's own retry sees the entry it wrote: that is this run's intent (the effect
    has not run yet), not an earlier run's effect of unknown fate."""
    lossy = LostAnswer(harness.client, how)
    lossy_harness = Harness(lossy, harness.clock)  # type: ignore[arg-type]

    def body(run: Run) -> None:
        with run.once("welcome-email") as first:
            if first:
                lossy_harness.send(run)

    assert lossy_harness.deliver(body).outcome is Outcome.SUCCEEDED
    assert lossy.lost == 1 and len(lossy_harness.sent) == 1
    assert (lossy_harness.record().effects or {})["welcome-email"]["state"] == "DONE"


@pytest.mark.parametrize("answer", [None, "yes", 1])
def test_a_check_that_answers_no_bool_is_refused_not_read_as_not_sent(
    harness: Harness, answer: Any
) -> None:
    """A ``check`` that forgot its ``return`` (None) must not send the email a second time."""

    body = harness.crash_after_sending(lambda: answer)
    with pytest.raises(InvalidEffect, match="check"):
        harness.deliver(body)
    assert len(harness.sent) == 1
    assert (harness.record().effects or {})["welcome-email"]["state"] == "INTENT"  # kept


def test_a_full_journal_refuses_a_new_effect_clearly_and_the_run_is_still_recorded(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal lives on the run's record (400 KB at most): past its cap a new effect is
    refused with a clear error, in the intent's own request, and the record stays writable."""
    monkeypatch.setattr(journal, "MAX_EFFECTS", 3)

    def body(run: Run) -> None:
        for user in range(4):
            with run.once(f"welcome:{user}") as first:
                if first:
                    harness.send(run)

    with pytest.raises(journal.JournalFull, match="3 effects"):
        harness.deliver(body)
    assert len(harness.sent) == 3
    record = harness.record()
    assert record.status is RunStatus.FAILED and len(record.effects or {}) == 3


def test_the_journals_cap_keeps_the_fullest_record_under_dynamodbs_item_limit() -> None:
    """Every entry at its largest (a 100-character name, a 20-digit fence, a full timestamp,
    the intent's mark), the cap's worth of them, with an observer's 64 KB checkpoint, fits."""
    entry = {
        "state": "INTENT",
        "fence": 10**19,
        "at": "2026-11-25T12:00:00.123456+00:00",
        "mark": "f" * journal.MARK_CHARS,
    }
    per_entry = 100 + sum(len(k) + len(str(v)) + 3 for k, v in entry.items()) + 3
    assert journal.MAX_EFFECTS * per_entry + 64 * 1024 < 300 * 1024


def test_a_dotted_name_is_one_entry_and_once_after_the_run_finished_is_refused(
    harness: Harness,
) -> None:
    """Each step of the journal's path is a placeholder, so ``a.b:c`` is one key, not a path;
    and a run kept past its finish (a warm container's global) cannot begin an effect."""
    kept: list[Run] = []

    def body(run: Run) -> None:
        kept.append(run)
        with run.once("mail.welcome:user-1") as first:
            if first:
                harness.send(run)

    assert harness.deliver(body).outcome is Outcome.SUCCEEDED
    assert list(harness.record().effects or {}) == ["mail.welcome:user-1"]
    with pytest.raises(Fenced), kept[0].once("late") as first:
        harness.sent.append(-1 if first else -2)
    assert len(harness.sent) == 1 and list(harness.record().effects or {}) == [
        "mail.welcome:user-1"
    ]


def test_the_same_effect_nested_in_its_own_block_is_a_clear_error_not_uncertain(
    harness: Harness,
) -> None:
    """The inner block finds the outer's intent: that is this run's own block still open (a
    programming error, said so), not an earlier run's effect of unknown fate for a person."""

    def body(run: Run) -> None:
        with run.once("welcome-email") as first, run.once("welcome-email") as again:
            harness.sent.append(int(first) + int(again))

    with pytest.raises(InvalidEffect, match="already open"):
        harness.deliver(body)
    assert harness.sent == [] and harness.record().status is RunStatus.FAILED


def test_a_forget_batch_of_the_longest_names_stays_inside_dynamodbs_expression_limits() -> None:
    """:data:`journal.FORGET_BATCH` entries of 100-character names in one request: each
    expression must stay under DynamoDB's 4 KB (measured: about 1.0 KB REMOVE, 2.3 KB
    condition), each name placeholder under 255 bytes."""
    sent: list[dict[str, Any]] = []

    class Client:
        def update_item(self, **request: Any) -> None:
            sent.append(request)

    site = RunRecordSite(
        client=Client(),
        table="t",
        key={"name": "o"},
        token_attribute="generation",
        token=7,
        running=None,
        label="observer o",
        time_left_s=lambda: 10.0,
        rolling=True,
    )
    names = [f"{i:03d}" + "x" * 97 for i in range(journal.FORGET_BATCH)]
    full = {
        n: {"state": "DONE", "at": f"2026-11-22T12:00:{i % 60:02d}.000Z"}
        for i, n in enumerate(names)
    }
    assert journal.Journal(site)._forget_oldest(full)
    [request] = sent
    assert len(request["UpdateExpression"]) < 4096
    assert len(request["ConditionExpression"]) < 4096
    assert max(len(v.encode()) for v in request["ExpressionAttributeNames"].values()) <= 255
    assert request["UpdateExpression"].count(",") == journal.FORGET_BATCH - 1


# -- a body that catches Exception (issue 33) ----------------------------------------------------


def looping(harness: Harness, skipped: list[str], *, crash: str | None = None) -> Any:
    """A per-item loop that logs what fails and goes on (``except Exception``): ``crash`` dies
    after sending to that user, inside the block, on the first attempt."""

    def body(run: Run) -> None:
        for user in ("ann", "bob"):
            try:
                with run.once(f"welcome:{user}") as first:
                    if first:
                        harness.send(run)
                        if user == crash and run.attempt == 1:
                            raise Crash(f"died after sending to {user}")
            except Exception as error:
                skipped.append(f"{user}: {type(error).__name__}")

    return body


def test_an_uncertain_effect_caught_by_the_body_still_ends_the_tick_uncertain(
    harness: Harness,
) -> None:
    """An earlier run began the effect and never finished it; the retry's loop catches the
    ``Uncertain`` and goes on: the tick still ends UNCERTAIN on it, counted, for a person."""

    def crash_mid_loop(run: Run) -> None:
        with run.once("welcome:ann") as first:
            if first:
                harness.send(run)
                raise Crash("died after sending to ann")

    with pytest.raises(Crash):
        harness.deliver(crash_mid_loop)
    harness.clock.advance(1)
    skipped: list[str] = []
    result = harness.deliver(looping(harness, skipped))

    assert result.outcome is Outcome.UNCERTAIN and "welcome:ann" in result.reason
    record = harness.record()
    assert (record.status, record.uncertain_effect) == (RunStatus.UNCERTAIN, "welcome:ann")
    assert skipped == ["ann: Uncertain"] and len(harness.sent) == 2  # ann once, then bob


def test_a_block_that_raised_inside_a_caught_loop_ends_the_tick_uncertain_on_it(
    harness: Harness,
) -> None:
    """The run's own block raised after its intent (the email may have left) and the loop went
    on: a tick that ended SUCCEEDED would leave that intent for nobody to settle."""
    skipped: list[str] = []
    result = harness.deliver(looping(harness, skipped, crash="ann"))

    assert result.outcome is Outcome.UNCERTAIN and "welcome:ann" in result.reason
    record = harness.record()
    assert (record.status, record.uncertain_effect) == (RunStatus.UNCERTAIN, "welcome:ann")
    entries = {name: entry["state"] for name, entry in (record.effects or {}).items()}
    assert entries == {"welcome:ann": "INTENT", "welcome:bob": "DONE"}
    assert skipped == ["ann: Crash"]


@pytest.mark.parametrize("answer", ["raises", "answers None"])
def test_a_check_that_fails_inside_a_caught_loop_ends_the_tick_uncertain_not_succeeded(
    harness: Harness, answer: str
) -> None:
    """An earlier run left the email's intent; the retry's ``check`` fails (the provider's API
    is down, or a forgotten ``return``) and the loop catches it: the intent is still unresolved,
    so the tick ends UNCERTAIN on it, not SUCCEEDED with an intent nobody settles (found in the
    review of issue 33: the tick ended SUCCEEDED)."""

    def check() -> Any:
        if answer == "raises":
            raise RuntimeError("the mail provider's API is down")
        return None

    body = harness.crash_after_sending(check)
    caught: list[str] = []

    def looping(run: Run) -> None:
        try:
            body(run)
        except Exception as error:
            caught.append(type(error).__name__)

    result = harness.deliver(looping)

    assert result.outcome is Outcome.UNCERTAIN and "welcome-email" in result.reason
    record = harness.record()
    assert (record.status, record.uncertain_effect) == (RunStatus.UNCERTAIN, "welcome-email")
    assert (record.effects or {})["welcome-email"]["state"] == "INTENT"
    assert len(harness.sent) == 1 and len(caught) == 1


def test_a_completion_that_cannot_be_recorded_inside_a_caught_loop_ends_the_tick_uncertain(
    harness: Harness,
) -> None:
    """The block finished (the email left) but its completion's write failed for good, and the
    loop caught it: the intent stays, so the tick ends UNCERTAIN on it, not SUCCEEDED."""
    from botocore.exceptions import ClientError

    def refuse_the_completion(params: dict[str, Any], **_: Any) -> None:
        if '"DONE"' in json.dumps(params.get("ExpressionAttributeValues")):
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "refused"}}, "UpdateItem"
            )

    harness.client.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem", refuse_the_completion
    )
    skipped: list[str] = []
    result = harness.deliver(looping(harness, skipped))

    assert result.outcome is Outcome.UNCERTAIN and "welcome:ann" in result.reason
    assert harness.record().uncertain_effect == "welcome:ann"
    assert skipped == ["ann: ClientError", "bob: ClientError"]
