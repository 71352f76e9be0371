"""The guarantees of the jobs guard, each on moto with an injected clock."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers.jobs import (
    Body,
    ConflictsFirst,
    CrashAfterClaim,
    GuardFactory,
    deliver,
    tick_at,
)
from vigil.clock import ManualClock
from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard, Result, TickBusy, TickTooLate
from vigil.jobs.model import Outcome, Overlap, RunStatus
from vigil.jobs.store import RunStore

TICK = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def guard_deliver(guard: JobGuard, *, holder: str, body: Body | None = None) -> Result:
    return guard.execute(tick_at(TICK), body or Body(), remaining_ms=lambda: 60_000, holder=holder)


class TestOncePerTick:
    def test_given_a_new_tick_when_delivered_then_the_body_runs_and_succeeds(
        self, make_guard: GuardFactory, store: RunStore
    ) -> None:
        body = Body()
        result = deliver(make_guard(), tick_at(TICK), body)
        assert result.outcome is Outcome.SUCCEEDED
        assert len(body.calls) == 1
        run = body.calls[0]
        assert (run.job, run.scheduled_at, run.attempt) == ("cleanup", TICK, 1)
        [record] = store.history("cleanup")
        assert record.status is RunStatus.SUCCEEDED
        assert record.fencing_token == run.fencing_token
        assert record.attempts == 1

    def test_given_a_succeeded_tick_when_delivered_again_then_it_is_a_suppressed_duplicate(
        self, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        guard, body = make_guard(), Body()
        deliver(guard, tick_at(TICK), body)
        clock.advance(30)
        result = deliver(guard, tick_at(TICK), body)
        assert result.outcome is Outcome.DUPLICATE
        assert "SUCCEEDED" in result.reason
        assert len(body.calls) == 1

    def test_given_a_running_tick_when_a_copy_arrives_then_it_does_not_run_again(
        self, make_guard: GuardFactory
    ) -> None:
        guard = make_guard()
        seen: list[Outcome] = []
        inner = Body()
        outer = Body(during=lambda run: seen.append(deliver(guard, tick_at(TICK), inner).outcome))
        assert deliver(guard, tick_at(TICK), outer).outcome is Outcome.SUCCEEDED
        assert seen == [Outcome.DUPLICATE]
        assert inner.calls == []

    @pytest.mark.parametrize("overlap", list(Overlap))
    def test_given_8_concurrent_deliveries_of_many_ticks_then_each_tick_runs_exactly_once(
        self, make_guard: GuardFactory, dynamodb: Any, serialized: Any, overlap: Overlap
    ) -> None:
        client = serialized(dynamodb)
        clock = ManualClock(TICK + timedelta(minutes=25))
        guard = make_guard(overlap=overlap, client=client, clock_=clock)
        ticks = [TICK + timedelta(minutes=i) for i in range(25)]
        runs: list[tuple[datetime, int]] = []
        lock = threading.Lock()

        def body(run: Any) -> None:
            with lock:
                runs.append((run.scheduled_at, run.fencing_token))

        outcomes: list[Outcome] = []
        errors: list[BaseException] = []

        def worker(moment: datetime, delivery: int) -> None:
            try:
                result = guard.execute(
                    tick_at(moment),
                    body,
                    remaining_ms=lambda: 60_000,
                    holder=f"invocation-{moment:%H%M}-{delivery}",  # each copy its own invocation
                )
                with lock:
                    outcomes.append(result.outcome)
            except BaseException as error:
                errors.append(error)

        for moment in ticks:
            clock.set(moment + timedelta(seconds=2))
            threads = [threading.Thread(target=worker, args=(moment, i)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert errors == []
        assert sorted(t for t, _ in runs) == ticks
        assert outcomes.count(Outcome.SUCCEEDED) == len(ticks)
        assert outcomes.count(Outcome.DUPLICATE) == 7 * len(ticks)
        tokens = [token for _, token in runs]
        assert len(set(tokens)) == len(tokens)


class TestLeaseAndTakeover:
    def test_given_a_holder_that_crashed_when_its_lease_expires_then_a_redelivery_takes_over(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock, dynamodb: Any
    ) -> None:
        guard = make_guard(lease_margin=timedelta(seconds=30))
        dies = make_guard(lease_margin=timedelta(seconds=30), client=CrashAfterClaim(dynamodb))
        crashed = Body()
        with pytest.raises(SystemExit):
            deliver(dies, tick_at(TICK), crashed, remaining=60_000)
        first_token = crashed.calls[0].fencing_token
        assert store.history("cleanup")[0].status is RunStatus.RUNNING

        clock.advance(60 + 29)  # still inside deadline + margin: no takeover yet
        early = Body()
        assert deliver(guard, tick_at(TICK), early).outcome is Outcome.DUPLICATE
        assert early.calls == []

        clock.advance(2)  # past deadline + margin
        late = Body()
        result = deliver(guard, tick_at(TICK), late)
        assert result.outcome is Outcome.SUCCEEDED
        assert late.calls[0].attempt == 2
        assert late.calls[0].fencing_token > first_token
        assert store.history("cleanup")[0].status is RunStatus.SUCCEEDED

    def test_given_a_frozen_holder_when_it_wakes_after_a_takeover_then_its_write_is_refused(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        guard = make_guard(lease_margin=timedelta(seconds=5))
        successor = Body()

        def freeze_then_get_taken_over(run: Any) -> None:
            clock.advance(120)  # frozen well past its lease
            assert deliver(guard, tick_at(TICK), successor).outcome is Outcome.SUCCEEDED

        zombie = Body(during=freeze_then_get_taken_over)
        result = deliver(guard, tick_at(TICK), zombie, remaining=10_000)
        assert result.outcome is Outcome.FENCED
        assert successor.calls[0].fencing_token > zombie.calls[0].fencing_token
        [record] = store.history("cleanup")
        assert record.status is RunStatus.SUCCEEDED
        assert record.fencing_token == successor.calls[0].fencing_token

    def test_given_a_frozen_holder_that_fails_after_a_takeover_then_it_cannot_record_failure(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        guard = make_guard(lease_margin=timedelta(seconds=5))

        def freeze_then_fail(run: Any) -> None:
            clock.advance(120)
            deliver(guard, tick_at(TICK), Body())
            raise RuntimeError("zombie failure")

        with pytest.raises(RuntimeError):
            deliver(guard, tick_at(TICK), Body(during=freeze_then_fail), remaining=10_000)
        assert store.history("cleanup")[0].status is RunStatus.SUCCEEDED

    def test_fencing_tokens_strictly_increase_even_when_the_clock_goes_backwards(
        self, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        guard = make_guard(overlap=Overlap.ALLOW)
        tokens = []
        for minute in range(6):
            body = Body()
            deliver(guard, tick_at(TICK + timedelta(minutes=minute)), body)
            tokens.append(body.calls[0].fencing_token)
            clock.advance(-3 if minute % 2 else 1)  # a claimant whose clock is behind
        assert tokens == sorted(tokens)
        assert len(set(tokens)) == len(tokens)

    def test_given_skew_within_the_margin_then_a_live_run_is_never_taken_over(
        self, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        margin = timedelta(seconds=30)
        holder_guard = make_guard(lease_margin=margin)
        skewed = ManualClock(clock())
        ahead = make_guard(lease_margin=margin, clock_=skewed)
        copy = Body()

        def at_the_deadline(run: Any) -> None:
            # The holder is at its very deadline; the claimant's clock runs 29 s ahead.
            clock.advance(60)
            skewed.set(clock() + margin - timedelta(seconds=1))
            assert deliver(ahead, tick_at(TICK), copy).outcome is Outcome.DUPLICATE

        assert deliver(holder_guard, tick_at(TICK), Body(during=at_the_deadline)).outcome is (
            Outcome.SUCCEEDED
        )
        assert copy.calls == []


class TestRetriesOfOneInvocation:
    """Lambda retries an asynchronous invocation under the same request id (the lease holder)."""

    def test_a_retry_of_a_crashed_attempt_under_a_live_lease_fails_so_it_is_not_lost(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock, dynamodb: Any
    ) -> None:
        dies = make_guard(client=CrashAfterClaim(dynamodb))
        guard = make_guard()
        with pytest.raises(SystemExit):
            guard_deliver(dies, holder="request-1")
        clock.advance(60)  # Lambda's first retry, same request id, lease (90 s) still live
        with pytest.raises(TickBusy, match="earlier attempt of this invocation"):
            guard_deliver(guard, holder="request-1")
        clock.advance(120)  # the second retry, after the lease
        body = Body()
        assert guard_deliver(guard, holder="request-1", body=body).outcome is Outcome.SUCCEEDED
        assert body.calls[0].attempt == 2

    def test_another_invocation_under_the_same_live_lease_is_a_plain_duplicate(
        self, make_guard: GuardFactory, clock: ManualClock, dynamodb: Any
    ) -> None:
        with pytest.raises(SystemExit):
            guard_deliver(make_guard(client=CrashAfterClaim(dynamodb)), holder="request-1")
        assert guard_deliver(make_guard(), holder="request-2").outcome is Outcome.DUPLICATE


class TestTransactionConflicts:
    def test_a_conflicting_claim_is_retried_and_runs_once(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any
    ) -> None:
        body = Body()
        guard = make_guard(client=ConflictsFirst(dynamodb, conflicts=2))
        assert deliver(guard, tick_at(TICK), body).outcome is Outcome.SUCCEEDED
        assert len(body.calls) == 1

    def test_a_conflicting_finish_is_retried_not_mistaken_for_fencing(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any
    ) -> None:
        client = ConflictsFirst(dynamodb, conflicts=0)
        body = Body(during=lambda run: setattr(client, "conflicts", 3))
        result = deliver(make_guard(client=client), tick_at(TICK), body)
        assert result.outcome is Outcome.SUCCEEDED
        assert store.history("cleanup")[0].status is RunStatus.SUCCEEDED

    def test_conflicts_that_do_not_clear_raise_instead_of_guessing(
        self, make_guard: GuardFactory, dynamodb: Any
    ) -> None:
        from botocore.exceptions import ClientError

        with pytest.raises(ClientError, match="TransactionCanceled"):
            deliver(
                make_guard(client=ConflictsFirst(dynamodb, conflicts=99)), tick_at(TICK), Body()
            )


class TestFailures:
    def test_given_a_failing_body_then_failed_is_recorded_and_the_error_propagates(
        self, make_guard: GuardFactory, store: RunStore
    ) -> None:
        with pytest.raises(RuntimeError, match="boom #1"):
            deliver(make_guard(), tick_at(TICK), Body(fail=1))
        [record] = store.history("cleanup")
        assert record.status is RunStatus.FAILED
        assert (record.error_type, record.error_message) == ("RuntimeError", "boom #1")
        head = store.head("cleanup")
        assert head is not None and head.lease_tick is None, "a failure releases the lease"

    def test_given_a_failed_tick_when_retried_then_it_runs_again_once_and_never_after(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        guard, body = make_guard(), Body(fail=1)
        with pytest.raises(RuntimeError):
            deliver(guard, tick_at(TICK), body)
        clock.advance(60)
        assert deliver(guard, tick_at(TICK), body).outcome is Outcome.SUCCEEDED
        assert [run.attempt for run in body.calls] == [1, 2]
        assert deliver(guard, tick_at(TICK), body).outcome is Outcome.DUPLICATE
        [record] = store.history("cleanup")
        assert (record.status, record.attempts, record.error_type) == (
            RunStatus.SUCCEEDED,
            2,
            None,
        )

    def test_long_error_messages_are_truncated(
        self, make_guard: GuardFactory, store: RunStore
    ) -> None:
        def explode(run: Any) -> None:
            raise ValueError("x" * 5000)

        with pytest.raises(ValueError):
            deliver(make_guard(), tick_at(TICK), Body(during=explode))
        message = store.history("cleanup")[0].error_message
        assert message is not None and len(message) == 1000


class TestOverlap:
    def test_given_skip_when_a_tick_arrives_during_a_run_then_it_is_skipped_and_recorded(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        guard = make_guard(overlap=Overlap.SKIP)
        next_tick = TICK + timedelta(minutes=5)
        results = []
        second = Body()

        def slow(run: Any) -> None:
            clock.set(next_tick)
            results.append(deliver(guard, tick_at(next_tick), second))

        first = deliver(guard, tick_at(TICK), Body(during=slow), remaining=600_000)
        assert first.outcome is Outcome.SUCCEEDED
        assert results[0].outcome is Outcome.SKIPPED
        assert second.calls == []
        skipped, done = store.history("cleanup")
        assert (skipped.tick, skipped.status) == ("2026-11-22T12:05:00Z", RunStatus.SKIPPED)
        assert skipped.detail is not None and "12:00:00Z" in skipped.detail
        assert done.status is RunStatus.SUCCEEDED
        assert deliver(guard, tick_at(next_tick), second).outcome is Outcome.DUPLICATE

    def test_given_allow_when_a_tick_arrives_during_a_run_then_both_run(
        self, make_guard: GuardFactory, clock: ManualClock
    ) -> None:
        guard = make_guard(overlap=Overlap.ALLOW)
        next_tick = TICK + timedelta(minutes=5)
        second = Body()

        def slow(run: Any) -> None:
            clock.set(next_tick)
            assert deliver(guard, tick_at(next_tick), second).outcome is Outcome.SUCCEEDED

        first = Body(during=slow)
        assert deliver(guard, tick_at(TICK), first, remaining=600_000).outcome is Outcome.SUCCEEDED
        assert second.calls[0].fencing_token > first.calls[0].fencing_token

    def test_given_allow_when_an_older_tick_finishes_last_then_the_head_keeps_the_newest(
        self, make_guard: GuardFactory, clock: ManualClock, store: RunStore
    ) -> None:
        """The head's last_* used to go back in time: the older tick's late finish overwrote
        the newer tick's outcome."""
        guard = make_guard(overlap=Overlap.ALLOW)
        next_tick = TICK + timedelta(minutes=5)

        def slow(run: Any) -> None:
            clock.set(next_tick)
            with pytest.raises(RuntimeError):  # the newer tick fails while the older one runs
                deliver(guard, tick_at(next_tick), Body(fail=1))

        deliver(guard, tick_at(TICK), Body(during=slow), remaining=600_000)
        head = store.head("cleanup")
        assert head is not None
        assert (head.last_tick, head.last_status) == ("2026-11-22T12:05:00Z", RunStatus.FAILED)
        records = {r.tick: r.status for r in store.history("cleanup")}
        assert records["2026-11-22T12:00:00Z"] is RunStatus.SUCCEEDED  # still recorded


