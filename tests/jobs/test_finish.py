"""The finish: a body that completed is recorded once, whatever DynamoDB answers for a while.

Each test plays Lambda's asynchronous delivery of one tick: the first attempt, then its retries
about 60 s and 180 s later under the same request id, as long as an attempt raises.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.helpers.jobs import Body, FaultyTransactions, GuardFactory, tick_at
from tests.helpers.moto_fleet import CallCounter
from vigil.clock import ManualClock
from vigil.jobs.finish import OutcomeUnrecorded, Unfinished
from vigil.jobs.guard import JobGuard, Result
from vigil.jobs.model import Outcome, Overlap, RunStatus
from vigil.jobs.store import Finish, RunStore
from vigil.persist import FINISH_BACKOFF, LAMBDA_WRITE_TRY_S

TICK = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
REQUEST = "request-1"
TIMEOUT_S = 60


def invoke(guard: JobGuard, body: Body, clock: ManualClock, request: str = REQUEST) -> Result:
    """One invocation of the job's function: its deadline TIMEOUT_S from now, on the test clock."""
    deadline = clock() + timedelta(seconds=TIMEOUT_S)

    def remaining_ms() -> int:
        return max(0, int((deadline - clock()).total_seconds() * 1000))

    return guard.execute(tick_at(TICK), body, remaining_ms=remaining_ms, holder=request)


def lambda_delivers(
    guard: JobGuard, body: Body, clock: ManualClock, *, request: str = REQUEST
) -> list[Result | Exception]:
    """Deliver, advance 60 s, deliver, advance 120 s, deliver: what each delivery answered."""
    answers: list[Result | Exception] = []
    for wait in (0, 60, 120):
        clock.advance(wait)
        try:
            answers.append(invoke(guard, body, clock, request))
        except Exception as error:
            answers.append(error)
    return answers


def outcomes(answers: list[Result | Exception]) -> list[str]:
    return [a.outcome.value if isinstance(a, Result) else type(a).__name__ for a in answers]


