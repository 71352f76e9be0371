"""A second adversarial pass over the tasks' promises (issue 15): each test is a way a promise
broke, reproduced on moto, with the fault injected where AWS would put it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.helpers.clients import Delegating
from tests.helpers.jobs import throttled
from tests.helpers.tasks import ORDERED, PLAIN, Counting, Stack, invoke, record_of, records
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_cli import vigil
from tests.tasks.test_runs import Body, url
from vigil.contract.tasks import (
    MAX_SCHEDULE_NAME,
    REASON_ATTRIBUTE,
    RECEIVES_THAT_RUN_NOTHING,
    SCHEDULE_NAME_DELIMITER,
    TASK_NAME,
    TaskStatus,
    max_receive_count,
    schedule_grants,
)
from vigil.tasks import EnqueuedUnrecorded, InvalidTask, KeyReused, NotCancellable
from vigil.tasks.envelope import legacy_schedule_name, schedule_name, schedule_names
from vigil_tools.cli import EXIT_API_ERROR
from vigil_tools.emulator.scheduler import fire_one_time, one_time_schedules


def test_a_deeply_nested_body_is_malformed_not_a_crash_of_the_batch(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A body of nested arrays (well inside SQS's 256 KiB) made ``json.loads`` raise
    RecursionError, which ``parse`` did not take for "not JSON": the record's handler raised,
    the message was kept and came back until SQS's redrive policy dropped it without a reason."""
    batch = [record_of("[" * 100_000, "m-deep"), record_of(json.dumps({"a": [[[1]]]}), "m-ok")]
    body = Body()

    assert invoke(make_handler(body), batch) == []
    assert body.runs == []
    reasons = [
        m["MessageAttributes"][REASON_ATTRIBUTE]["StringValue"] for m in stack.dead_letters()
    ]
    assert len(reasons) == 2 and any("nested too deeply" in r for r in reasons)


class ClaimAnswerLost(Delegating):
    """DynamoDB applies the first claim but its answer is lost (a read timeout); botocore's
    standard mode sends the same request again, which meets the claim it made itself."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.lost = 0

    def update_item(self, **kwargs: Any) -> Any:
        claiming = kwargs.get("ReturnValues") == "ALL_NEW"  # only the claim asks for the item
        if claiming and not self.lost:
            self.lost += 1
            self._client.update_item(**kwargs)  # applied; the answer never arrives
        return self._client.update_item(**kwargs)


def test_a_claim_whose_answer_was_lost_runs_the_task_not_waits_out_its_own_lease(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """The retried claim was refused by its own earlier try and judged BUSY: the message waited
    out the lease this very delivery held, and the next claim spent a second attempt on a task
    that never ran (with ``retries=0``: FAILED RunCrashed without ever running its body)."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(url(stack)))
    body = Body()
    handler = make_handler(body, retries=0, dynamodb=ClaimAnswerLost(stack.dynamodb))

    assert invoke(handler, batch) == []
    assert body.ids == ["o-1"]
    record = stack.client().get(PLAIN, "o-1")
    assert (record.status, record.attempts) == (TaskStatus.SUCCEEDED, 1)


@pytest.mark.parametrize(
    "when",
    [
        {"delay": 1e12},
        {"delay": timedelta(days=999_999_000)},
        {"at": datetime(9999, 12, 31, tzinfo=UTC)},
    ],
    ids=["delay in seconds", "delay as timedelta", "at in the year 9999"],
)
def test_a_start_too_far_ahead_is_refused_before_anything_is_sent(
    stack: Stack, when: dict[str, Any]
) -> None:
    """A delay past datetime's range raised OverflowError (the API answered 500), and an ``at``
    near its end passed every check, created its one-time schedule, then overflowed computing
    the record's expiry: a schedule with no record, and an error to a caller told nothing was
    sent."""
    scheduler = Counting(stack.scheduler)
    client = stack.client(scheduler=scheduler)
    with pytest.raises(InvalidTask, match="too far ahead"):
        client.enqueue(PLAIN, {}, key="o-1", **when)
    assert scheduler.counts["create_schedule"] == 0
    assert stack.queued() == 0 and stack.items() == []


class Fails(Delegating):
    """``operation`` is throttled its first ``times`` calls (None: always), then passes."""

    def __init__(self, client: Any, operation: str, times: int | None = 1) -> None:
        super().__init__(client)
        self.operation, self.times, self.failed = operation, times, 0

    def __getattr__(self, name: str) -> Any:
        if name != self.operation or (self.times is not None and self.failed >= self.times):
            return getattr(self._client, name)

        def fail(**kwargs: Any) -> Any:
            self.failed += 1
            raise throttled(name)

        return fail


