"""A job, task or observer that does not write through ``run.fenced`` pays nothing for it."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_decorators_the_observer_runtime_and_a_job_run_load_none_of_them() -> None:
    """Importing the decorators, the observer runtime and the example job, and then a whole run
    through the guard (claim, body, finish, and a failing run's path, which asks whether the
    error was a refused fenced write), loads none of them. One interpreter for all of it."""
    probe = """
import sys
from datetime import UTC, datetime, timedelta
import vigil.jobs, vigil.jobs.decorator, vigil.tasks.decorator, vigil.observers.runtime
import jobs.cleanup
import boto3
from moto import mock_aws
from vigil.clock import ManualClock
from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard
from vigil.jobs.model import JobSettings
from vigil.jobs.store import RunStore

when = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
with mock_aws():
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName="runs", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in ("pk", "sk")],
    )
    settings = JobSettings(job="j", table="runs", lease_margin=timedelta(seconds=5))
    guard = JobGuard(settings, RunStore(client, "runs"), ManualClock(when))
    guard.execute(Tick(job="j", scheduled_at=when, source="scheduler"), lambda run: None,
                  remaining_ms=lambda: 10_000, holder="a")
    def fails(run):
        raise RuntimeError("body failed")
    try:
        guard.execute(Tick(job="j", scheduled_at=when + timedelta(minutes=5), source="scheduler"),
                      fails, remaining_ms=lambda: 10_000, holder="a")
    except RuntimeError:
        pass
print(sorted(m for m in sys.modules if m.startswith(("vigil.effects", "vigil.contract.effects"))))
"""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    assert shown.stdout.strip() == "[]"
