"""Tables made by hand for emulator tests that need one outside the synthesized stack."""

from __future__ import annotations

from typing import Any


def create_table(dynamodb: Any, name: str, *keys: str, **extra: Any) -> str:
    """An on-demand table keyed by string attributes (a partition key, and a sort key when a
    second is given); ``extra`` goes to CreateTable as it is (a stream specification, say)."""
    dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": key, "KeyType": kind}
            for key, kind in zip(keys, ("HASH", "RANGE"), strict=False)
        ],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"} for key in keys],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    return name


def create_pk_sk_table(dynamodb: Any, name: str, **extra: Any) -> str:
    """An on-demand table keyed like Vigil's own (``pk`` string, ``sk`` string)."""
    return create_table(dynamodb, name, "pk", "sk", **extra)
