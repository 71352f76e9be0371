"""Helpers for the jobs tests: ticks, recording bodies, and clients that crash or collide."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from vigil.jobs.events import Tick
from vigil.jobs.guard import JobGuard, Result, Run
from vigil_tools.lambda_context import LambdaContext

GuardFactory = Callable[..., JobGuard]


def tick_at(moment: datetime, job: str | None = "cleanup") -> Tick:
    return Tick(job=job, scheduled_at=moment, source="scheduler")


class Body:
    """A job body that records its calls and can fail or run code mid-run."""

    def __init__(self, fail: int = 0, during: Callable[[Run], Any] | None = None) -> None:
        self.calls: list[Run] = []
        self._fail = fail
        self._during = during

    def __call__(self, run: Run) -> None:
        self.calls.append(run)
        if self._during:
            self._during(run)
        if len(self.calls) <= self._fail:
            raise RuntimeError(f"boom #{len(self.calls)}")


def deliver(guard: JobGuard, tick: Tick, body: Body, remaining: int = 60_000) -> Result:
    return guard.execute(tick, body, remaining_ms=lambda: remaining, holder=str(id(body)))


def context(remaining: int = 60_000) -> LambdaContext:
    return LambdaContext(remaining_ms=lambda: remaining)


LEASE = timedelta(seconds=60 + 30)


class CrashAfterClaim:
    """A DynamoDB client for a process that dies right after its claim: nothing else is written."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._transactions = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **kwargs: Any) -> Any:
        self._transactions += 1
        if self._transactions > 1:
            raise SystemExit("the process was killed")
        return self._client.transact_write_items(**kwargs)


class ConflictsFirst:
    """A DynamoDB client whose first N transactions collide with another one (real DynamoDB
    cancels them with ``TransactionConflict``; moto, which serializes requests, never does)."""

    def __init__(self, client: Any, conflicts: int) -> None:
        self._client = client
        self.conflicts = conflicts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self.conflicts > 0:
            self.conflicts -= 1
            from botocore.exceptions import ClientError

            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": [
                        {"Code": "TransactionConflict"},
                        {"Code": "None"},
                    ],
                },
                "TransactWriteItems",
            )
        return self._client.transact_write_items(**kwargs)
