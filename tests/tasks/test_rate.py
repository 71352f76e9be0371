"""A task's rate limit: starts paced across every invocation through one DynamoDB item, a
message over the limit sent back to its reserved slot with no attempt spent, the bound held
under a backlog. Each test under 1 s on moto (the backlog one about 2 s)."""

from __future__ import annotations

import heapq
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.helpers.clients import Delegating
from tests.helpers.tasks import PLAIN, Counting, Stack, invoke, records
from tests.tasks.conftest import HandlerFactory
from vigil.contract.tasks import RATE_PK_PREFIX, RateLimit, TaskEnv, TaskStatus
from vigil.settings import SettingsError
from vigil.tasks import TaskRun
from vigil.tasks.rate import Admitted, Pacing, RateLimiter
from vigil.tasks.settings import TaskSettings


def limiter(stack: Stack, rate: str) -> RateLimiter:
    return RateLimiter(
        stack.dynamodb, stack.table, PLAIN, RateLimit.parse(rate), timedelta(hours=11)
    )


def test_a_backlog_is_paced_within_the_bound_each_message_deferred_once(stack: Stack) -> None:
    """70 messages at once, 50/minute: the event source hands every visible message out at
    once (the worst case), a deferred one comes back when its visibility ends plus up to 0.9 s
    of polling. Any sliding minute holds at most the bound, and no message waits twice."""
    rate = limiter(stack, "50/minute")
    start = stack.clock()
    queue = [(0.0, n, 1) for n in range(70)]  # (visible at s, message, receive count)
    heapq.heapify(queue)
    starts: list[float] = []
    deferrals = [0] * 70
    while queue:
        visible, message, receives = heapq.heappop(queue)
        stack.clock.set(start + timedelta(seconds=visible + (message % 10) * 0.09))
        now = (stack.clock() - start).total_seconds()
        decision = rate.admit(f"m-{message}", receives, stack.clock())
        if isinstance(decision, Admitted):
            starts.append(now)
        else:
            deferrals[message] += 1
            heapq.heappush(queue, (now + decision.seconds, message, receives + 1))
    assert len(starts) == 70
    bound = rate.pacing.bound(50)
    busiest = max(sum(1 for s in starts if t <= s < t + 60) for t in starts)
    assert busiest <= bound <= 53, (busiest, bound)
    assert busiest >= 50  # a backlog runs at the limit, not below it
    assert max(deferrals) == 1 and sum(deferrals) == 70 - rate.pacing.burst


def test_pacing_is_sized_to_five_percent_over_or_one_start() -> None:
    assert Pacing.of(RateLimit.parse("100/minute")).bound(100) == 105
    assert Pacing.of(RateLimit.parse("1000/minute")).bound(1000) == 1050
    assert Pacing.of(RateLimit.parse("10/minute")).bound(10) == 12  # granularity: 1 start
    assert Pacing.of(RateLimit.parse("3/hour")).bound(3) == 5
    # Per-second limits: the 2 s grace is longer than the period (the guide says so).
    assert Pacing.of(RateLimit.parse("10/second")).bound(10) == 31
    assert Pacing.of(RateLimit.parse("100/second")).bound(100) == 301


def test_over_the_limit_a_message_waits_for_its_slot_spending_no_attempt(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    client = stack.client()
    for n in range(3):
        client.enqueue(PLAIN, {}, key=f"o-{n}")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    ran: list[str] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        ran.append(run.id)

    handler = make_handler(body, rate_limit=RateLimit.parse("2/minute"))
    failed = invoke(handler, batch)
    assert len(ran) == 1 and len(failed) == 2  # one start; two sent back
    waits = sorted(
        call["VisibilityTimeout"] for call in handler.sqs.of("change_message_visibility")
    )
    assert waits == [30, 60]  # each to its own slot, 30 s apart
    for record in batch:
        if record["messageId"] in failed:
            task = client.get(PLAIN, record["body"].split('"id":"')[1].split('"')[0])
            assert (task.status, task.attempts) == (TaskStatus.QUEUED, 0)  # no attempt spent

    stack.clock.advance(30)
    back = [dict(r, attributes={**r["attributes"], "ApproximateReceiveCount": "2"}) for r in batch]
    back = [r for r in back if r["messageId"] in failed]
    assert invoke(handler, back) == [failed[1]]
    assert len(ran) == 2  # the first slot's message; the second still waits
    stack.clock.advance(30)
    assert invoke(handler, back[1:]) == []
    assert sorted(ran) == ["o-0", "o-1", "o-2"]
    assert all(client.get(PLAIN, f"o-{n}").attempts == 1 for n in range(3))


def test_a_bad_rate_in_the_environment_is_named() -> None:
    env = {
        TaskEnv.NAME: "send-receipt",
        TaskEnv.TABLE: "t",
        TaskEnv.QUEUE_URL: "q",
        TaskEnv.DEAD_LETTER_URL: "d",
        TaskEnv.RATE_LIMIT: "100/fortnight",
    }
    with pytest.raises(SettingsError, match="VIGIL_TASK_RATE_LIMIT: '100/fortnight'"):
        TaskSettings.from_env(env)
    env[TaskEnv.RATE_LIMIT] = "100/minute"
    assert TaskSettings.from_env(env).rate_limit == RateLimit(100, 60)


@pytest.mark.parametrize("text", ["1000/second", "251/second", "15001/minute", "900001/hour"])
def test_a_rate_one_partition_cannot_pace_under_a_backlog_is_refused(text: str) -> None:
    """The pace item and the reservations share one partition, and a partition takes 1,000
    writes a second; a start deferred under a backlog costs four writes (a refused move, the
    reservation's move and item, its take). 1,000/second was accepted: a backlog would be
    throttled at about a quarter of it, each throttled message kept for the queue's whole
    visibility timeout."""
    with pytest.raises(ValueError, match="250 starts a second"):
        RateLimit.parse(text)


@pytest.mark.parametrize("text", ["250/second", "15000/minute", "900000/hour"])
def test_the_most_one_partition_paces_is_accepted(text: str) -> None:
    limit = RateLimit.parse(text)
    assert limit.starts / limit.period_s == 250


class PaceThrottled(Delegating):
    """DynamoDB throttling every write to the limiter's partition (a hot pace item)."""

    def update_item(self, **request: Any) -> Any:
        if request["Key"]["pk"]["S"].startswith(RATE_PK_PREFIX):
            error = {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}
            raise ClientError({"Error": error}, "UpdateItem")
        return self._client.update_item(**request)


def test_a_throttled_limiter_sends_the_message_back_in_a_second_spending_no_attempt(
    stack: Stack, make_handler: HandlerFactory
) -> None:
    """It raised out of the guard: the message stayed invisible for the queue's whole
    visibility timeout (six times the function's) with nothing logged as the cause."""
    stack.client().enqueue(PLAIN, {}, key="o-1")
    batch = records(stack.messages(stack.catalog.spec(PLAIN).queue_url))
    handler = make_handler(
        lambda run, payload: None,
        rate_limit=RateLimit.parse("2/minute"),
        dynamodb=Counting(PaceThrottled(stack.dynamodb)),
    )
    assert invoke(handler, batch) == [batch[0]["messageId"]]
    waits = [call["VisibilityTimeout"] for call in handler.sqs.of("change_message_visibility")]
    assert waits == [1]
    assert stack.client().get(PLAIN, "o-1").attempts == 0
