"""moto's tracker and rollback copy, and the workaround that keeps the local stack flat.

The first tests pin what ``vigil_tools.emulator.moto_memory`` relies on in moto itself: they fail
the day a moto upgrade changes it (then adapt the module, or drop it if moto fixed the leak)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.helpers.tables import create_pk_sk_table
from vigil_tools.emulator import moto_memory
from vigil_tools.emulator.streams import StreamMapping

TABLE = "memory"


@pytest.fixture
def as_is() -> Iterator[None]:
    was = moto_memory.installed()
    moto_memory.uninstall()
    yield
    if was:
        moto_memory.install()


@pytest.fixture
def lean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(moto_memory.AS_IS, raising=False)
    was = moto_memory.installed()
    assert moto_memory.install()
    yield
    if not was:
        moto_memory.uninstall()


@pytest.fixture
def table(dynamodb: Any) -> str:
    return create_pk_sk_table(
        dynamodb,
        TABLE,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )


def _backend_table() -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends["123456789012"]["us-east-1"].tables[TABLE]


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "p"}, "sk": {"S": sk}}


def _set(sk: str, value: str, condition: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "TableName": TABLE,
        "Key": _key(sk),
        "UpdateExpression": "SET v = :v",
        "ExpressionAttributeValues": {":v": {"S": value}},
    }
    if condition:
        update["ConditionExpression"] = condition
    return {"Update": update}


def _items(dynamodb: Any) -> dict[str, str]:
    rows = dynamodb.scan(TableName=TABLE)["Items"]
    return {row["sk"]["S"]: row.get("v", {}).get("S", "") for row in rows}


# --- what the workaround relies on in moto ------------------------------------------------------


def test_moto_still_tracks_every_model_instance_in_its_class_list(as_is: None, aws: None) -> None:
    from moto.core.common_models import BaseModel
    from moto.core.model_instances import model_data, reset_model_data
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    assert "__new__" in BaseModel.__dict__
    item = Item(DynamoType({"S": "p"}), None, {"pk": {"S": "p"}})
    assert item in Item.instances_tracked  # type: ignore[attr-defined]
    assert model_data["dynamodb"]["Item"] is Item
    assert callable(reset_model_data)


def test_moto_still_copies_each_table_for_its_transaction_rollback(as_is: None) -> None:
    from moto.dynamodb import models

    source = inspect.getsource(models.DynamoDBBackend.transact_write_items)
    assert "copy.deepcopy(\n                    self.tables[table_name]" in source
    assert "self.tables[table_name] = original_table_state[table_name]" in source
    assert getattr(models, "copy").deepcopy is __import__("copy").deepcopy  # noqa: B009
    assert inspect.signature(models.DynamoDBBackend.get_keys_value).parameters.keys() == {
        "self",
        "table",
        "keys",
    }
    for attribute in ("items", "stream_shard", "get_item", "has_range_key", "hash_key_attr"):
        assert attribute in dir(models.Table) or attribute in inspect.getsource(
            models.Table.__init__
        )


def test_without_the_workaround_a_cancelled_transaction_swaps_the_table(
    as_is: None, dynamodb: Any, table: str
) -> None:
    before = _backend_table()
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(TransactItems=[_set("a", "1", "attribute_exists(v)")])
    assert _backend_table() is not before


# --- the workaround --------------------------------------------------------------------------


def test_with_the_workaround_no_item_or_stream_record_is_tracked(
    lean: None, dynamodb: Any, table: str
) -> None:
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import StreamRecord, Table

    for n in range(20):
        dynamodb.transact_write_items(TransactItems=[_set(f"k{n}", "v"), _set(f"j{n}", "w")])
    for model in (Item, StreamRecord, Table):
        assert model.instances_tracked == []  # type: ignore[attr-defined]


def test_a_transaction_copies_the_items_it_names_not_the_table(
    lean: None, dynamodb: Any, table: str
) -> None:
    for n in range(50):
        dynamodb.put_item(TableName=TABLE, Item={**_key(f"k{n}"), "v": {"S": "x"}})
    before = _backend_table()
    copied: list[Any] = []
    import copy

    real = copy.deepcopy

    def counting(value: Any, memo: Any = None, _nil: Any = None) -> Any:
        copied.append(value)
        return real(value, memo)

    from moto.dynamodb.models.dynamo_type import Item

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(copy, "deepcopy", counting)
        dynamodb.transact_write_items(TransactItems=[_set("k1", "y"), _set("new", "z")])
    top_level_items = [c for c in copied if isinstance(c, Item)]
    assert len(top_level_items) <= 4  # the saved item, and moto's own copy in update_item
    assert _backend_table() is before
    assert _items(dynamodb)["k1"] == "y" and _items(dynamodb)["new"] == "z"


def test_a_cancelled_transaction_changes_nothing_with_the_workaround(
    lean: None, dynamodb: Any, table: str
) -> None:
    dynamodb.put_item(TableName=TABLE, Item={**_key("a"), "v": {"S": "before"}})
    table_object = _backend_table()
    stream = len(table_object.stream_shard.items)
    with pytest.raises(ClientError) as refused:
        dynamodb.transact_write_items(
            TransactItems=[
                _set("a", "after"),  # applied by moto, then rolled back
                _set("b", "new"),  # created, then removed
                {
                    "Put": {
                        "TableName": TABLE,
                        "Item": {**_key("c"), "v": {"S": "put"}},
                        "ConditionExpression": "attribute_exists(pk)",  # refused
                    }
                },
            ]
        )
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _items(dynamodb) == {"a": "before"}
    assert _backend_table() is table_object  # a stream iterator on it stays good
    assert len(table_object.stream_shard.items) == stream
    dynamodb.transact_write_items(TransactItems=[_set("a", "later")])
    assert _items(dynamodb) == {"a": "later"}


def test_a_transaction_refused_as_invalid_changes_nothing_with_the_workaround(
    lean: None, dynamodb: Any, table: str
) -> None:
    dynamodb.put_item(TableName=TABLE, Item={**_key("a"), "v": {"S": "before"}})
    with pytest.raises(ClientError):  # two operations on one item: ValidationException
        dynamodb.transact_write_items(TransactItems=[_set("a", "x"), _set("a", "y")])
    assert _items(dynamodb) == {"a": "before"}


def test_as_is_leaves_moto_untouched(monkeypatch: pytest.MonkeyPatch, as_is: None) -> None:
    monkeypatch.setenv(moto_memory.AS_IS, "1")
    assert moto_memory.install() is False
    assert not moto_memory.installed()


# --- the stream trim ----------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _stream(table: str = TABLE) -> StreamMapping:
    """The in-process poller on the table's stream, from its start (what ``local up`` runs)."""
    session = boto3.session.Session(region_name="us-east-1")
    arn = session.client("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]
    stream = StreamMapping(session, "reconciler", {"EventSourceArn": arn})
    stream._position("TRIM_HORIZON")
    return stream


def _put(dynamodb: Any, *sks: str) -> None:
    for sk in sks:
        dynamodb.put_item(TableName=TABLE, Item={**_key(sk), "v": {"S": "x"}})


def _iterators() -> dict[str, Any]:
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    return dynamodbstreams_backends["123456789012"]["us-east-1"].shard_iterators


def test_moto_still_keeps_every_stream_record_and_iterator_numbered_from_the_shard_start(
    as_is: None, dynamodb: Any, table: str
) -> None:
    """What ``trim_shard`` relies on: records in ``items`` at ``sequence number -
    starting_sequence_number``, numbered ``start + len`` when written, iterators starting there,
    and every iterator kept in ``shard_iterators`` (insertion-ordered, never removed)."""
    from moto.dynamodb.models.table import StreamShard
    from moto.dynamodbstreams.models import ShardIterator

    _put(dynamodb, "a", "b", "c")
    shard = _backend_table().stream_shard
    assert isinstance(shard, StreamShard)
    start = shard.starting_sequence_number
    assert [int(r.record["dynamodb"]["SequenceNumber"]) for r in shard.items] == [
        start,
        start + 1,
        start + 2,
    ]
    assert "len(self.items) + self.starting_sequence_number" in inspect.getsource(StreamShard.add)
    assert "start -= self.starting_sequence_number" in inspect.getsource(StreamShard.get)
    assert "stream_shard.starting_sequence_number + len(" in inspect.getsource(ShardIterator)
    before = len(_iterators())
    assert len(_stream().poll()) == 3
    assert len(_iterators()) >= before + 3  # the TRIM_HORIZON one, then one per get_records


def test_the_trim_drops_records_the_poller_passed_and_a_later_write_still_arrives(
    lean: None, dynamodb: Any, table: str
) -> None:
    stream = _stream()
    trim = moto_memory.StreamTrim("123456789012", "us-east-1")
    _put(dynamodb, "a", "b", "c")
    assert trim.trim(T0, stream.passed()) == 0  # nothing read yet, nothing 24 h old
    first = stream.poll()
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in first] == ["a", "b", "c"]
    _put(dynamodb, "d")  # written, not read: it stays
    assert trim.trim(T0 + timedelta(minutes=1), stream.passed()) == 3
    assert len(_backend_table().stream_shard.items) == 1
    _put(dynamodb, "e")
    later = stream.poll()
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in later] == ["d", "e"]
    numbers = [int(r["dynamodb"]["SequenceNumber"]) for r in first + later]
    assert numbers == list(range(numbers[0], numbers[0] + 5))  # numbering unchanged by the trim
    assert trim.trim(T0 + timedelta(minutes=2), stream.passed()) == 2
    _put(dynamodb, "f")
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in _stream().poll()] == ["f"]  # TRIM_HORIZON


def test_without_a_reader_records_leave_at_24_hours_and_iterators_at_15_minutes(
    lean: None, dynamodb: Any, table: str
) -> None:
    trim = moto_memory.StreamTrim("123456789012", "us-east-1")
    _put(dynamodb, "a", "b")
    trim.trim(T0, {})
    _put(dynamodb, "c")
    _stream().poll()
    handed = len(_iterators())
    trim.trim(T0 + timedelta(minutes=10), {})
    assert len(_iterators()) == handed
    trim.trim(T0 + timedelta(minutes=16), {})  # none were handed out by T0
    assert len(_iterators()) == handed
    trim.trim(T0 + timedelta(minutes=25), {})  # those noted at T0+10 are 15 minutes old
    assert _iterators() == {}
    assert trim.trim(T0 + timedelta(hours=23), {}) == 0
    assert trim.trim(T0 + timedelta(hours=24), {}) == 2  # written before the T0 checkpoint
    assert trim.trim(T0 + timedelta(hours=25), {}) == 1
    assert _backend_table().stream_shard.items == []
