"""Priority levels (``BackgroundTask(priorities=...)``): ``enqueue(priority=...)`` sends to the
level's own queue; an undeclared level is refused naming ``priority`` with nothing sent; the
guard sets a message's visibility on the queue it came from; a redrive goes back to the level's
queue. On moto, each test well under a second."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.helpers.tasks import PLAIN, Counting, Stack, invoke, make_queue, records
from vigil.contract.tasks import ENVELOPE_KEY, CatalogField, TaskStatus
from vigil.tasks import InvalidTask
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.envelope import parse
from vigil.tasks.guard import TaskRun
from vigil.tasks.queues import TaskQueue
from vigil.tasks.redrive import redrive


@pytest.fixture
def high(stack: Stack) -> str:
    """``send-receipt`` declared with one level, ``high``: its queue's URL."""
    url = make_queue(stack.sqs, "vigil-send-receipt-high", False)
    specs = {name: stack.catalog.spec(name) for name in stack.catalog}
    specs[PLAIN] = replace(specs[PLAIN], priority_queues={"high": url})
    stack.catalog = Catalog(specs)
    return url


def received(stack: Stack, url: str, visibility: int = 0) -> list[dict[str, Any]]:
    """The queue's messages as the event source hands them out, with their source's ARN."""
    batch = records(stack.messages(url, visibility=visibility))
    name = url.rsplit("/", 1)[-1]
    return [r | {"eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{name}"} for r in batch]


def test_a_high_priority_task_goes_to_its_levels_queue_and_says_so(stack: Stack, high: str) -> None:
    client = stack.client()
    client.enqueue(PLAIN, {"order": "o-1"}, key="o-1")
    client.enqueue(PLAIN, {"order": "o-2"}, key="o-2", priority="high")
    client.enqueue(PLAIN, {"order": "o-3"}, key="o-3", priority="normal")
    on_high = [parse(m["Body"]) for m in stack.messages(high)]
    assert [(e.id, e.priority) for e in on_high] == [("o-2", "high")]
    normal = {parse(m["Body"]).id for m in stack.messages(stack.catalog.spec(PLAIN).queue_url)}
    assert normal == {"o-1", "o-3"}
    assert client.get(PLAIN, "o-2").status is TaskStatus.QUEUED


def test_enqueue_many_sends_a_level_to_its_queue(stack: Stack, high: str) -> None:
    outcomes = stack.client().enqueue_many(
        PLAIN, [({"order": f"o-{i}"}, f"o-{i}") for i in range(3)], priority="high"
    )
    assert [o.status.value for o in outcomes] == ["enqueued"] * 3
    assert len(stack.messages(high)) == 3


@pytest.mark.parametrize(
    ("priority", "message"),
    [
        ("urgent", "task send-receipt has no priority 'urgent': one of ['normal', 'high']"),
        ("", "has no priority ''"),
        (3, "has no priority 3"),
    ],
)
def test_an_undeclared_priority_is_refused_naming_the_field_with_nothing_sent(
    stack: Stack, high: str, priority: Any, message: str
) -> None:
    sqs, dynamodb = Counting(stack.sqs), Counting(stack.dynamodb)
    client = stack.client(sqs=sqs, dynamodb=dynamodb)
    with pytest.raises(InvalidTask, match=re.escape(message)) as raised:
        client.enqueue(PLAIN, {"order": "o-1"}, key="o-1", priority=priority)
    assert raised.value.field == "priority"
    with pytest.raises(InvalidTask, match="no priority"):
        client.enqueue_many(PLAIN, [({"order": "o-2"}, "o-2")], priority=priority)
    assert sqs.calls == [] and dynamodb.calls == []  # nothing sent, nothing written


def test_a_task_without_levels_refuses_any_priority_but_normal(stack: Stack) -> None:
    client = stack.client()
    with pytest.raises(InvalidTask, match=r"no priority 'high': one of \['normal'\]"):
        client.enqueue(PLAIN, {"order": "o-1"}, priority="high")
    client.enqueue(PLAIN, {"order": "o-1"}, priority="normal")
    assert stack.queued() == 1


