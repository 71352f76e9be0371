"""Fenced writes (issue 17): a superseded run's write is refused and changes nothing; no request
is added to a DynamoDB write or a send; a resource not granted is refused before any request."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from vigil.contract.effects import FENCE_ATTRIBUTE, S3_FENCE_METADATA, WRITES_ENV
from vigil.effects import Effects, FenceContention, Fenced, NotGranted, RunFence, deduplication_id
from vigil.effects.fence import Grants
from vigil.fenced_write import Halt
from vigil.jobs.guard import Run
from vigil.tasks.guard import TaskRun

TABLE, BUCKET, BUS = "app-items", "app-reports", "app-bus"


class Counted:
    """boto3 clients that count the API calls made through them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, service: str) -> Any:
        client = boto3.client(service, region_name="us-east-1")
        client.meta.events.register("before-call", lambda model, **_: self.calls.append(model.name))
        return client


@pytest.fixture
def world() -> Iterator[dict[str, str]]:
    with mock_aws():
        boto3.client("dynamodb").create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        sqs = boto3.client("sqs")
        fifo = sqs.create_queue(QueueName="mail.fifo", Attributes={"FifoQueue": "true"})
        plain = sqs.create_queue(QueueName="mail")
        boto3.client("events").create_event_bus(Name=BUS)
        yield {
            "Items": TABLE,
            "Reports": BUCKET,
            "MailFifo": fifo["QueueUrl"],
            "Mail": plain["QueueUrl"],
            "Bus": BUS,
        }


def grants(world: dict[str, str]) -> Grants:
    return Grants.from_env(
        {
            WRITES_ENV: json.dumps(
                {
                    "tables": {"Items": world["Items"]},
                    "buckets": {"Reports": world["Reports"]},
                    "queues": {"MailFifo": world["MailFifo"], "Mail": world["Mail"]},
                    "buses": {"Bus": world["Bus"]},
                }
            )
        },
        who="job:cleanup",
    )


def effects(
    world: dict[str, str], token: int, counted: Counted | None = None, **kw: Any
) -> Effects:
    fence = RunFence.of_job(kw.get("job", "cleanup"), kw.get("tick", "t1"), token)
    return Effects(fence, grants(world), counted or Counted())


def item(key: str) -> dict[str, Any]:
    got = boto3.client("dynamodb").get_item(TableName=TABLE, Key={"id": {"S": key}})
    return dict(got.get("Item", {}))


# -- the fence's order -----------------------------------------------------------------------


def test_fences_order_by_number_within_a_scope_and_not_across_scopes() -> None:
    older, newer = RunFence.of_job("a", "t", 9), RunFence.of_job("a", "t2", 10)
    assert older.superseded_by(newer.value) and not newer.superseded_by(older.value)
    assert not older.superseded_by(older.value)
    assert older.value < newer.value  # string order is number order (what DynamoDB compares)
    # Another job, or a job whose name starts like this one's, is not a newer run of this one.
    assert not older.superseded_by(RunFence.of_job("b", "t", 10**15).value)
    assert not older.superseded_by(RunFence.of_job("ab", "t", 10**15).value)
    assert not RunFence.of_task("t", "a", 1).superseded_by(RunFence.of_task("t", "a#b", 5).value)


# -- DynamoDB ----------------------------------------------------------------------------------


def test_a_superseded_runs_writes_are_refused_and_change_nothing(world: dict[str, str]) -> None:
    zombie, successor = effects(world, 100), effects(world, 200)
    successor.table("Items").put_item(Item={"id": {"S": "k"}, "v": {"S": "successor"}})
    for write in (
        lambda t: t.put_item(Item={"id": {"S": "k"}, "v": {"S": "zombie"}}),
        lambda t: t.update_item(
            Key={"id": {"S": "k"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"S": "zombie"}},
        ),
        lambda t: t.delete_item(Key={"id": {"S": "k"}}),
    ):
        with pytest.raises(Fenced) as refused:
            write(zombie.table("Items"))
        assert refused.value.token == zombie.fence.value
        assert refused.value.newer == successor.fence.value
        assert TABLE in refused.value.resource
    assert item("k")["v"] == {"S": "successor"}
    assert item("k")[FENCE_ATTRIBUTE] == {"S": successor.fence.value}