def schedule_exists(stack: Stack, task_id: str) -> bool:
    try:
        stack.scheduler.get_schedule(Name=schedule_name(PLAIN, task_id), GroupName="vigil-tasks")
    except stack.scheduler.exceptions.ResourceNotFoundException:
        return False
    return True


AT = datetime(2026, 11, 23, 9, tzinfo=UTC)


def test_a_cancel_retried_after_its_schedules_delete_failed_deletes_the_schedule(
    stack: Stack,
) -> None:
    """The first cancel wrote CANCELLED, then its DeleteSchedule was throttled; the retried
    cancel was refused (already CANCELLED) without deleting it. The schedule then fired: while
    the CANCELLED record lasts, a DUPLICATE; once it expired (its retention from the cancel, not
    from the start), the cancelled task ran."""
    stack.client().enqueue(PLAIN, {}, key="o-1", at=AT)
    flaky = stack.client(scheduler=Fails(stack.scheduler, "delete_schedule"))
    with pytest.raises(ClientError):
        flaky.cancel(PLAIN, "o-1")
    assert schedule_exists(stack, "o-1")

    with pytest.raises(NotCancellable, match="CANCELLED"):
        flaky.cancel(PLAIN, "o-1")  # the API's 409 stays; the schedule goes
    assert not schedule_exists(stack, "o-1")


def test_cancelling_a_scheduled_task_whose_record_was_never_written_deletes_its_schedule(
    stack: Stack,
) -> None:
    """``enqueue`` creates the schedule, then the record's PutItem fails: the cancel that
    follows recorded CANCELLED (no record said it was scheduled) and left the schedule."""
    broken = stack.client(dynamodb=Fails(stack.dynamodb, "put_item", times=None))
    with pytest.raises(EnqueuedUnrecorded):
        broken.enqueue(PLAIN, {}, key="o-1", at=AT)
    assert schedule_exists(stack, "o-1")

    assert stack.client().cancel(PLAIN, "o-1").status is TaskStatus.CANCELLED
    assert not schedule_exists(stack, "o-1")


def test_an_enqueue_whose_record_write_is_throttled_after_the_send_returns_its_id(
    stack: Stack,
) -> None:
    """The message went out, then the QUEUED record's PutItem was throttled and ``enqueue``
    raised: the task ran anyway (its claim writes the record), and a caller told "failed" that
    enqueued again without a key sent a second task. Now the write is retried (``persist``), and
    if it never lands the error names the id the task runs under."""
    dynamodb = Fails(stack.dynamodb, "put_item", times=2)
    task_id = stack.client(dynamodb=dynamodb).enqueue(PLAIN, {"order": "o-1"})
    assert dynamodb.failed == 2
    assert stack.client().get(PLAIN, task_id).status is TaskStatus.QUEUED
    assert stack.queued() == 1

    never = stack.client(dynamodb=Fails(stack.dynamodb, "put_item", times=None))
    with pytest.raises(EnqueuedUnrecorded) as raised:
        never.enqueue(PLAIN, {"order": "o-2"})
    assert stack.queued() == 2  # it will run: the error says under which id
    assert f"key={raised.value.task_id!r}" in str(raised.value)


def test_the_cli_refuses_a_payload_file_it_cannot_read_plainly(
    stack: Stack, tmp_path: Path
) -> None:
    """``--payload @file.json`` with a missing (or undecodable) file raised its OSError out of
    ``vigil``: a traceback instead of an error line and exit code."""
    binary = tmp_path / "payload.json"
    binary.write_bytes(b"\xff\xfe{")
    for argument in (f"@{tmp_path / 'missing.json'}", f"@{binary}"):
        code, _, err = vigil(stack, "enqueue", PLAIN, "--payload", argument)
        assert code == EXIT_API_ERROR and "--payload" in err
    assert stack.queued() == 0