class TestLateRetriesAndRedrives:
    def test_a_retry_of_a_failed_tick_after_the_limit_fails_so_it_reaches_the_dlq(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        guard = make_guard(max_lateness=timedelta(minutes=2))
        with pytest.raises(RuntimeError):
            deliver(guard, tick_at(TICK), Body(fail=1))
        clock.advance(180)
        with pytest.raises(TickTooLate, match="FAILED"):
            deliver(guard, tick_at(TICK), Body())
        assert store.history("cleanup")[0].status is RunStatus.FAILED

    def test_a_redrive_runs_a_failed_tick_whatever_its_lateness_and_only_once(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        guard = make_guard(max_lateness=timedelta(minutes=2))
        with pytest.raises(RuntimeError):
            deliver(guard, tick_at(TICK), Body(fail=1))
        clock.advance(3600)
        redriven = Tick(job="cleanup", scheduled_at=TICK, source="redrive:scheduler")
        body = Body()
        assert deliver(guard, redriven, body).outcome is Outcome.SUCCEEDED
        assert deliver(guard, redriven, body).outcome is Outcome.DUPLICATE
        assert len(body.calls) == 1
        assert store.history("cleanup")[0].attempts == 2

    def test_given_skip_a_redrive_during_another_ticks_run_is_retried_not_skipped(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        """The chaos soak lost a tick (seed 1, 1,000 ticks): ``vigil jobs redrive`` invokes every
        dead-lettered event at once, and under ``skip`` the second redriven tick met the first's
        lease and was recorded SKIPPED, final: no later redrive could run it. A redrive is an
        operator's deliberate request for that tick: it fails instead, so Lambda retries it."""
        guard = make_guard(overlap=Overlap.SKIP)
        older, newer = TICK, TICK + timedelta(minutes=10)
        clock.set(newer + timedelta(hours=1))
        waiting = Body()
        during: list[type[BaseException]] = []

        def slow(run: Any) -> None:
            with pytest.raises(TickBusy) as busy:
                deliver(guard, Tick(job="cleanup", scheduled_at=newer, source="redrive:x"), waiting)
            during.append(busy.type)

        first = deliver(
            guard, Tick(job="cleanup", scheduled_at=older, source="redrive:x"), Body(during=slow)
        )
        assert first.outcome is Outcome.SUCCEEDED
        assert during == [TickBusy] and waiting.calls == []
        assert {r.tick for r in store.history("cleanup")} == {"2026-11-22T12:00:00Z"}
        clock.advance(60)  # Lambda's retry of the redrive, a minute later
        again = deliver(guard, Tick(job="cleanup", scheduled_at=newer, source="redrive:x"), waiting)
        assert again.outcome is Outcome.SUCCEEDED and len(waiting.calls) == 1


class TestMissedTicks:
    def test_given_a_tick_later_than_the_limit_then_it_is_missed_not_run(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        clock.set(TICK + timedelta(minutes=6))
        body = Body()
        result = deliver(make_guard(max_lateness=timedelta(minutes=5)), tick_at(TICK), body)
        assert result.outcome is Outcome.MISSED
        assert body.calls == []
        [record] = store.history("cleanup")
        assert record.status is RunStatus.MISSED
        head = store.head("cleanup")
        assert head is not None and head.last_status is RunStatus.MISSED

    def test_a_late_copy_of_a_tick_that_ran_is_a_duplicate_not_a_miss(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        guard = make_guard(max_lateness=timedelta(minutes=5))
        deliver(guard, tick_at(TICK), Body())
        clock.advance(3600)
        assert deliver(guard, tick_at(TICK), Body()).outcome is Outcome.DUPLICATE
        assert store.history("cleanup")[0].status is RunStatus.SUCCEEDED


class TestHistory:
    def test_history_is_newest_first_expires_after_retention_and_heads_list_every_job(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, runs_table: str
    ) -> None:
        cleanup = make_guard(retention=timedelta(days=3))
        report = make_guard(job="report", overlap=Overlap.ALLOW)
        for minute in range(3):
            deliver(cleanup, tick_at(TICK + timedelta(minutes=minute)), Body())
        deliver(report, tick_at(TICK, job="report"), Body())
        ticks = [r.tick for r in store.history("cleanup")]
        assert ticks == ["2026-11-22T12:02:00Z", "2026-11-22T12:01:00Z", "2026-11-22T12:00:00Z"]
        heads = {h.job: h for h in store.heads()}
        assert set(heads) == {"cleanup", "report"}
        assert heads["cleanup"].last_tick == "2026-11-22T12:02:00Z"
        assert heads["cleanup"].last_status is RunStatus.SUCCEEDED
        item = dynamodb.get_item(
            TableName=runs_table,
            Key={"pk": {"S": "JOB#cleanup"}, "sk": {"S": "TICK#2026-11-22T12:00:00Z"}},
        )["Item"]
        expected = datetime(2026, 11, 22, 12, 0, tzinfo=UTC) + timedelta(days=3)
        assert int(item["expires_at"]["N"]) == int(expected.timestamp())


class TestSkipLeaseLostToTheNextTick:
    def test_a_run_outliving_its_lease_under_skip_still_records_its_own_tick(
        self, make_guard: GuardFactory, store: RunStore, clock: ManualClock
    ) -> None:
        """The fault review's suspicion, reproduced: under ``skip`` the job's lease (on the head)
        passed to the next tick while tick A hung past it; A's finish was refused at the head
        and A's record stayed RUNNING, its outcome lost though nobody else ran tick A. The head
        belongs to the newer run, the record to A: A's outcome is recorded on its own tick."""
        guard = make_guard(overlap=Overlap.SKIP, lease_margin=timedelta(seconds=5))
        next_tick = TICK + timedelta(minutes=5)
        newer = Body()

        def hang_past_the_lease(run: Any) -> None:
            clock.set(next_tick)  # A's lease (10 s + 5 s) is long gone
            assert deliver(guard, tick_at(next_tick), newer).outcome is Outcome.SUCCEEDED

        result = deliver(guard, tick_at(TICK), Body(during=hang_past_the_lease), remaining=10_000)
        assert result.outcome is Outcome.SUCCEEDED
        records = {r.tick: r.status for r in store.history("cleanup")}
        assert records == {
            "2026-11-22T12:00:00Z": RunStatus.SUCCEEDED,
            "2026-11-22T12:05:00Z": RunStatus.SUCCEEDED,
        }
        head = store.head("cleanup")
        assert head is not None and head.last_tick == "2026-11-22T12:05:00Z"
        assert len(newer.calls) == 1
