"""``run.fenced.strict`` (issue 33, items 7 and 8): writes checked against the run's own claim.

The plain writers compare with the item's last writer: a superseded run's write lands until its
successor writes that very item. The strict writers also check the run's claim in the same
request (a DynamoDB transaction with a ``ConditionCheck``), or, for what takes no condition (S3,
SQS, EventBridge), read it right before the request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.effects.test_takeover import TICK, create
from vigil.clock import ManualClock
from vigil.contract.effects import FENCE_ATTRIBUTE, WRITES_ENV
from vigil.effects import Fenced
from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard, Run
from vigil.jobs.model import JobSettings, Outcome, RunStatus
from vigil.jobs.store import RunStore

LATER = TICK + timedelta(minutes=5)


class Job:
    """The ``cleanup`` job on moto, its ``Sessions`` table, ``Reports`` bucket and ``Mail``
    queue granted, and a way to hold a tick's run while a later tick runs (the issue's
    scenario: tick t held, tick t+5 claimed, t released)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.ddb = boto3.client("dynamodb", region_name="us-east-1")
        create(self.ddb, "runs", "pk", "sk")
        create(self.ddb, "sessions", "id")
        boto3.client("s3").create_bucket(Bucket="reports")
        self.queue = boto3.client("sqs").create_queue(QueueName="mail")["QueueUrl"]
        self.store = RunStore(self.ddb, "runs", sleep=lambda s: None)
        settings = JobSettings(job="cleanup", table="runs", lease_margin=timedelta(seconds=5))
        self.guard = JobGuard(settings, self.store, clock, sleep=lambda s: None)
        self.requests: list[str] = []
        self.counting = False

    def count(self, run: Run) -> None:
        """Count the requests the run's body makes from here on (the runs table's included: a
        strict check reads the claim through the guard's client), not the guard's finish."""
        self.counting = True
        for client in [run.fenced._aws(s) for s in ("dynamodb", "s3", "sqs")] + [self.ddb]:
            client.meta.events.register("before-call", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        if self.counting:
            self.requests.append(model.name)

    def execute(self, tick: Tick, body: Callable[[Run], None]) -> Any:
        def counted(run: Run) -> None:
            try:
                body(run)
            finally:
                self.counting = False

        return self.guard.execute(tick, counted, remaining_ms=lambda: 60_000, holder="a")

    def held_while_a_later_tick_runs(self, late: Callable[[Run], None]) -> Any:
        """Tick t's run freezes past its lease; tick t+5 claims and succeeds (writing nothing
        here); then t's run goes on with ``late``. t's result."""

        def hung(run: Run) -> None:
            self.clock.advance(360)
            later = Tick(job="cleanup", scheduled_at=LATER, source="scheduler")
            done = self.guard.execute(
                later, lambda r: None, remaining_ms=lambda: 60_000, holder="b"
            )
            assert done.outcome is Outcome.SUCCEEDED
            try:
                late(run)
            finally:
                self.counting = False

        first = Tick(job="cleanup", scheduled_at=TICK, source="scheduler")
        return self.guard.execute(first, hung, remaining_ms=lambda: 10_000, holder="a")

    def session(self) -> dict[str, Any] | None:
        return self.ddb.get_item(TableName="sessions", Key={"id": {"S": "s-1"}}).get("Item")


@pytest.fixture
def job(monkeypatch: pytest.MonkeyPatch) -> Iterator[Job]:
    grants = {"tables": {"Sessions": "sessions"}, "buckets": {"Reports": "reports"}}
    with mock_aws():
        harness = Job(ManualClock(TICK))
        grants["queues"] = {"Mail": harness.queue}
        monkeypatch.setenv(WRITES_ENV, json.dumps(grants))
        yield harness


def put(run: Run, table: Any) -> None:
    table.put_item(Item={"id": {"S": "s-1"}, "tick": {"S": run.tick}})


def test_a_plain_write_of_a_superseded_run_lands_until_its_successor_writes_that_item(
    job: Job,
) -> None:
    """What the plain writer guarantees, and no more: t+5 wrote nothing there, so t's write
    lands and t ends SUCCEEDED (the guide says so)."""
    result = job.held_while_a_later_tick_runs(lambda run: put(run, run.fenced.table("Sessions")))
    assert result.outcome is Outcome.SUCCEEDED
    assert job.session() is not None


def test_a_strict_write_of_a_run_a_later_tick_superseded_is_refused_in_the_same_request(
    job: Job,
) -> None:
    refused: list[Fenced] = []
    fencing_tokens: list[int] = []

    def late(run: Run) -> None:
        job.count(run)
        fencing_tokens.append(run.fencing_token)
        try:
            put(run, run.fenced.strict.table("Sessions"))
        except Fenced as error:
            refused.append(error)
            raise

    result = job.held_while_a_later_tick_runs(late)

    assert result.outcome is Outcome.FENCED
    assert job.session() is None
    assert job.requests == ["TransactWriteItems"]  # one request: the write and the check
    assert "claim" in refused[0].resource and int(refused[0].newer or 0) > fencing_tokens[0]
    assert job.store.history("cleanup")[1].status is RunStatus.FENCED


def test_a_strict_write_of_the_current_run_lands_and_keeps_the_plain_writers_contract(
    job: Job,
) -> None:
    """One request; the fence set on the item; the author's own condition failing raises the
    client's ``ConditionalCheckFailedException`` with the item, as a plain write does."""
    caught: list[Any] = []

    def body(run: Run) -> None:
        job.count(run)
        table = run.fenced.strict.table("Sessions")
        put(run, table)
        table.update_item(
            Key={"id": {"S": "s-1"}},
            UpdateExpression="SET n = :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        try:
            table.delete_item(
                Key={"id": {"S": "s-1"}},
                ConditionExpression="n = :two",
                ExpressionAttributeValues={":two": {"N": "2"}},
            )
        except job.ddb.exceptions.ConditionalCheckFailedException as error:
            caught.append(error)

    tick = Tick(job="cleanup", scheduled_at=TICK, source="scheduler")
    assert job.execute(tick, body).outcome is Outcome.SUCCEEDED
    assert job.requests == ["TransactWriteItems"] * 3
    item = job.session() or {}
    assert item["n"] == {"N": "1"} and item[FENCE_ATTRIBUTE]["S"].startswith("job:cleanup#")
    assert caught and caught[0].response["Item"]["n"] == {"N": "1"}


def test_strict_sends_and_puts_read_the_claim_first_and_a_superseded_run_sends_nothing(
    job: Job,
) -> None:
    refused: list[str] = []

    def late(run: Run) -> None:
        strict = run.fenced.strict
        for name, send in (
            ("sqs", lambda: strict.sqs.send_message(QueueUrl="Mail", MessageBody="x", effect="e")),
            ("s3", lambda: strict.s3.put_object(Bucket="Reports", Key="k", Body=b"x")),
        ):
            try:
                send()
            except Fenced:
                refused.append(name)

    assert job.held_while_a_later_tick_runs(late).outcome is Outcome.FENCED
    assert refused == ["sqs", "s3"]
    assert boto3.client("sqs").receive_message(QueueUrl=job.queue).get("Messages") is None
    assert boto3.client("s3").list_objects_v2(Bucket="reports").get("KeyCount") == 0


def test_a_strict_send_of_the_current_run_costs_one_consistent_read_more(job: Job) -> None:
    def body(run: Run) -> None:
        job.count(run)
        run.fenced.strict.sqs.send_message(QueueUrl="Mail", MessageBody="x", effect="e")

    tick = Tick(job="cleanup", scheduled_at=TICK, source="scheduler")
    job.execute(tick, body)
    assert job.requests == ["GetItem", "SendMessage"]


def test_what_a_strict_write_cannot_do_is_refused_before_any_request(job: Job) -> None:
    def body(run: Run) -> None:
        job.count(run)
        table = run.fenced.strict.table("Sessions")
        with pytest.raises(ValueError, match="ReturnValues"):
            table.update_item(
                Key={"id": {"S": "s-1"}}, UpdateExpression="SET n = :n", ReturnValues="ALL_NEW"
            )

    tick = Tick(job="cleanup", scheduled_at=TICK, source="scheduler")
    job.execute(tick, body)
    assert job.requests == []
    hand_made = Run("cleanup", datetime(2026, 11, 25, tzinfo=UTC), 7, 1, lambda: 1000, tick="t")
    with pytest.raises(RuntimeError, match="no claim to check"):
        hand_made.fenced.strict  # noqa: B018


def test_a_strict_put_of_the_same_bytes_reads_its_claim_right_before_the_completion(
    job: Job,
) -> None:
    """A put of the bytes the object holds is a one-part upload: create, part, completion. The
    completion is what writes the object, so the claim is read right before it: a newer run
    that claims while the part uploads (a large body takes minutes) refuses it, the upload is
    aborted and the object keeps its form (found in review: the claim was read before the
    upload began, and the completion landed: the tick ended SUCCEEDED)."""
    s3 = boto3.client("s3")
    s3.put_object(Bucket="reports", Key="k", Body=b"same")
    before = s3.head_object(Bucket="reports", Key="k")["ETag"]
    later: list[Outcome] = []

    def while_the_part_uploads(**_: Any) -> None:
        if not later:
            job.clock.advance(360)  # past this run's lease: the next tick claims
            tick = Tick(job="cleanup", scheduled_at=LATER, source="scheduler")
            ran = job.guard.execute(tick, lambda r: None, remaining_ms=lambda: 60_000, holder="b")
            later.append(ran.outcome)

    def body(run: Run) -> None:
        job.count(run)
        strict = run.fenced.strict
        strict._aws("s3").meta.events.register("before-call.s3.UploadPart", while_the_part_uploads)
        strict.s3.put_object(Bucket="Reports", Key="k", Body=b"same")

    result = job.execute(Tick(job="cleanup", scheduled_at=TICK, source="scheduler"), body)

    assert later == [Outcome.SUCCEEDED] and result.outcome is Outcome.FENCED
    assert s3.head_object(Bucket="reports", Key="k")["ETag"] == before
    assert s3.list_multipart_uploads(Bucket="reports").get("Uploads", []) == []
    assert "CompleteMultipartUpload" not in job.requests
    assert job.requests[-2:] == ["GetItem", "AbortMultipartUpload"]  # the claim, right before