def test_an_ordered_groups_messages_skipped_after_a_retry_come_back_with_the_retry(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """An ordered batch stops a group at its first message kept (a retry's backoff, a deferral,
    a busy lease); the group's later messages, never handed to the guard, kept the visibility
    the event source received them with (the queue's timeout, at least 6 x the function's). A
    FIFO group waits while any of its messages is in flight, so a 10 s backoff became that
    timeout. They are now made visible at once: the group still waits for its head (in flight
    for the backoff), then resumes in order."""
    client = stack.client()
    for action in ("resize", "delete"):
        client.enqueue(ORDERED, {}, key=f"a-{action}", group="a")
    batch = records(stack.messages(url(stack, ORDERED), visibility=360))
    handler = make_handler(Body(fail=1), ORDERED, retries=1)

    assert invoke(handler, batch) == [r["messageId"] for r in batch]
    visibility = {
        call["ReceiptHandle"]: call["VisibilityTimeout"]
        for call in handler.sqs.of("change_message_visibility")
    }
    head, skipped = (r["receiptHandle"] for r in batch)
    assert visibility == {head: 10, skipped: 0}


@pytest.mark.parametrize("retries", [0, 3, 10])
def test_an_ordered_message_behind_failing_heads_is_not_dead_lettered_by_sqs_unrun(
    retries: int,
) -> None:
    """An ordered batch skips a group's later messages each time an earlier one is kept (a
    retry's backoff, a deferral, a busy lease), and every skip is a receive. A message behind
    the 9 others of a 10-message batch, each spending its retries and its room for receives that
    run nothing, is received that many times before it runs; at ``retries + 12`` SQS moved it to
    the dead-letter queue unrun, its record QUEUED with no reason (five heads failing their three
    retries were enough). The net now scales with the batch an ordered group shares."""
    batch = 10
    per_head = retries + RECEIVES_THAT_RUN_NOTHING  # the receives a head is kept, at most
    skipped = (batch - 1) * per_head
    own = retries + 1 + RECEIVES_THAT_RUN_NOTHING
    assert max_receive_count(retries, group_batch=batch) > skipped + own
    assert max_receive_count(retries, group_batch=batch) <= 1000  # SQS's largest
    assert max_receive_count(retries) == retries + 2 + RECEIVES_THAT_RUN_NOTHING


def test_a_malformed_copy_of_a_queued_key_does_not_fail_the_task_its_real_message_runs(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """A message naming this task and a queued key but not a task (a payload that is not an
    object, from a client that bypassed ``enqueue``) marked the QUEUED record FAILED: the key's
    real message, still on the queue, then met FAILED and was a DUPLICATE, never run. The
    malformed one is dead-lettered with its reason; only a key with no record is marked."""
    stack.client().enqueue(PLAIN, {"order": "o-1"}, key="o-1")
    (real,) = records(stack.messages(url(stack)))
    bad = json.loads(real["body"])
    bad["vigil_task"]["payload"] = ["not", "an", "object"]
    body = Body()
    handler = make_handler(body)

    assert invoke(handler, [record_of(json.dumps(bad), "m-bad")]) == []
    assert len(stack.dead_letters()) == 1
    assert invoke(handler, [real]) == []
    assert body.ids == ["o-1"]
    assert stack.client().get(PLAIN, "o-1").status is TaskStatus.SUCCEEDED


def iam_matches(pattern: str, name: str) -> bool:
    """IAM's resource wildcards: ``*`` any run of characters, ``?`` exactly one."""
    parts = (".".join(map(re.escape, run.split("?"))) for run in pattern.split("*"))
    return re.fullmatch(".*".join(parts), name) is not None


KEYS = ("k-1", "o-9", "x" * 128)
CREATE, DELETE = "scheduler:CreateSchedule", "scheduler:DeleteSchedule"


@pytest.mark.parametrize(
    ("mine", "other"),
    [
        ("a", "a-b"),
        ("a-b", "a"),
        ("send", "send-receipt"),
        ("x" * 23 + "-one", "x" * 23 + "-two"),
        ("x" * 48, "x" * 47),
    ],
)
def test_no_tasks_schedule_names_fall_under_another_tasks_grant(mine: str, other: str) -> None:
    """Names were ``<task[:23]>-<digest>`` and the grant ``<task[:23]>-*``: a role allowed to
    enqueue ``a`` could create the schedule names of ``a-b`` (or of any task sharing its first
    23 characters). A squatted name made that task's enqueue meet ConflictException, take it for
    "already scheduled", and leave a QUEUED record nothing would run. Now the task's whole name
    and a delimiter no task name has; what is created is granted on exactly that."""
    assert TASK_NAME.match(mine) and TASK_NAME.match(other)
    granted = schedule_grants(mine, manage=True)
    theirs = [schedule_name(other, key) for key in KEYS]
    their_legacy = [legacy_schedule_name(other, key) for key in KEYS]
    for name in theirs:
        assert len(name) <= MAX_SCHEDULE_NAME and re.fullmatch(r"[0-9a-zA-Z_.-]+", name)
        assert not any(iam_matches(p, name) for p in granted[CREATE] + granted[DELETE]), name
    assert not any(iam_matches(p, name) for p in granted[CREATE] for name in their_legacy)
    # Legacy names are only deleted (cancel), and only tasks sharing their first 23 characters
    # shared them: those names cannot be told apart by their shape.
    shared = any(iam_matches(p, name) for p in granted[DELETE] for name in their_legacy)
    assert shared == (mine[:23] == other[:23])
    # Everything this task's own enqueue and cancel touch is granted to it.
    for key in KEYS:
        assert any(iam_matches(p, schedule_name(mine, key)) for p in granted[CREATE])
        for name in schedule_names(mine, key):
            assert any(iam_matches(p, name) for p in granted[DELETE])
    assert schedule_grants(mine, manage=False) == {CREATE: granted[CREATE]}


def test_no_task_name_can_hold_the_schedule_names_delimiter() -> None:
    assert not TASK_NAME.match(f"a{SCHEDULE_NAME_DELIMITER}b")
    assert re.fullmatch(r"[0-9a-zA-Z_.-]", SCHEDULE_NAME_DELIMITER)  # Scheduler's alphabet


def under_legacy_name(stack: Stack, task_id: str) -> str:
    """Moves the task's pending schedule to the name ``enqueue`` gave it before the delimiter,
    as a schedule created then and still pending would be."""
    group = "vigil-tasks"
    current = stack.scheduler.get_schedule(Name=schedule_name(PLAIN, task_id), GroupName=group)
    legacy = legacy_schedule_name(PLAIN, task_id)
    stack.scheduler.create_schedule(
        Name=legacy,
        GroupName=group,
        **{
            key: current[key]
            for key in (
                "ScheduleExpression",
                "ScheduleExpressionTimezone",
                "FlexibleTimeWindow",
                "ActionAfterCompletion",
                "Target",
            )
        },
    )
    stack.scheduler.delete_schedule(Name=schedule_name(PLAIN, task_id), GroupName=group)
    return legacy


def test_a_schedule_pending_under_its_legacy_name_is_cancelled_or_fires_as_before(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Renaming schedules must not strand those already pending: ``cancel`` deletes a schedule
    under either name, and one left alone delivers its task, which runs once."""
    client = stack.client()
    for key in ("o-1", "o-2"):
        client.enqueue(PLAIN, {"order": key}, key=key, at=AT)
        under_legacy_name(stack, key)

    assert client.cancel(PLAIN, "o-1").status is TaskStatus.CANCELLED
    (left,) = one_time_schedules(stack.scheduler)
    assert left.name == legacy_schedule_name(PLAIN, "o-2")

    stack.clock.set(AT)
    fire_one_time(stack.sqs, stack.scheduler, left)
    body = Body()
    assert invoke(make_handler(body), records(stack.messages(url(stack)))) == []
    assert body.ids == ["o-2"]
    assert stack.client().get(PLAIN, "o-2").status is TaskStatus.SUCCEEDED
    assert one_time_schedules(stack.scheduler) == []


class RecordNotYetThere(Delegating):
    """Its first GetItem answers no record, as it was before another request's put landed."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.hidden = False

    def get_item(self, **kwargs: Any) -> Any:
        if not self.hidden:
            self.hidden = True
            return {}
        return self._client.get_item(**kwargs)


def test_two_requests_racing_under_one_key_run_the_first_recorded_one_only(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """Both read no record and send their message; the second put is refused. Its caller is
    told KeyReused, and its message, claimed first, must not run in place of the recorded one:
    the claim takes only a record of its own request (the digest both carry)."""
    stack.client().enqueue(PLAIN, {"order": "a"}, key="k-1", request="digest-a")
    racing = stack.client(dynamodb=RecordNotYetThere(stack.dynamodb))
    with pytest.raises(KeyReused, match="k-1"):
        racing.enqueue(PLAIN, {"order": "b"}, key="k-1", request="digest-b")

    batch = sorted(records(stack.messages(url(stack))), key=lambda r: '"b"' not in r["body"])
    body = Body()
    assert invoke(make_handler(body), batch) == []
    assert [payload for _, _, payload in body.runs] == [{"order": "a"}]
    assert stack.client().get(PLAIN, "k-1").status is TaskStatus.SUCCEEDED
