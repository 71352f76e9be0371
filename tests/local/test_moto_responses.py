"""``vigil_tools.emulator.moto_responses``: moto's responses, the same bytes, picked faster.

The first test pins the moto code the workaround relies on (it answers for moto's picker, so it
fails the day a moto upgrade changes how the picker or its providers choose a name: then re-read
them and adapt the module, or drop it). The others serialize every response of a spread of
requests twice, with and without the workaround, and compare the bytes.
"""

from __future__ import annotations

import hashlib
import inspect
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import serialize, utils

from vigil_tools.emulator import moto_responses

REGION = "us-east-1"

PINNED = {
    "ResponseSerializer.get_value": "5ac16904b91c2935",
    "AttributePicker.__call__": "c15da8ec29c1afa4",
    "AttributePicker.get_possible_keys": "cb284052c5ea7fe1",
    "XFormedAttributePicker.get_possible_keys": "f0d20f55f37fd8a1",
    "ExplicitAlias": "50e6df2c5ef1bb8c",
    "NoAlias": "54b6a9dd71d3de73",
    "ModelAlias": "dc305f0cc88422f9",
    "ShapePrefixAlias": "bc24d299803babd2",
    "ClassPrefixAlias": "badfb8d077e500ff",
    "ShapeNameAlias": "3aac05bf01b44d5c",
    "DEFAULT_ALIAS_PROVIDERS": "6a337b748417beed",
    "utils.get_value": "9b06b87ce416131e",
    "utils._get_value_for_key": "563aa7bc75bd5bb0",
}
"""The first 16 hex digits of the sha256 of each piece's source in moto 5.2.1."""


def _source(name: str) -> str:
    if name == "DEFAULT_ALIAS_PROVIDERS":
        return ",".join(provider.__name__ for provider in serialize.DEFAULT_ALIAS_PROVIDERS)
    if name == "ResponseSerializer.get_value":  # moto's own, whether or not it is installed
        return inspect.getsource(
            moto_responses._original.get("get_value", serialize.ResponseSerializer.get_value)
        )
    owner, _, attribute = name.partition(".")
    piece = utils if owner == "utils" else getattr(serialize, owner)
    return inspect.getsource(getattr(piece, attribute) if attribute else piece)


def test_the_moto_code_the_workaround_answers_for_is_unchanged() -> None:
    changed = {
        name: digest
        for name, pinned in PINNED.items()
        if (digest := hashlib.sha256(_source(name).encode()).hexdigest()[:16]) != pinned
    }
    assert changed == {}


@pytest.fixture
def compared() -> Iterator[Counter[str]]:
    """Every response serialized both ways; the counter says which operations were compared."""
    moto_responses.install()
    as_is = moto_responses._original["get_value"]
    fast = serialize.ResponseSerializer.get_value
    original_serialize = serialize.ResponseSerializer.serialize
    seen: Counter[str] = Counter()

    def both_ways(serializer: Any, result: Any) -> Any:
        answered = original_serialize(serializer, result)
        serialize.ResponseSerializer.get_value = as_is  # type: ignore[method-assign]
        try:
            expected = original_serialize(serializer, result)
        finally:
            serialize.ResponseSerializer.get_value = fast  # type: ignore[method-assign]
        assert answered == expected, serializer.operation_model.name
        seen[serializer.operation_model.name] += 1
        return answered

    serialize.ResponseSerializer.serialize = both_ways  # type: ignore[method-assign]
    try:
        with mock_aws():
            yield seen
    finally:
        serialize.ResponseSerializer.serialize = original_serialize  # type: ignore[method-assign]


ITEM = {
    "pk": {"S": "observer#1"},
    "n": {"N": "42"},
    "blob": {"B": b"\x00\x01binary"},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "strings": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [b"x", b"y"]},
    "list": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"deep": {"L": []}}}]},
    "map": {"M": {"journal": {"M": {"email": {"S": "DONE"}}}, "empty": {"M": {}}}},
}