def test_a_retry_of_a_high_priority_message_comes_back_on_its_own_queue(
    stack: Stack, high: str, make_handler: Any
) -> None:
    """The backoff's ChangeMessageVisibility names the queue the message came from: on the
    normal queue SQS refuses the receipt handle, and the retry would wait the whole visibility
    timeout instead of its backoff."""
    stack.client().enqueue(PLAIN, {"order": "o-1"}, key="o-1", priority="high")
    runs: list[int] = []

    def body(run: TaskRun, payload: dict[str, Any]) -> None:
        runs.append(run.attempt)
        raise RuntimeError("boom")

    handler = make_handler(
        body,
        retries=2,
        backoff=timedelta(seconds=10),
        priority_queue_urls={"high": high},
    )
    batch = received(stack, high, visibility=300)
    assert invoke(handler, batch) == [batch[0]["messageId"]]
    (change,) = handler.sqs.of("change_message_visibility")
    assert (change["QueueUrl"], change["VisibilityTimeout"]) == (high, 10)
    assert stack.messages(high) == []  # set on its own queue: not visible before its backoff


def test_a_redrive_sends_a_dead_letter_back_to_its_levels_queue(stack: Stack, high: str) -> None:
    client = stack.client()
    client.enqueue(PLAIN, {"order": "o-1"}, key="o-1", priority="high")
    client.enqueue(PLAIN, {"order": "o-2"}, key="o-2")
    spec: TaskSpec = stack.catalog.spec(PLAIN)
    for url in (high, spec.queue_url):  # both dead-lettered, as the guard would
        (message,) = stack.messages(url, visibility=300)
        stack.sqs.send_message(QueueUrl=spec.dead_letter_url, MessageBody=message["Body"])
        stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    queue = TaskQueue(stack.sqs, spec.queue_url, spec.dead_letter_url, spec.priority_queues)
    done = redrive(stack.sqs, queue, task=PLAIN)
    assert sorted(done.moved) == ["o-1", "o-2"]
    (back,) = stack.messages(high)
    assert json.loads(back["Body"])[ENVELOPE_KEY]["priority"] == "high"
    (normal,) = stack.messages(spec.queue_url)
    assert parse(normal["Body"]).id == "o-2"


def test_the_catalog_carries_the_levels_and_refuses_a_malformed_field() -> None:
    raw = {"queue_url": "https://q/a", "table": "t", "priority_queue_urls": {"high": "https://q/b"}}
    spec = TaskSpec.from_json("send-receipt", raw)
    assert spec.queue_for("high") == "https://q/b" and spec.queue_for(None) == "https://q/a"
    assert spec.to_json()[CatalogField.PRIORITY_QUEUE_URLS] == {"high": "https://q/b"}
    from vigil.settings import SettingsError

    with pytest.raises(SettingsError, match="priority_queue_urls must be an object"):
        TaskSpec.from_json("send-receipt", raw | {"priority_queue_urls": ["https://q/b"]})


def test_the_api_takes_priority_in_the_body_and_refuses_an_unknown_one(
    stack: Stack, high: str
) -> None:
    from tests.tasks.test_api import Api

    api = Api(stack)
    status, body = api("POST", f"/tasks/{PLAIN}", {"payload": {}, "key": "k", "priority": "high"})
    assert (status, body["status"]) == (202, "QUEUED")
    assert [parse(m["Body"]).id for m in stack.messages(high)] == ["k"]
    api.sqs.calls.clear()
    status, body = api("POST", f"/tasks/{PLAIN}", {"payload": {}, "priority": "urgent"})
    assert (status, body["error"]) == (422, "invalid_priority")
    assert "no priority 'urgent'" in body["message"] and api.sqs.calls == []
    # The same key at another level is another request: refused as the API refuses any.
    status, body = api("POST", f"/tasks/{PLAIN}", {"payload": {}, "key": "k"})
    assert (status, body["error"]) == (422, "idempotency_key_reused")


def test_the_cli_takes_priority_and_refuses_an_unknown_one(stack: Stack, high: str) -> None:
    from tests.tasks.test_cli import vigil

    code, out, _ = vigil(stack, "enqueue", PLAIN, "--key", "k", "--priority", "high")
    assert (code, out) == (0, "k\n")
    assert [parse(m["Body"]).id for m in stack.messages(high)] == ["k"]
    code, _, err = vigil(stack, "enqueue", PLAIN, "--priority", "urgent")
    assert code != 0 and "priority" in err and "urgent" in err
    assert len(stack.messages(high)) == 1
