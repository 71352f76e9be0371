"""The DynamoDB requests of job control (pause, resume, tick reads, the audit's marks), and nothing else.

The guard's own requests stay in ``store.py``; these are the operator's and the audit's. A pause is
written on the job's head item, where the guard's claim already writes: the claim's condition on
``paused_until_ms`` is what makes a paused delivery PAUSED without an extra read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Sleeper, epoch_ms, from_epoch_ms, iso
from vigil.dynamo import Update, all_of, any_of, from_wire, is_condition_failure, to_wire
from vigil.jobs.control import NotPaused, PauseTerms
from vigil.jobs.model import JobHead, RunRecord
from vigil.jobs.store import (
    HEAD_ENTITY,
    HEAD_SK,
    TICK_PREFIX,
    job_pk,
    tick_sk,
    transact_updates,
)

PAUSE_PREFIX = "PAUSE#"
"""Sort-key prefix of a job's pause records: one item per pause (keyed by its start), kept after
it ends so the audit can skip every pause in its window, not only the latest."""


class PauseChanged(RuntimeError):
    """The job's pause changed between reading it and writing it (another operator): retry."""


class ControlStore:
    def __init__(self, client: Any, table: str, sleep: Sleeper = time.sleep) -> None:
        self._client = client
        self._table = table
        self._sleep = sleep

    def pause(self, job: str, terms: PauseTerms, by: str, retention: timedelta) -> JobHead:
        """Pause, or change the reason and end of the pause under way (its start is kept).

        The head carries the pause the claim's condition reads; the pause's own record keeps it
        for the audit once it has ended. Both are written in one transaction, conditioned on the
        pause read first, so two operators pausing at once cannot lose a pause's start.
        """
        current = self._head(job)
        ongoing = bool(current and current.paused_at(epoch_ms(terms.since)))
        since = current.paused_since if current and ongoing else None
        since = since or iso(terms.since)
        head = (
            Update()
            .set_all(
                {
                    "entity": HEAD_ENTITY,
                    "job": job,
                    "paused_by": by,
                    "pause_reason": terms.reason,
                    "paused_since": since,
                    "paused_until_ms": terms.until_ms,
                }
            )
            .remove("resumed_by")
        )
        if terms.until:
            head.set("paused_until", iso(terms.until))
        else:
            head.remove("paused_until")
        head.condition(self._unchanged(head, current))
        record = Update().set_all(
            {
                "job": job,
                "since": since,
                "until_ms": terms.until_ms,
                "reason": terms.reason,
                "by": by,
            }
        )
        if terms.until:  # an open-ended pause gets its expiry when it is resumed
            record.set("expires_at", _expiry(terms.until, retention))
        else:
            record.remove("expires_at")
        self._write_both(job, head, since, record)
        return self._head(job) or JobHead.from_item({"job": job})

    def resume(self, job: str, by: str, now: datetime, retention: timedelta) -> JobHead:
        """End the pause now (its record stays, for the audit and the list); NotPaused if none."""
        current = self._head(job)
        if current is None or not current.paused_at(epoch_ms(now)) or not current.paused_since:
            raise NotPaused(f"job {job} is not paused")
        head = Update().set_all(
            {"paused_until_ms": epoch_ms(now), "paused_until": iso(now), "resumed_by": by}
        )
        head.condition(self._unchanged(head, current))
        record = Update().set_all(
            {"until_ms": epoch_ms(now), "resumed_by": by, "expires_at": _expiry(now, retention)}
        )
        self._write_both(job, head, current.paused_since, record)
        return self._head(job) or JobHead.from_item({"job": job})

    def pauses(self, job: str) -> list[tuple[datetime, datetime]]:
        """Every recorded pause of the job as [since, until), oldest first."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": to_wire({":pk": job_pk(job), ":prefix": PAUSE_PREFIX}),
            "ConsistentRead": True,
        }
        spans = []
        for item in self._query(kwargs):
            since, until_ms = item.get("since"), item.get("until_ms")
            if isinstance(since, str) and until_ms is not None:
                spans.append((datetime.fromisoformat(since), from_epoch_ms(int(until_ms))))
        return spans

    def mark_audited(self, job: str, schedule: str, now: datetime) -> None:
        """Start counting the job's ticks now: the audit's first sight of it, or a new schedule."""
        update = Update().set_all(
            {"entity": HEAD_ENTITY, "job": job, "audit_since": iso(now), "audit_schedule": schedule}
        )
        update.condition(
            any_of(update.absent("audit_since"), update.ne("audit_schedule", schedule))
        )
        try:
            self._update_head(job, update)
        except ClientError as error:
            if not is_condition_failure(error):
                raise

    def _head(self, job: str) -> JobHead | None:
        item = self.head_item(job)
        return JobHead.from_item(item) if item and "job" in item else None

    @staticmethod
    def _unchanged(update: Update, current: JobHead | None) -> str:
        """The pause is still the one read: same start and end (or still none)."""
        if current is None or current.paused_until_ms is None:
            return update.absent("paused_until_ms")
        return all_of(
            update.eq("paused_until_ms", current.paused_until_ms),
            update.eq("paused_since", current.paused_since)
            if current.paused_since
            else update.absent("paused_since"),
        )

    def _write_both(self, job: str, head: Update, since: str, record: Update) -> None:
        actions = [
            {
                "TableName": self._table,
                "Key": to_wire({"pk": job_pk(job), "sk": HEAD_SK}),
                **head.request(),
            },
            {
                "TableName": self._table,
                "Key": to_wire({"pk": job_pk(job), "sk": PAUSE_PREFIX + since}),
                **record.request(),
            },
        ]
        if transact_updates(self._client, actions, self._sleep) is not None:
            raise PauseChanged(f"the pause of {job} changed meanwhile; read it and try again")

    def head_item(self, job: str) -> dict[str, Any] | None:
        response = self._client.get_item(
            TableName=self._table,
            Key=to_wire({"pk": job_pk(job), "sk": HEAD_SK}),
            ConsistentRead=True,
        )
        return from_wire(response.get("Item"))

    def record(self, job: str, tick: str) -> RunRecord | None:
        response = self._client.get_item(
            TableName=self._table,
            Key=to_wire({"pk": job_pk(job), "sk": tick_sk(tick)}),
            ConsistentRead=True,
        )
        item = from_wire(response.get("Item"))
        return RunRecord.from_item(item) if item else None

    def statuses(self, job: str, first: str, last: str) -> dict[str, str]:
        """Tick key -> status for records with ``first <= key <= last`` (run-now keys included)."""
        return {item["scheduled_at"]: item["status"] for item in self._ticks(job, first, last)}

    def _ticks(self, job: str, first: str, last: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
            "ExpressionAttributeValues": to_wire(
                {":pk": job_pk(job), ":first": tick_sk(first), ":last": tick_sk(last + "~")}
            ),
            "ProjectionExpression": "scheduled_at, #status",
            "ExpressionAttributeNames": {"#status": "status"},
            "ConsistentRead": True,
        }
        yield from self._query(kwargs)

    def latest_keys(self, job: str, limit: int = 20) -> list[str]:
        """The newest tick keys, to align a rate() schedule on what the scheduler delivered."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=to_wire({":pk": job_pk(job), ":prefix": TICK_PREFIX}),
            ProjectionExpression="scheduled_at",
            ScanIndexForward=False,
            Limit=limit,
        )
        return [(from_wire(i) or {})["scheduled_at"] for i in response.get("Items", [])]

    def _update_head(self, job: str, update: Update) -> JobHead:
        response = self._client.update_item(
            TableName=self._table,
            Key=to_wire({"pk": job_pk(job), "sk": HEAD_SK}),
            ReturnValues="ALL_NEW",
            **update.request(),
        )
        return JobHead.from_item(from_wire(response["Attributes"]) or {})

    def _query(self, kwargs: dict[str, Any]) -> Iterator[dict[str, Any]]:
        while True:
            response = self._client.query(**kwargs)
            for raw in response.get("Items", []):
                yield from_wire(raw) or {}
            if "LastEvaluatedKey" not in response:
                return
            kwargs = {**kwargs, "ExclusiveStartKey": response["LastEvaluatedKey"]}


def _expiry(end: datetime, retention: timedelta) -> int:
    """A pause's record outlives its end by the history's retention (DynamoDB TTL, seconds);
    an end near the last representable time keeps its record for good."""
    try:
        return int((end + retention).timestamp())
    except OverflowError:
        return int(end.timestamp())
