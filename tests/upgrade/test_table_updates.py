"""The emulator updates a DynamoDB table in place as CloudFormation does (deletion protection,
global indexes added or deleted, items kept), and refuses, naming the table and what changed, an
update it does not model (moto alone left no table behind, and the next reference to it failed
"undefined resource"). Cost: ms."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.table import Table

from vigil_tools.emulator.moto_updates import install, table_changes

ACCOUNT, REGION = "123456789012", "us-east-1"
KEY = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}]
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
INDEX = {"IndexName": "by", "KeySchema": KEY, "Projection": {"ProjectionType": "KEYS_ONLY"}}


@pytest.fixture
def backend() -> Iterator[Any]:
    backend = dynamodb_backends[ACCOUNT][REGION]
    yield backend
    backend.tables.pop("t", None)


def table(backend: Any, *, indexes: list[dict[str, Any]] | None = None, **kwargs: Any) -> Any:
    return backend.create_table(
        "t",
        schema=KEY,
        throughput=None,
        attr=ATTRIBUTES,
        global_indexes=indexes,
        indexes=None,
        streams=STREAM,
        billing_mode="PAY_PER_REQUEST",
        sse_specification=None,
        tags=[],
        deletion_protection_enabled=kwargs.get("deletion_protection_enabled"),
        warm_throughput=None,
    )


def properties(**changes: Any) -> dict[str, Any]:
    return {
        "KeySchema": KEY,
        "AttributeDefinitions": ATTRIBUTES,
        "StreamSpecification": {"StreamViewType": "NEW_IMAGE"},
        **changes,
    }


def update(original: Any, new: dict[str, Any]) -> Any:
    install()
    return Table.update_from_cloudformation_json(  # type: ignore[call-arg]
        original_resource=original,
        new_resource_name="t",
        cloudformation_json={"Type": "AWS::DynamoDB::Table", "Properties": new},
        account_id=ACCOUNT,
        region_name=REGION,
    )


def test_deletion_protection_changes_in_place_and_the_table_keeps_its_items(backend: Any) -> None:
    original = table(backend, deletion_protection_enabled=True)
    original.items["a"] = "kept"
    updated = update(original, properties(DeletionProtectionEnabled=False))
    assert updated is original and updated.items["a"] == "kept"
    assert updated.deletion_protection_enabled is False


def test_an_index_added_or_deleted_is_applied_and_the_table_keeps_its_items(
    backend: Any,
) -> None:
    original = table(backend)
    original.items["a"] = "kept"
    updated = update(original, properties(GlobalSecondaryIndexes=[INDEX]))
    assert updated is original and updated.items["a"] == "kept"
    assert [i.name for i in updated.global_indexes] == ["by"]
    assert [i.name for i in update(original, properties()).global_indexes] == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"KeySchema": [{"AttributeName": "other", "KeyType": "HASH"}]}, "KeySchema"),
        ({"StreamSpecification": {"StreamViewType": "KEYS_ONLY"}}, "StreamSpecification"),
        (
            {
                "GlobalSecondaryIndexes": [
                    {**INDEX, "KeySchema": [{"AttributeName": "other", "KeyType": "HASH"}]}
                ]
            },
            "GlobalSecondaryIndexes",
        ),
    ],
)
def test_an_update_it_does_not_model_is_refused_naming_it(
    backend: Any, change: dict[str, Any], named: str
) -> None:
    original = table(backend, indexes=[INDEX])
    assert table_changes(original, properties(**change)) == [named]
    with pytest.raises(ValueError, match=rf"updates table t only in place, and {named} changed"):
        update(original, properties(**change))
    assert original.schema == KEY
