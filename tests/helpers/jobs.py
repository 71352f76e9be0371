"""Helpers for the jobs tests: ticks, recording bodies, and clients that crash or collide."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from tests.helpers.clients import Delegating
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


class CrashAfterClaim(Delegating):
    """A DynamoDB client for a process that dies right after its claim: nothing else is written."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self._transactions = 0

    def transact_write_items(self, **kwargs: Any) -> Any:
        self._transactions += 1
        if self._transactions > 1:
            raise SystemExit("the process was killed")
        return self._client.transact_write_items(**kwargs)


class ConflictsFirst(Delegating):
    """A DynamoDB client whose first N transactions collide with another one (real DynamoDB
    cancels them with ``TransactionConflict``; moto, which serializes requests, never does)."""

    def __init__(self, client: Any, conflicts: int) -> None:
        super().__init__(client)
        self.conflicts = conflicts

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


def throttled(
    operation: str = "TransactWriteItems",
    code: str = "ProvisionedThroughputExceededException",
    status: int = 400,
) -> Any:
    """What boto3 raises once its own retries of a throttled request are spent (DynamoDB's
    throttle by default; SQS's is ``RequestThrottled``, 403)."""
    from botocore.exceptions import ClientError

    return ClientError(
        {
            "Error": {"Code": code, "Message": "throttled"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation,
    )


def server_error(operation: str = "TransactWriteItems") -> Any:
    """A 500 answer: DynamoDB may or may not have applied the request."""
    from botocore.exceptions import ClientError

    return ClientError(
        {
            "Error": {"Code": "InternalServerError", "Message": "internal error"},
            "ResponseMetadata": {"HTTPStatusCode": 500},
        },
        operation,
    )


def denied(operation: str = "TransactWriteItems") -> Any:
    """A final answer (not retried by ``persist``): nothing applied, and no retry will help."""
    from botocore.exceptions import ClientError

    return ClientError(
        {
            "Error": {"Code": "AccessDeniedException", "Message": "denied"},
            "ResponseMetadata": {"HTTPStatusCode": 400},
        },
        operation,
    )


class FaultyTransactions(Delegating):
    """A DynamoDB client whose transactions fail as planned, one entry per call in order:
    ``"throttled"`` (refused before anything was applied, botocore's retries spent),
    ``"applied"`` (applied, then answered with a 500: a timeout after DynamoDB applied the write),
    ``"denied"`` (a final error, nothing applied),
    ``None`` (passed through). Past the plan, ``always`` (None by default) applies to every call.
    Every ``ClientRequestToken`` sent is kept in ``tokens``."""

    def __init__(self, client: Any, plan: list[str | None], always: str | None = None) -> None:
        super().__init__(client)
        self.plan = list(plan)
        self.always = always
        self.tokens: list[str | None] = []

    def transact_write_items(self, **kwargs: Any) -> Any:
        self.tokens.append(kwargs.get("ClientRequestToken"))
        fault = self.plan.pop(0) if self.plan else self.always
        if fault == "throttled":
            raise throttled()
        if fault == "denied":
            raise denied()
        answer = self._client.transact_write_items(**kwargs)
        if fault == "applied":
            raise server_error()
        return answer

    def update_item(self, **kwargs: Any) -> Any:
        fault = self.always
        if fault == "throttled":
            raise throttled("UpdateItem")
        answer = self._client.update_item(**kwargs)
        if fault == "applied":
            raise server_error("UpdateItem")
        return answer
