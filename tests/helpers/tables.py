"""Tables made by hand for emulator tests that need one outside the synthesized stack."""

from __future__ import annotations

from typing import Any


def create_pk_sk_table(dynamodb: Any, name: str, **extra: Any) -> str:
    """An on-demand table keyed like Vigil's own (``pk`` string, ``sk`` string); ``extra`` goes
    to CreateTable as it is (a stream specification, say)."""
    dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    return name
