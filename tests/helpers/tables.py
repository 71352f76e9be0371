"""Tables made by hand for emulator tests that need one outside the synthesized stack."""

from __future__ import annotations

from typing import Any


def create_table(
    dynamodb: Any, name: str, *keys: str, keyed: tuple[str, ...] = (), **extra: Any
) -> str:
    """An on-demand table keyed by string attributes (a partition key, and a sort key when a
    second is given); ``keyed``: more string attributes an index keys on; ``extra`` goes to
    CreateTable as it is (a stream specification, an index)."""
    dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": key, "KeyType": kind}
            for key, kind in zip(keys, ("HASH", "RANGE"), strict=False)
        ],
        AttributeDefinitions=[
            {"AttributeName": key, "AttributeType": "S"} for key in (*keys, *keyed)
        ],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )
    return name


def create_pk_sk_table(
    dynamodb: Any, name: str, *, keyed: tuple[str, ...] = (), **extra: Any
) -> str:
    """An on-demand table keyed like Vigil's own (``pk`` string, ``sk`` string)."""
    return create_table(dynamodb, name, "pk", "sk", keyed=keyed, **extra)


def create_tasks_table(dynamodb: Any, name: str = "vigil-tasks") -> str:
    """The tasks table as ``TasksTable`` declares it: pk/sk and the sparse ``retries`` and
    ``deadlines`` indexes (``tests/infra`` checks the synthesized one is this)."""
    from vigil.contract.tasks import (
        DEADLINE_ATTRIBUTE,
        DEADLINES_INDEX,
        RETRIES_INDEX,
        RETRY_AT_ATTRIBUTE,
    )

    return create_pk_sk_table(
        dynamodb,
        name,
        keyed=(RETRY_AT_ATTRIBUTE, DEADLINE_ATTRIBUTE),
        GlobalSecondaryIndexes=[
            {
                "IndexName": index,
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
            for index, sort_key in (
                (RETRIES_INDEX, RETRY_AT_ATTRIBUTE),
                (DEADLINES_INDEX, DEADLINE_ATTRIBUTE),
            )
        ],
    )