def test_the_same_run_an_older_one_or_another_scope_writes_over(world: dict[str, str]) -> None:
    older, run = effects(world, 100), effects(world, 200)
    older.table("Items").put_item(Item={"id": {"S": "k"}, "n": {"N": "1"}})
    table = run.table("Items")
    table.update_item(
        Key={"id": {"S": "k"}},
        UpdateExpression="ADD n :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    table.update_item(
        Key={"id": {"S": "k"}},
        UpdateExpression="set m = :m REMOVE gone",
        ExpressionAttributeValues={":m": {"S": "x"}},
    )
    assert item("k")["n"] == {"N": "2"} and item("k")["m"] == {"S": "x"}
    other_job = effects(world, 5, job="report")  # not ordered against cleanup's runs
    other_job.table("Items").put_item(Item={"id": {"S": "k"}})
    assert item("k")[FENCE_ATTRIBUTE] == {"S": other_job.fence.value}


def test_the_authors_condition_is_anded_and_its_failure_is_its_own(world: dict[str, str]) -> None:
    table = effects(world, 100).table("Items")
    table.put_item(Item={"id": {"S": "k"}, "v": {"N": "1"}})
    with pytest.raises(ClientError) as failed:
        table.update_item(
            Key={"id": {"S": "k"}},
            UpdateExpression="SET #v = :two",
            ConditionExpression="#v = :zero",
            ExpressionAttributeNames={"#v": "v"},
            ExpressionAttributeValues={":two": {"N": "2"}, ":zero": {"N": "0"}},
        )
    assert not isinstance(failed.value, Fenced)
    assert "ConditionalCheckFailed" in str(failed.value)
    table.update_item(
        Key={"id": {"S": "k"}},
        UpdateExpression="SET #v = :two",
        ConditionExpression="#v = :one",
        ExpressionAttributeNames={"#v": "v"},
        ExpressionAttributeValues={":two": {"N": "2"}, ":one": {"N": "1"}},
    )
    assert item("k")["v"] == {"N": "2"}


def test_a_fenced_write_is_one_request_like_a_plain_one(world: dict[str, str]) -> None:
    counted = Counted()
    table = effects(world, 100, counted).table("Items")
    table.put_item(Item={"id": {"S": "k"}})
    table.update_item(
        Key={"id": {"S": "k"}},
        UpdateExpression="SET a = :a",
        ExpressionAttributeValues={":a": {"S": "a"}},
    )
    table.delete_item(Key={"id": {"S": "k"}})
    assert counted.calls == ["PutItem", "UpdateItem", "DeleteItem"]
    stale = Counted()
    effects(world, 300).table("Items").put_item(Item={"id": {"S": "k"}})
    with pytest.raises(Fenced):
        effects(world, 100, stale).table("Items").put_item(Item={"id": {"S": "k"}})
    assert stale.calls == ["PutItem"]


