"""The emulator updates a DynamoDB table in place as CloudFormation does for deletion protection,
and refuses, naming the table and what changed, an update it does not model (moto alone left no
table behind, and the next reference to it failed "undefined resource"). Cost: ms."""

from __future__ import annotations

from typing import Any

import pytest
from moto.dynamodb.models.table import Table

from vigil_tools.emulator.moto_updates import install, table_changes

KEY = [{"AttributeName": "pk", "KeyType": "HASH"}]


def table(**kwargs: Any) -> Table:
    attr = [{"AttributeName": "pk", "AttributeType": "S"}]
    return Table("t", "123456789012", "us-east-1", schema=KEY, attr=attr, **kwargs)


def properties(**changes: Any) -> dict[str, Any]:
    return {"KeySchema": KEY, "StreamSpecification": {"StreamViewType": "NEW_IMAGE"}, **changes}


def update(original: Table, new: dict[str, Any]) -> Any:
    install()
    return Table.update_from_cloudformation_json(
        original_resource=original,
        new_resource_name="t",
        cloudformation_json={"Type": "AWS::DynamoDB::Table", "Properties": new},
        account_id="123456789012",
        region_name="us-east-1",
    )


def test_deletion_protection_changes_in_place_and_the_table_keeps_its_items() -> None:
    original = table(streams={"StreamViewType": "NEW_IMAGE"}, deletion_protection_enabled=True)
    original.items["a"] = "kept"
    updated = update(original, properties(DeletionProtectionEnabled=False))
    assert updated is original and updated.items["a"] == "kept"
    assert updated.deletion_protection_enabled is False


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"KeySchema": [{"AttributeName": "other", "KeyType": "HASH"}]}, "KeySchema"),
        ({"StreamSpecification": {"StreamViewType": "KEYS_ONLY"}}, "StreamSpecification"),
        (
            {"GlobalSecondaryIndexes": [{"IndexName": "by", "KeySchema": KEY}]},
            "GlobalSecondaryIndexes",
        ),
    ],
)
def test_an_update_it_does_not_model_is_refused_naming_it(
    change: dict[str, Any], named: str
) -> None:
    original = table(streams={"StreamViewType": "NEW_IMAGE"})
    assert table_changes(original, properties(**change)) == [named]
    with pytest.raises(ValueError, match=rf"updates table t only in place, and {named} changed"):
        update(original, properties(**change))
    assert original.schema == KEY