class TestThrottledFinish:
    def test_a_finish_throttled_past_botocores_retries_does_not_run_the_body_again(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        # Given a client whose second transaction (the finish) is throttled past botocore's retries
        client = FaultyTransactions(dynamodb, plan=[None, "throttled"])
        body = Body()

        # When Lambda delivers the tick, and retries it 60 s and 180 s later
        lambda_delivers(make_guard(client=client), body, clock)

        # Then the body ran once, and the record says so
        assert len(body.calls) == 1
        [record] = store.history("cleanup")
        assert (record.status, record.attempts) == (RunStatus.SUCCEEDED, 1)

    def test_a_failed_runs_finish_is_retried_too(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        client = FaultyTransactions(dynamodb, plan=[None, "throttled", "throttled"])

        with pytest.raises(RuntimeError, match="boom #1"):
            invoke(make_guard(client=client), Body(fail=1), clock)

        [record] = store.history("cleanup")
        assert (record.status, record.error_message) == (RunStatus.FAILED, "boom #1")
        assert store.head("cleanup").lease_tick is None  # type: ignore[union-attr]

    def test_the_clean_path_costs_two_requests_and_no_read(
        self, make_guard: GuardFactory, dynamodb: Any, clock: ManualClock
    ) -> None:
        counter = CallCounter()
        counter.attach(dynamodb)

        invoke(make_guard(), Body(), clock)

        assert dict(counter.calls) == {"TransactWriteItems": 2}


class TestAppliedButAnsweredWithAnError:
    """A 500 or a timeout after DynamoDB applied the finish: the retry meets its own write."""

    @pytest.mark.parametrize("overlap", list(Overlap))
    def test_the_retry_of_an_applied_finish_reports_what_is_recorded_not_fenced(
        self,
        make_guard: GuardFactory,
        store: RunStore,
        dynamodb: Any,
        clock: ManualClock,
        overlap: Overlap,
    ) -> None:
        # Given a finish that DynamoDB applies but answers with a 500
        client = FaultyTransactions(dynamodb, plan=[None, "applied"])
        body = Body()

        # When the tick is delivered (and retried as Lambda would, were it to fail)
        answers = lambda_delivers(make_guard(client=client, overlap=overlap), body, clock)

        # Then the run reports the outcome recorded, and the body ran once
        assert outcomes(answers) == ["SUCCEEDED", "DUPLICATE", "DUPLICATE"]
        assert len(body.calls) == 1
        [record] = store.history("cleanup")
        assert (record.status, record.fencing_token) == (
            RunStatus.SUCCEEDED,
            body.calls[0].fencing_token,
        )
        # Both tries were the same request, under one token AWS remembers (moto ignores it)
        claim, first, retry = client.tokens[:3]
        assert first == retry and first is not None and len(first) <= 36
        assert claim != first

    def test_an_applied_failure_is_reported_as_the_bodys_error(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        client = FaultyTransactions(dynamodb, plan=[None, "applied"])

        with pytest.raises(RuntimeError, match="boom #1"):
            invoke(make_guard(client=client), Body(fail=1), clock)

        assert store.history("cleanup")[0].status is RunStatus.FAILED

    def test_a_refusal_by_a_newer_runs_record_is_still_fenced(self) -> None:
        outcome = finish_of(token=7)
        newer = {"fencing_token": 8, "status": "SUCCEEDED"}
        ours_but_running = {"fencing_token": 7, "status": "RUNNING"}
        assert outcome.landed_in({"fencing_token": 7, "status": "SUCCEEDED"})
        assert not outcome.landed_in(newer)
        assert not outcome.landed_in(ours_but_running)
        assert not outcome.landed_in(None)


class TestOutOfTime:
    """The finish is throttled until the invocation's time runs out."""

    def test_lambdas_retry_on_the_same_container_writes_the_outcome_without_the_body(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        # Given a finish throttled for longer than the invocation has left
        client = FaultyTransactions(dynamodb, plan=[None], always="throttled")
        guard, body = make_guard(client=client), Body()
        with pytest.raises(OutcomeUnrecorded, match="SUCCEEDED"):
            invoke(guard, body, clock)
        # It kept retrying until its last pause would have eaten the reserve (the pause is
        # jittered: at most the cap), and kept that reserve before Lambda's timeout.
        elapsed = (clock() - TICK).total_seconds()
        reserve, cap = FINISH_BACKOFF.reserve_s, FINISH_BACKOFF.cap_s
        assert TIMEOUT_S - reserve - cap <= elapsed <= TIMEOUT_S - reserve
        assert len(guard.unfinished) == 1

        # When the throttle has cleared and Lambda retries the same request on this container
        client.always = None
        clock.advance(60)
        retried = invoke(guard, body, clock)

        # Then the outcome is recorded, the body did not run again, and later copies are duplicates
        assert (retried.outcome, retried.attempt) == (Outcome.SUCCEEDED, 1)
        assert "retry" in retried.reason
        assert len(body.calls) == 1
        [record] = store.history("cleanup")
        assert (record.status, record.attempts) == (RunStatus.SUCCEEDED, 1)
        assert store.head("cleanup").lease_tick is None  # type: ignore[union-attr]
        assert len(guard.unfinished) == 0
        clock.advance(120)
        assert invoke(guard, body, clock).outcome is Outcome.DUPLICATE

    def test_the_remembered_outcome_is_still_fenced_by_the_runs_token(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        client = FaultyTransactions(dynamodb, plan=[None], always="throttled")
        guard, body = make_guard(client=client, lease_margin=timedelta(seconds=5)), Body()
        with pytest.raises(OutcomeUnrecorded):
            invoke(guard, body, clock)
        client.always = None
        # another delivery (another request) takes the tick over once the lease has expired
        clock.advance(30)
        successor = invoke(make_guard(lease_margin=timedelta(seconds=5)), Body(), clock, "other")
        assert (successor.outcome, successor.attempt) == (Outcome.SUCCEEDED, 2)

        late = invoke(guard, body, clock)

        assert late.outcome is Outcome.FENCED
        assert store.history("cleanup")[0].fencing_token == successor.fencing_token

    def test_a_final_error_on_the_retrys_write_keeps_the_outcome_for_the_next_retry(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        """``Unfinished.take`` forgot the outcome before writing it: an error ``persist`` does
        not retry lost it, and the next retry met its own lease (BUSY), then ran the body again."""
        client = FaultyTransactions(dynamodb, plan=[None], always="throttled")
        guard, body = make_guard(client=client), Body()
        with pytest.raises(OutcomeUnrecorded):
            invoke(guard, body, clock)
        client.plan, client.always = ["denied"], None
        clock.advance(60)
        with pytest.raises(Exception, match="AccessDenied"):
            invoke(guard, body, clock)
        assert len(guard.unfinished) == 1
        clock.advance(120)
        retried = invoke(guard, body, clock)
        assert (retried.outcome, len(body.calls)) == (Outcome.SUCCEEDED, 1)
        assert store.history("cleanup")[0].status is RunStatus.SUCCEEDED

    def test_on_a_new_container_the_body_runs_again_which_is_what_the_metric_counts(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        # What remains, stated as a test: the retry lands on a container that remembers nothing
        client = FaultyTransactions(dynamodb, plan=[None], always="throttled")
        body = Body()
        with pytest.raises(OutcomeUnrecorded):
            invoke(make_guard(client=client), body, clock)
        client.always = None

        answers = lambda_delivers(make_guard(client=client), body, clock)

        assert outcomes(answers)[:2] == ["TickBusy", "SUCCEEDED"]
        assert [run.attempt for run in body.calls] == [1, 2]

    def test_a_failed_run_recorded_late_is_run_again_by_the_same_retry(
        self, make_guard: GuardFactory, store: RunStore, dynamodb: Any, clock: ManualClock
    ) -> None:
        client = FaultyTransactions(dynamodb, plan=[None], always="throttled")
        guard, body = make_guard(client=client), Body(fail=1)
        with pytest.raises(RuntimeError, match="boom #1") as raised:
            invoke(guard, body, clock)
        assert isinstance(raised.value.vigil_unrecorded, OutcomeUnrecorded)  # type: ignore[attr-defined]
        client.always = None
        clock.advance(60)

        # Lambda retries a failed run anyway: the FAILED outcome is recorded, then attempt 2 runs
        retried = invoke(guard, body, clock)

        assert (retried.outcome, retried.attempt) == (Outcome.SUCCEEDED, 2)
        [record] = store.history("cleanup")
        assert (record.status, record.attempts) == (RunStatus.SUCCEEDED, 2)


class SlowThrottles(FaultyTransactions):
    """Every finish try takes the longest a Lambda's write client lets it (its timeouts and its
    one retry spent), then is throttled."""

    def __init__(self, client: Any, clock: ManualClock) -> None:
        super().__init__(client, plan=[None], always="throttled")
        self.clock = clock

    def transact_write_items(self, **kwargs: Any) -> Any:
        if not self.plan:
            self.clock.advance(LAMBDA_WRITE_TRY_S)
        return super().transact_write_items(**kwargs)


def test_a_finish_retry_starts_only_with_a_whole_tries_time_left(
    make_guard: GuardFactory, dynamodb: Any, clock: ManualClock
) -> None:
    """The fault review's suspicion: a retry started with the 2 s reserve left could outlast the
    invocation by botocore's own timeouts (60 s reads by default), and Lambda resets a timed-out
    container, so the outcome it would have remembered was gone. Each try is bounded
    (``LAMBDA_WRITE_CONFIG``) and a retry starts only with a whole try's time left."""
    guard = make_guard(client=SlowThrottles(dynamodb, clock))
    deadline = clock() + timedelta(seconds=TIMEOUT_S)
    with pytest.raises(OutcomeUnrecorded):
        invoke(guard, Body(), clock)
    assert clock() <= deadline  # the last try ended before Lambda's timeout
    assert len(guard.unfinished) == 1


def test_the_lambda_write_client_bounds_one_try() -> None:
    import boto3

    from vigil.persist import LAMBDA_WRITE_CONFIG

    client = boto3.client("dynamodb", region_name="us-east-1", config=LAMBDA_WRITE_CONFIG)
    config = client.meta.config
    assert config.retries == {"mode": "standard", "total_max_attempts": 2}
    # Two attempts of a connect and a read, standard mode's pause of at most 1 s between them.
    assert 2 * (config.connect_timeout + config.read_timeout) + 1 <= LAMBDA_WRITE_TRY_S


def finish_of(token: int = 1, status: RunStatus = RunStatus.SUCCEEDED, job: str = "j") -> Finish:
    return Finish(
        job=job,
        tick="2026-11-22T12:00:00Z",
        token=token,
        overlap=Overlap.SKIP,
        status=status,
        finished_at=TICK,
        duration_ms=5,
    )


def test_the_request_token_names_the_run_and_its_outcome_within_36_characters() -> None:
    long_name = "j" * 48
    tokens = {
        finish_of().request_token,
        finish_of(token=2).request_token,
        finish_of(status=RunStatus.FAILED).request_token,
        finish_of(job=long_name).request_token,
    }
    assert len(tokens) == 4
    assert all(len(token) <= 36 for token in tokens)
    assert finish_of().request_token == finish_of().request_token


def test_a_container_remembers_a_bounded_number_of_outcomes_each_for_its_own_tick() -> None:
    unfinished = Unfinished(capacity=2)
    for request in ("r1", "r2", "r3"):
        unfinished.remember(request, finish_of())
    assert len(unfinished) == 2
    assert unfinished.recall("r1", "j", "2026-11-22T12:00:00Z") is None  # forgotten, oldest first
    assert unfinished.recall("r2", "j", "another tick") is None
    assert unfinished.recall("r2", "other-job", "2026-11-22T12:00:00Z") is None
    assert unfinished.recall("r2", "j", "2026-11-22T12:00:00Z") == finish_of()
    assert len(unfinished) == 2  # until written
    unfinished.forget("r2")
    assert len(unfinished) == 1