def test_bad_input_is_refused_before_any_request(world: dict[str, str]) -> None:
    counted = Counted()
    run = effects(world, 100, counted)
    with pytest.raises(NotGranted, match=r"not granted table 'orders'.*Items.*writes="):
        run.table("orders")
    with pytest.raises(ValueError, match="reserved for the fence"):
        run.table("Items").put_item(
            Item={"id": {"S": "k"}},
            ConditionExpression="attribute_not_exists(#vigil_fence)",
            ExpressionAttributeNames={"#vigil_fence": "x"},
        )
    with pytest.raises(ValueError, match="UpdateExpression"):
        run.table(TABLE).update_item(Key={"id": {"S": "k"}}, AttributeUpdates={})
    with pytest.raises(NotGranted, match="bucket 'elsewhere'"):
        run.s3.put_object(Bucket="elsewhere", Key="k", Body=b"")
    with pytest.raises(NotGranted, match="queue 'other'"):
        run.sqs.send_message(QueueUrl="other", MessageBody="{}", effect="e")
    with pytest.raises(NotGranted, match="bus 'default'"):
        run.events.put_event(Source="app", DetailType="d", Detail={}, effect="e")
    with pytest.raises(ValueError, match="effect="):
        run.sqs.send_message(QueueUrl="Mail", MessageBody="{}", effect="")
    no_grants = Effects(RunFence.of_job("cleanup", "t", 1), Grants.from_env({}, "job:cleanup"))
    with pytest.raises(NotGranted, match="granted tables: none"):
        no_grants.table(TABLE)
    assert counted.calls == []


# -- S3 ----------------------------------------------------------------------------------------


def test_s3_puts_create_once_update_on_the_etag_and_refuse_a_superseded_run(
    world: dict[str, str],
) -> None:
    counted = Counted()
    successor, zombie = effects(world, 200, counted), effects(world, 100)
    successor.s3.put_object(Bucket="Reports", Key="r.csv", Body=b"new")
    successor.s3.put_object(Bucket=BUCKET, Key="r.csv", Body=b"newer", Metadata={"a": "b"})
    assert counted.calls == ["HeadObject", "PutObject", "HeadObject", "PutObject"]
    with pytest.raises(Fenced) as refused:
        zombie.s3.put_object(Bucket="Reports", Key="r.csv", Body=b"zombie")
    assert refused.value.newer == successor.fence.value
    got = boto3.client("s3").get_object(Bucket=BUCKET, Key="r.csv")
    assert got["Body"].read() == b"newer"
    assert got["Metadata"] == {"a": "b", S3_FENCE_METADATA: successor.fence.value}


def test_s3_a_write_landing_between_the_head_and_the_put_is_not_overwritten(
    world: dict[str, str],
) -> None:
    """moto honours If-None-Match and If-Match (412): the race is real, not simulated."""
    zombie, successor = effects(world, 100), effects(world, 200)
    bucket = zombie.s3
    real_condition = bucket._condition

    def head_then_successor_writes(*args: Any) -> dict[str, str]:
        condition = real_condition(*args)
        successor.s3.put_object(Bucket=BUCKET, Key="r.csv", Body=b"successor")
        return condition

    bucket._condition = head_then_successor_writes  # type: ignore[method-assign]
    with pytest.raises(Fenced):
        bucket.put_object(Bucket=BUCKET, Key="r.csv", Body=b"zombie")
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key="r.csv")["Body"].read()
    assert body == b"successor"


# -- SQS and EventBridge -----------------------------------------------------------------------


