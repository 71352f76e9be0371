"""``vigil local up``'s deliveries: Ctrl-C ends a pending retry delay at once (every delay waits on
the one stop event), so stopping never waits one out and the retry never runs."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.helpers.lambdas import deploy_function
from vigil_tools.emulator.lambda_runtime import AsyncInvocation
from vigil_tools.local.live import Deliveries, SerialLambda

HANDLER = "down_for_now"
DEADLINE = 30.0
"""Seconds a step may take before the test calls it stuck (the retry delay is 60 s)."""


class WatchedStop(threading.Event):
    """The stop event, telling the test when a delivery has started waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waited_on = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waited_on.set()
        return super().wait(timeout)


@pytest.fixture
def failing_function(aws: None, tmp_path: Path) -> Iterator[Any]:
    """A deployed function that fails every attempt (Lambda retries it twice, a minute apart)."""
    session = boto3.session.Session(region_name="us-east-1")
    deploy_function(
        session,
        tmp_path,
        HANDLER,
        "ATTEMPTS = []\ndef handler(event, context):\n"
        "    ATTEMPTS.append(event)\n    raise RuntimeError('down')\n",
    )
    yield session
    sys.path.remove(str(tmp_path))
    sys.modules.pop(HANDLER, None)


def test_stopping_ends_a_pending_retry_delay_at_once(failing_function: Any, tmp_path: Path) -> None:
    stop = WatchedStop()
    deliveries = Deliveries(stop, speed=1.0)
    runtime = SerialLambda(
        failing_function,
        now=lambda: datetime.now(UTC),
        advance=deliveries.delay,
        functions_dir=tmp_path,
    )
    delivered: list[AsyncInvocation] = []
    deliveries.submit(lambda: delivered.append(runtime.invoke_async("f", {"n": 1})))
    assert stop.waited_on.wait(DEADLINE), "the first attempt never failed"

    closing = threading.Thread(target=deliveries.close)
    closing.start()
    closing.join(DEADLINE)  # the delay is 60 s: only an interrupted wait ends before the deadline

    assert not closing.is_alive(), "close() waited out the retry delay"
    # nothing left for the interpreter to join at exit (it would wait the delay out)
    assert [t for t in threading.enumerate() if t.name.startswith("delivery")] == []
    assert sys.modules[HANDLER].ATTEMPTS == [{"n": 1}]  # the retry never ran
    assert delivered == []  # abandoned: no on-failure record either
