"""The DynamoDB requests of job control (pause, resume, tick reads, the audit's marks), and nothing else.

The guard's own requests stay in ``store.py``; these are the operator's and the audit's. A pause is
written on the job's head item, where the guard's claim already writes: the claim's condition on
``paused_until_ms`` is what makes a paused delivery PAUSED without an extra read.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import epoch_ms, iso
from vigil.dynamo import from_wire, is_condition_failure, to_wire
from vigil.jobs.control import NotPaused, PauseTerms
from vigil.jobs.model import JobHead, RunRecord
from vigil.jobs.store import HEAD_ENTITY, HEAD_SK, TICK_PREFIX, job_pk, tick_sk


class ControlStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def pause(self, job: str, terms: PauseTerms, by: str) -> JobHead:
        """One UpdateItem; pausing a paused job replaces its reason and end."""
        values: dict[str, Any] = {
            ":entity": HEAD_ENTITY,
            ":job": job,
            ":by": by,
            ":reason": terms.reason,
            ":since": iso(terms.since),
            ":until_ms": terms.until_ms,
        }
        update = (
            "SET entity = :entity, job = :job, paused_by = :by, pause_reason = :reason, "
            "paused_since = :since, paused_until_ms = :until_ms"
        )
        if terms.until:
            values[":until"] = iso(terms.until)
            update += ", paused_until = :until REMOVE resumed_by"
        else:
            update += " REMOVE paused_until, resumed_by"
        return self._update_head(job, update, None, values)

    def resume(self, job: str, by: str, now: datetime) -> JobHead:
        """End the pause now (its record stays, for the audit and the list); NotPaused if none."""
        values = {":now_ms": epoch_ms(now), ":now": iso(now), ":by": by}
        try:
            return self._update_head(
                job,
                "SET paused_until_ms = :now_ms, paused_until = :now, resumed_by = :by",
                "paused_until_ms > :now_ms",
                values,
            )
        except ClientError as error:
            if is_condition_failure(error):
                raise NotPaused(f"job {job} is not paused") from None
            raise

    def mark_audited(self, job: str, schedule: str, now: datetime) -> None:
        """Start counting the job's ticks now: the audit's first sight of it, or a new schedule."""
        values = {":entity": HEAD_ENTITY, ":job": job, ":since": iso(now), ":schedule": schedule}
        try:
            self._update_head(
                job,
                "SET entity = :entity, job = :job, audit_since = :since, audit_schedule = :schedule",
                "attribute_not_exists(audit_since) OR audit_schedule <> :schedule",
                values,
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise

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
        while True:
            response = self._client.query(**kwargs)
            for raw in response.get("Items", []):
                yield from_wire(raw) or {}
            if "LastEvaluatedKey" not in response:
                return
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

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

    def _update_head(
        self, job: str, update: str, condition: str | None, values: dict[str, Any]
    ) -> JobHead:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "Key": to_wire({"pk": job_pk(job), "sk": HEAD_SK}),
            "UpdateExpression": update,
            "ExpressionAttributeValues": to_wire(values),
            "ReturnValues": "ALL_NEW",
        }
        if condition:
            kwargs["ConditionExpression"] = condition
        response = self._client.update_item(**kwargs)
        return JobHead.from_item(from_wire(response["Attributes"]) or {})