def test_dynamodb_and_its_streams_answer_the_same_bytes(compared: Counter[str]) -> None:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    table = dynamodb.create_table(
        TableName="registry",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]
    dynamodb.put_item(TableName="registry", Item=ITEM)
    assert dynamodb.get_item(TableName="registry", Key={"pk": ITEM["pk"]})["Item"] == ITEM
    updated = dynamodb.update_item(
        TableName="registry",
        Key={"pk": ITEM["pk"]},
        UpdateExpression="SET n = n + :one, #m.journal.report = :done",
        ExpressionAttributeNames={"#m": "map"},
        ExpressionAttributeValues={":one": {"N": "1"}, ":done": {"S": "INTENT"}},
        ReturnValues="ALL_NEW",
    )["Attributes"]
    assert updated["n"] == {"N": "43"}
    dynamodb.query(
        TableName="registry",
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": ITEM["pk"]},
        ReturnConsumedCapacity="TOTAL",
    )
    dynamodb.scan(TableName="registry", ProjectionExpression="pk, flag")
    dynamodb.batch_get_item(RequestItems={"registry": {"Keys": [{"pk": ITEM["pk"]}]}})
    dynamodb.transact_get_items(
        TransactItems=[{"Get": {"TableName": "registry", "Key": {"pk": ITEM["pk"]}}}]
    )
    with pytest.raises(dynamodb.exceptions.ConditionalCheckFailedException):
        dynamodb.put_item(
            TableName="registry",
            Item=ITEM,
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    dynamodb.describe_table(TableName="registry")
    dynamodb.delete_item(TableName="registry", Key={"pk": ITEM["pk"]}, ReturnValues="ALL_OLD")

    streams = boto3.client("dynamodbstreams", region_name=REGION)
    shard = streams.describe_stream(StreamArn=table["LatestStreamArn"])["StreamDescription"]
    iterator = streams.get_shard_iterator(
        StreamArn=table["LatestStreamArn"],
        ShardId=shard["Shards"][0]["ShardId"],
        ShardIteratorType="TRIM_HORIZON",
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    assert [record["eventName"] for record in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert records[0]["dynamodb"]["NewImage"]["blob"] == {"B": b"\x00\x01binary"}
    assert {"PutItem", "UpdateItem", "Query", "GetRecords", "DescribeTable"} <= set(compared)
    assert moto_responses._names  # the fast path picked them


def test_the_other_services_vigil_runs_answer_the_same_bytes(compared: Counter[str]) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="runs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    sqs.send_message(
        QueueUrl=queue,
        MessageBody="{}",
        MessageGroupId="g",
        MessageDeduplicationId="d",
        MessageAttributes={"Vigil-Fence": {"DataType": "Number", "StringValue": "7"}},
    )
    sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"], AttributeNames=["All"])
    sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])

    ecs = boto3.client("ecs", region_name=REGION)
    ecs.create_cluster(clusterName="observers")
    ecs.register_task_definition(
        family="ticker",
        containerDefinitions=[{"name": "observer", "image": "vigil", "memory": 512}],
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="256",
        memory="512",
    )
    ecs.describe_task_definition(taskDefinition="ticker")
    ecs.list_task_definitions()

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="effects")
    s3.put_object(Bucket="effects", Key="k", Body=b"body", Metadata={"vigil-fence": "3"})
    s3.head_object(Bucket="effects", Key="k")
    s3.list_objects_v2(Bucket="effects")

    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    cloudwatch.put_metric_alarm(
        AlarmName="Vigil-ObserverUncertain",
        MetricName="ObserverUncertain",
        Namespace="Vigil",
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
    )
    cloudwatch.describe_alarms()

    assert {"ReceiveMessage", "DescribeTaskDefinition", "DescribeAlarms", "ListObjectsV2"} <= set(
        compared
    )


def test_the_cache_starts_again_past_its_bound(
    compared: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(moto_responses, "CACHED_MEMBERS", 3)
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.list_tables()
    dynamodb.describe_endpoints()
    assert 0 < len(moto_responses._names) <= 3


def test_as_is_leaves_moto_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    was = moto_responses.installed()
    moto_responses.uninstall()
    try:
        monkeypatch.setenv("VIGIL_MOTO_AS_IS", "1")
        assert moto_responses.install() is False
        assert not moto_responses.installed()
        assert serialize.ResponseSerializer.get_value.__module__ == "moto.core.serialize"
    finally:
        monkeypatch.delenv("VIGIL_MOTO_AS_IS")
        if was:
            moto_responses.install()
