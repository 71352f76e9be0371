"""What a benchmark needs before it talks to moto: credentials botocore can sign with (moto takes
any) and a region. Set only where the caller has none, so a run never reaches real AWS by way of
a half-configured environment, and a caller's own settings stay."""

from __future__ import annotations

import os
from typing import Any

REGION = "us-east-1"


def offline_aws(region: str = REGION) -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "benchmark")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "benchmark")
    os.environ.setdefault("AWS_DEFAULT_REGION", region)


def create_tasks_table(dynamodb: Any, name: str) -> None:
    """A tasks table keyed as the template keys it (``pk``/``sk``, on demand), for benchmarks
    that measure the library's requests without the synth ``emulator.template.create_table``
    costs."""
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
    )