def test_a_fifo_queue_drops_a_repeat_of_the_same_effect_of_the_same_tick(
    world: dict[str, str],
) -> None:
    sqs = boto3.client("sqs")
    counted = Counted()
    first, takeover = effects(world, 100, counted), effects(world, 200)
    first.sqs.send_message(QueueUrl="MailFifo", MessageBody="hi", effect="welcome-email")
    takeover.sqs.send_message(QueueUrl="mail.fifo", MessageBody="hi", effect="welcome-email")
    takeover.sqs.send_message(QueueUrl="MailFifo", MessageBody="bye", effect="goodbye-email")
    effects(world, 300, tick="t2").sqs.send_message(
        QueueUrl="MailFifo", MessageBody="hi", effect="welcome-email"
    )
    assert counted.calls == ["SendMessage"]
    got = sqs.receive_message(
        QueueUrl=world["MailFifo"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    assert [m["Body"] for m in got] == ["hi", "bye", "hi"]
    attributes = got[0]["MessageAttributes"]
    assert attributes["vigil-run"]["StringValue"] == "job:cleanup/t1"
    assert attributes["vigil-effect"]["StringValue"] == "welcome-email"
    assert deduplication_id(first.fence, "welcome-email") == deduplication_id(
        takeover.fence, "welcome-email"
    )


def test_standard_queues_and_buses_carry_the_run_identity(world: dict[str, str]) -> None:
    counted = Counted()
    run = effects(world, 100, counted)
    run.sqs.send_message(QueueUrl="Mail", MessageBody="hi", effect="welcome-email")
    message = boto3.client("sqs").receive_message(
        QueueUrl=world["Mail"], MessageAttributeNames=["All"]
    )["Messages"][0]
    assert message["MessageAttributes"]["vigil-fence"]["StringValue"] == run.fence.value
    run.events.put_event(
        EventBusName="Bus", Source="app", DetailType="Sent", Detail={"n": 1}, effect="welcome"
    )
    assert counted.calls == ["SendMessage", "PutEvents"]


# -- the runs hand them out, lazily ------------------------------------------------------------


def test_job_task_and_observer_runs_hand_out_their_fence(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WRITES_ENV, json.dumps({"tables": {"Items": TABLE}}))
    when = datetime(2026, 11, 25, tzinfo=UTC)
    job = Run("cleanup", when, 7, 1, lambda: 1000, tick="2026-11-25T00:00:00Z")
    assert job.fenced is job.fenced
    assert job.fenced.fence == RunFence("job:cleanup", 7, "job:cleanup/2026-11-25T00:00:00Z")
    task = TaskRun("send", "o-1", 2, 9, when, lambda: 1000, lambda *_: True)
    assert task.fenced.fence == RunFence("task:send/o-1", 9, "task:send/o-1")
    job.fenced.table("Items").put_item(Item={"id": {"S": "k"}})
    from vigil.observers.runtime import ObserverContext

    ctx = ObserverContext.__new__(ObserverContext)  # only what ``fenced`` reads
    ctx.name, ctx.generation = "tick", 3
    ctx._runtime = SimpleNamespace(  # type: ignore[assignment]
        environ={WRITES_ENV: json.dumps({"tables": {"Items": TABLE}})},
        halt=Halt(),
        record_site=lambda: None,
    )
    assert ctx.fenced.fence == RunFence("observer:tick", 3, "observer:tick")


class OneWayStream(io.RawIOBase):
    """A body that can be read once and not rewound (a socket, a pipe)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._data.readinto(buffer)


@pytest.mark.parametrize("stream", [io.BytesIO, OneWayStream])
def test_s3_a_lost_race_puts_the_whole_streamed_body_again(
    world: dict[str, str], stream: Any
) -> None:
    """A file-like Body is read by the first put; the put after a lost race (a write that does
    not fence this run out: another job's) must send it whole, not what is left of it (nothing)."""
    ours, other = effects(world, 100), effects(world, 900, job="another-job")
    bucket = ours.s3
    real_condition = bucket._condition
    raced: list[int] = []

    def head_then_another_job_writes(*args: Any) -> dict[str, str]:
        condition = real_condition(*args)
        if not raced:
            raced.append(1)
            other.s3.put_object(Bucket=BUCKET, Key="r.csv", Body=b"another job's")
        return condition

    bucket._condition = head_then_another_job_writes  # type: ignore[method-assign]
    bucket.put_object(Bucket=BUCKET, Key="r.csv", Body=stream(b"ours, in full"))
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key="r.csv")["Body"].read()
    assert body == b"ours, in full"


def test_s3_the_authors_metadata_cannot_carry_a_second_fence_in_another_case(
    world: dict[str, str],
) -> None:
    """S3 metadata names are case-insensitive headers: an author's ``Vigil-Fence`` would be sent
    beside the fence's ``vigil-fence`` and the two joined or one lost; only the run's fence goes."""
    counted = Counted()
    sent: list[dict[str, str]] = []
    run = effects(world, 100, counted)
    run._aws("s3").meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **_: sent.append(params["Metadata"])
    )
    run.s3.put_object(
        Bucket=BUCKET, Key="m", Body=b"1", Metadata={"Vigil-Fence": "job:cleanup#9", "a": "b"}
    )
    assert sent == [{"a": "b", S3_FENCE_METADATA: run.fence.value}]


def test_one_effect_name_for_two_different_messages_in_a_run_is_refused_not_dropped(
    world: dict[str, str],
) -> None:
    """A FIFO queue drops the second (same deduplication id), and a consumer deduplicating on
    ``vigil-run``/``vigil-effect`` drops it too: a second, different message under a name this
    run already sent is refused before any request. The same message again is a repeat (sent,
    deduplicated downstream), and another name or another destination is another effect."""
    counted = Counted()
    run = effects(world, 100, counted)
    run.sqs.send_message(QueueUrl="MailFifo", MessageBody="to ann", effect="welcome-email")
    run.sqs.send_message(QueueUrl="MailFifo", MessageBody="to ann", effect="welcome-email")
    run.sqs.send_message(QueueUrl="Mail", MessageBody="to bob", effect="welcome-email")
    with pytest.raises(ValueError, match=r"welcome-email.*already sent"):
        run.sqs.send_message(QueueUrl="MailFifo", MessageBody="to bob", effect="welcome-email")
    run.events.put_event(
        EventBusName="Bus", Source="a", DetailType="d", Detail={"n": 1}, effect="e"
    )
    with pytest.raises(ValueError, match=r"'e'.*already sent"):
        run.events.put_event(
            EventBusName="Bus", Source="a", DetailType="d", Detail={"n": 2}, effect="e"
        )
    assert counted.calls == ["SendMessage"] * 3 + ["PutEvents"]


def test_a_fence_attribute_of_another_type_or_shape_is_another_writers_and_written_over(
    world: dict[str, str],
) -> None:
    """No token, a number, bytes, or a string not shaped like this scope's fence: not a newer run
    of this job, so the fenced write lands (and leaves this run's fence)."""
    ddb, run = boto3.client("dynamodb"), effects(world, 100)
    found: list[dict[str, Any]] = [
        {},
        {"N": "999999999999999999999"},
        {"B": b"job:cleanup#99999999999999999999"},
        {"S": "job:cleanup#999"},
        {"S": "job:cleanup#99999999999999999999x"},
    ]
    for n, fence in enumerate(found):
        key = {"id": {"S": f"k{n}"}}
        ddb.put_item(TableName=TABLE, Item={**key, **({FENCE_ATTRIBUTE: fence} if fence else {})})
        run.table("Items").update_item(
            Key=key, UpdateExpression="set v = :v", ExpressionAttributeValues={":v": {"N": "1"}}
        )
        assert item(f"k{n}")[FENCE_ATTRIBUTE] == {"S": run.fence.value}


@pytest.mark.parametrize(
    "expression",
    ["ADD n :one", "REMOVE gone", "set n = :one REMOVE gone", "REMOVE gone SET n = :one"],
)
def test_the_fence_is_set_whatever_clauses_the_authors_update_has(
    world: dict[str, str], expression: str
) -> None:
    run = effects(world, 100)
    values = {":one": {"N": "1"}} if ":one" in expression else {}
    run.table("Items").update_item(
        Key={"id": {"S": "u"}},
        UpdateExpression=expression,
        **({"ExpressionAttributeValues": values} if values else {}),
    )
    assert item("u")[FENCE_ATTRIBUTE] == {"S": run.fence.value}


def test_a_send_with_more_attributes_than_sqs_takes_beside_the_runs_is_refused_clearly(
    world: dict[str, str],
) -> None:
    """SQS takes 10 message attributes; the fence adds 3: an author's 8th would fail at SQS with
    a count the author never wrote. Refused before any request, saying why."""
    counted = Counted()
    run = effects(world, 100, counted)
    own = {f"a{n}": {"DataType": "String", "StringValue": "x"} for n in range(8)}
    with pytest.raises(ValueError, match="at most 7"):
        run.sqs.send_message(QueueUrl="Mail", MessageBody="b", effect="e", MessageAttributes=own)
    del own["a7"]
    run.sqs.send_message(QueueUrl="Mail", MessageBody="b", effect="e", MessageAttributes=own)
    assert counted.calls == ["SendMessage"]


def test_a_long_runs_memory_of_its_sends_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An observer's run lasts its generation: naming each occurrence must not grow forever."""
    from vigil.effects import messages

    monkeypatch.setattr(messages, "REMEMBERED", 2)
    sent = messages.SentEffects()
    for n in range(5):
        sent.check("q", f"alert:{n}", "body")()
    sent.check("q", "alert:0", "another body")  # forgotten: not refused
    with pytest.raises(ValueError, match="already sent"):
        sent.check("q", "alert:4", "another body")


# -- S3 races (issue 33) -------------------------------------------------------------------------


def racing(bucket: Any, between: Any, times: int = 1) -> None:
    """Run ``between()`` after each of the fenced put's heads, ``times`` times at most: a write
    (or a delete) that lands between the head and the put."""
    real_condition = bucket._condition
    raced: list[int] = []

    def head_then_race(*args: Any) -> Any:
        condition = real_condition(*args)
        if len(raced) < times:
            raced.append(1)
            between()
        return condition

    bucket._condition = head_then_race


def body_of(key: str) -> bytes:
    return bytes(boto3.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_s3_a_successor_writing_the_same_bytes_still_fences_the_zombies_put_out(
    world: dict[str, str],
) -> None:
    """The ETag reflects the bytes, not the metadata the fence is in: a successor's put of the
    bytes already there leaves it as the zombie read it. The successor's put changes it all the
    same, so the zombie's If-Match put fails and its next head finds the newer fence."""
    older, zombie, successor = effects(world, 50), effects(world, 100), effects(world, 200)
    older.s3.put_object(Bucket=BUCKET, Key="status.json", Body=b'{"ok": true}')
    bucket = zombie.s3
    racing(
        bucket,
        lambda: successor.s3.put_object(Bucket=BUCKET, Key="status.json", Body=b'{"ok": true}'),
    )

    with pytest.raises(Fenced) as refused:
        bucket.put_object(Bucket=BUCKET, Key="status.json", Body=b'{"ok": false}')

    assert refused.value.newer == successor.fence.value
    assert body_of("status.json") == b'{"ok": true}'
    head = boto3.client("s3").head_object(Bucket=BUCKET, Key="status.json")
    assert head["Metadata"][S3_FENCE_METADATA] == successor.fence.value


def test_s3_same_bytes_written_again_and_again_keeps_the_object_and_its_newest_fence(
    world: dict[str, str],
) -> None:
    """The same bytes from run after run: each put lands (the object as it was, the newest
    fence on it), whatever form the previous one left."""
    for token in (100, 200, 300):
        effects(world, token).s3.put_object(Bucket=BUCKET, Key="same", Body=b"same bytes")
        head = boto3.client("s3").head_object(Bucket=BUCKET, Key="same")
        assert head["Metadata"][S3_FENCE_METADATA] == RunFence.of_job("cleanup", "t1", token).value
    assert body_of("same") == b"same bytes"


def test_s3_a_delete_between_the_head_and_the_put_starts_over_not_fails(
    world: dict[str, str],
) -> None:
    """If-Match on an object deleted meanwhile answers 404 NoSuchKey: the object is gone, not
    changed by a newer run; the put starts over (and creates it, If-None-Match)."""
    effects(world, 50).s3.put_object(Bucket=BUCKET, Key="r.csv", Body=b"old")
    ours = effects(world, 100)
    bucket = ours.s3
    racing(bucket, lambda: boto3.client("s3").delete_object(Bucket=BUCKET, Key="r.csv"))

    bucket.put_object(Bucket=BUCKET, Key="r.csv", Body=b"ours")

    assert body_of("r.csv") == b"ours"


def test_s3_lost_races_to_another_writer_are_contention_retried_not_a_superseded_run(
    world: dict[str, str],
) -> None:
    """Another job writing the same object between every head and put is contention: no newer
    run of this job wrote there, so not ``Fenced`` (not retried, not alarmed) but
    :class:`FenceContention`, which fails the run for its retry (and its alarm)."""
    ours, other = effects(world, 100), effects(world, 900, job="another-job")
    bucket = ours.s3
    writes = iter(range(100))
    racing(
        bucket,
        lambda: other.s3.put_object(Bucket=BUCKET, Key="k", Body=f"{next(writes)}".encode()),
        times=100,
    )

    with pytest.raises(FenceContention, match="another writer") as lost:
        bucket.put_object(Bucket=BUCKET, Key="k", Body=b"ours")

    assert not isinstance(lost.value, Fenced)
    assert body_of("k") != b"ours"
    assert ours.halt.stop(returned=True) is None  # not noted as superseded


def test_s3_one_lost_race_to_another_writer_is_retried_and_lands(world: dict[str, str]) -> None:
    ours, other = effects(world, 100), effects(world, 900, job="another-job")
    bucket = ours.s3
    racing(bucket, lambda: other.s3.put_object(Bucket=BUCKET, Key="k", Body=b"theirs"), times=2)

    bucket.put_object(Bucket=BUCKET, Key="k", Body=b"ours")

    assert body_of("k") == b"ours"


def s3_checks_completions(client: Any) -> None:
    """What AWS does and moto 5.2.1 does not: ``CompleteMultipartUpload`` honours ``If-Match``
    (412 when the object's ETag is no longer the one given), checked as the request is sent."""

    def check(request: Any, **_: Any) -> None:
        expected = request.headers.get("If-Match")
        if expected is None:
            return
        expected = expected.decode() if isinstance(expected, bytes) else expected
        key = request.url.split("?")[0].rsplit("/", 1)[-1]  # the tests' keys have no "/"
        head = boto3.client("s3").head_object(Bucket=BUCKET, Key=key)
        if head["ETag"] != expected:
            raise ClientError(
                {"Error": {"Code": "PreconditionFailed", "Message": "a pre-condition failed"}},
                "CompleteMultipartUpload",
            )

    client.meta.events.register("before-send.s3.CompleteMultipartUpload", check)


def test_s3_a_same_bytes_put_that_loses_its_race_at_completion_starts_over(
    world: dict[str, str],
) -> None:
    """The one-part upload is completed on the ETag the head read: another writer's put in
    between refuses it (the upload aborted), and the next round puts the bytes whole."""
    counted = Counted()
    effects(world, 50).s3.put_object(Bucket=BUCKET, Key="k", Body=b"same")
    ours, other = effects(world, 100, counted), effects(world, 900, job="another-job")
    s3_checks_completions(ours._aws("s3"))
    bucket = ours.s3
    racing(bucket, lambda: other.s3.put_object(Bucket=BUCKET, Key="k", Body=b"theirs"))

    bucket.put_object(Bucket=BUCKET, Key="k", Body=io.BytesIO(b"same"))

    assert body_of("k") == b"same"
    assert counted.calls == [
        "HeadObject",
        "CreateMultipartUpload",
        "UploadPart",
        "CompleteMultipartUpload",
        "AbortMultipartUpload",
        "HeadObject",
        "PutObject",
    ]
    assert boto3.client("s3").list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
