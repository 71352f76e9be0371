"""What a benchmark needs before it talks to moto: credentials botocore can sign with (moto takes
any) and a region. Set only where the caller has none, so a run never reaches real AWS by way of
a half-configured environment, and a caller's own settings stay."""

from __future__ import annotations

import os

REGION = "us-east-1"


def offline_aws(region: str = REGION) -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "benchmark")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "benchmark")
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
