"""The run store: every DynamoDB request the jobs guard makes, and nothing else.

One table holds, per job (partition ``JOB#<job>``):

* ``HEAD``: the job's fence, its lease under the ``skip`` policy, and its last recorded tick. The
  sparse index ``jobs-index`` (``entity``, ``job``) lists every job's head in one query.
* ``TICK#<scheduled time>``: one record per tick, newest first when queried backwards; it expires
  through DynamoDB TTL (``expires_at``) after the retention period.

Request budget: a claim is one ``TransactWriteItems``; finishing is one more. A refused claim
returns the items it saw (ALL_OLD), so a suppressed duplicate costs that single request.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import epoch_ms, iso
from vigil.dynamo import Item, cancellation_reasons, from_wire, to_wire
from vigil.jobs.model import JobHead, Overlap, RunRecord, RunStatus
from vigil.leases import FENCE_ADVANCES, LEASE_FREE

HEAD_SK = "HEAD"
TICK_PREFIX = "TICK#"
JOBS_INDEX = "jobs-index"
HEAD_ENTITY = "job"
ERROR_MESSAGE_LIMIT = 1000
LEASE_ATTRIBUTES = ("lease_token", "lease_tick", "lease_until_ms", "lease_until", "lease_holder")

RECLAIMABLE = (
    "attempts = :expected AND (#status = :failed OR "
    "(#status = :running AND lease_until_ms < :now_ms))"
)


RERUNNABLE = (
    "attribute_not_exists(sk) OR (attempts = :expected AND "
    "(#status IN (:failed, :missed, :skipped, :paused) OR "
    "(#status = :running AND lease_until_ms < :now_ms)))"
)
"""An operator's rerun (``--at``, backfill) may take over any record but a SUCCEEDED or live one."""

PAUSE_OVER = "(attribute_not_exists(paused_until_ms) OR paused_until_ms <= :now_ms)"
"""On the head, with the claim's clock: the one condition a pause adds to the claim's write."""


def job_pk(job: str) -> str:
    return f"JOB#{job}"


def tick_sk(tick: str) -> str:
    return f"{TICK_PREFIX}{tick}"


@dataclass(frozen=True)
class Claim:
    job: str
    tick: str
    token: int
    attempt: int
    expected_attempts: int
    overlap: Overlap
    now: datetime
    lease_until: datetime
    expires_at: datetime
    holder: str
    execution_id: str | None
    trigger: str = "schedule"
    requested_by: str | None = None
    rerun: bool = False


@dataclass(frozen=True)
class Refusal:
    """A cancelled claim: which update was refused, and what each one saw."""

    tick_refused: bool
    tick_seen: Item | None
    head_refused: bool
    head_seen: Item | None


class TickTaken(Exception):
    """A final record could not be written because the tick's record changed meanwhile."""

    def __init__(self, message: str, seen: Item | None) -> None:
        super().__init__(message)
        self.seen = seen


REFUSED = "ConditionalCheckFailed"
CONFLICT_ATTEMPTS = 4
CONFLICT_BACKOFF_S = 0.05

Reasons = list[tuple[str, Item | None]]


class RunStore:
    def __init__(
        self, client: Any, table: str, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._client = client
        self._table = table
        self._sleep = sleep

    def _transact(self, actions: list[dict[str, Any]]) -> Reasons | None:
        """Run a transaction; the cancellation reasons if a condition refused it, else None.

        DynamoDB also cancels a transaction that collides with another one on the same item
        (``TransactionConflict``), which concurrent deliveries of one job do; botocore does not
        retry those. A cancelled transaction applied nothing, so it is retried here, briefly.
        """
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                self._client.transact_write_items(
                    TransactItems=[{"Update": action} for action in actions]
                )
                return None
            except ClientError as error:
                reasons = cancellation_reasons(error)
                if reasons is None:
                    raise
                if any(code == REFUSED for code, _ in reasons):
                    return reasons
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise
                self._sleep(CONFLICT_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    # --- the two requests of a normal run -------------------------------------------------

    def claim(self, claim: Claim) -> Refusal | None:
        """Take the tick and the job's fence (and lease) in one transaction; None means taken."""
        values: dict[str, Any] = {
            ":job": claim.job,
            ":tick": claim.tick,
            ":token": claim.token,
            ":now_ms": epoch_ms(claim.now),
            ":running": RunStatus.RUNNING.value,
            ":failed": RunStatus.FAILED.value,
            ":attempt": claim.attempt,
            ":expected": claim.expected_attempts,
            ":until_ms": epoch_ms(claim.lease_until),
            ":until": iso(claim.lease_until),
            ":started": iso(claim.now),
            ":ttl": int(claim.expires_at.timestamp()),
            ":holder": claim.holder,
            ":execution": claim.execution_id or "",
            ":entity": HEAD_ENTITY,
            ":missed": RunStatus.MISSED.value,
            ":skipped": RunStatus.SKIPPED.value,
            ":paused": RunStatus.PAUSED.value,
            ":trigger": claim.trigger,
            ":by": claim.requested_by or "",
        }
        if claim.rerun:
            tick_condition = RERUNNABLE
        else:
            tick_condition = RECLAIMABLE if claim.expected_attempts else "attribute_not_exists(sk)"
        tick = self._update(
            job_pk(claim.job),
            tick_sk(claim.tick),
            "SET job = :job, scheduled_at = :tick, #status = :running, attempts = :attempt, "
            "fencing_token = :token, lease_until_ms = :until_ms, lease_until = :until, "
            "started_at = :started, expires_at = :ttl, lease_holder = :holder, "
            "execution_id = :execution, #trigger = :trigger"
            + (", requested_by = :by" if claim.requested_by else "")
            + " REMOVE finished_at, duration_ms, error_type, error_message, detail, duration_flag",
            tick_condition,
            values,
        )
        head_set = "SET entity = :entity, job = :job, fence = :token"
        head_condition = f"{FENCE_ADVANCES} AND {PAUSE_OVER}"
        if claim.overlap is Overlap.SKIP:
            head_set += (
                ", lease_token = :token, lease_tick = :tick, lease_until_ms = :until_ms, "
                "lease_until = :until, lease_holder = :holder"
            )
            head_condition += f" AND {LEASE_FREE}"
        head = self._update(job_pk(claim.job), HEAD_SK, head_set, head_condition, values)
        for action in (tick, head):
            action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        reasons = self._transact([tick, head])
        if reasons is None:
            return None
        (tick_code, tick_seen), (head_code, head_seen) = reasons
        return Refusal(
            tick_refused=tick_code == REFUSED,
            tick_seen=tick_seen,
            head_refused=head_code == REFUSED,
            head_seen=head_seen,
        )

    def finish(
        self,
        *,
        job: str,
        tick: str,
        token: int,
        overlap: Overlap,
        status: RunStatus,
        finished_at: datetime,
        duration_ms: int,
        error: BaseException | None = None,
        duration_flag: str | None = None,
    ) -> bool:
        """Record the outcome and release the lease, only if this run still holds the tick.

        False means the run was fenced out: a newer claim took the tick (or, under ``skip``, the
        job's lease) after this run's lease expired, and its outcome must not overwrite theirs.
        """
        values: dict[str, Any] = {
            ":status": status.value,
            ":finished": iso(finished_at),
            ":duration": duration_ms,
            ":token": token,
            ":running": RunStatus.RUNNING.value,
        }
        tick_sets = ["#status = :status", "finished_at = :finished", "duration_ms = :duration"]
        summary = None
        if error is not None:
            tick_sets += ["error_type = :etype", "error_message = :emsg"]
            values |= {":etype": type(error).__name__, ":emsg": _truncate(str(error))}
            summary = f"{type(error).__name__}: {error}"
        if duration_flag:
            tick_sets.append("duration_flag = :flag")
            values[":flag"] = duration_flag
        record = self._update(
            job_pk(job),
            tick_sk(tick),
            _set_remove(tick_sets, ["lease_until_ms", "lease_until"]),
            "fencing_token = :token AND #status = :running",
            values,
        )
        sets, removes, head_values = _last_outcome(tick, status, finished_at, summary)
        head_condition = "attribute_exists(pk)"
        if overlap is Overlap.SKIP:
            removes += [*LEASE_ATTRIBUTES]
            head_condition = "lease_token = :token"
            head_values[":token"] = token
        head = self._update(
            job_pk(job), HEAD_SK, _set_remove(sets, removes), head_condition, head_values
        )
        return self._transact([record, head]) is None

    # --- ticks that never run ---------------------------------------------------------------

    def record_final(
        self,
        *,
        job: str,
        tick: str,
        status: RunStatus,
        now: datetime,
        expires_at: datetime,
        detail: str,
        expected_attempts: int = 0,
    ) -> None:
        """Record a SKIPPED or MISSED tick so it is visible, never silent; raises TickTaken."""
        values: dict[str, Any] = {
            ":job": job,
            ":tick": tick,
            ":status": status.value,
            ":finished": iso(now),
            ":detail": detail,
            ":ttl": int(expires_at.timestamp()),
            ":zero": 0,
            ":expected": expected_attempts,
            ":failed": RunStatus.FAILED.value,
            ":running": RunStatus.RUNNING.value,
            ":now_ms": epoch_ms(now),
        }
        record = self._update(
            job_pk(job),
            tick_sk(tick),
            "SET job = :job, scheduled_at = :tick, #status = :status, finished_at = :finished, "
            "detail = :detail, expires_at = :ttl, attempts = if_not_exists(attempts, :zero) "
            "REMOVE lease_until_ms, lease_until",
            RECLAIMABLE if expected_attempts else "attribute_not_exists(sk)",
            values,
        )
        sets, removes, head_values = _last_outcome(tick, status, now, detail)
        sets += ["entity = :entity", "job = :job"]
        head_values |= {":entity": HEAD_ENTITY, ":job": job}
        head = self._update(job_pk(job), HEAD_SK, _set_remove(sets, removes), None, head_values)
        record["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        reasons = self._transact([record, head])
        if reasons is not None:
            raise TickTaken(f"{job} tick {tick} changed while recording {status}", reasons[0][1])

    # --- reads for people -------------------------------------------------------------------

    def history(self, job: str, limit: int = 20) -> list[RunRecord]:
        """The job's ticks, newest first."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues=to_wire({":pk": job_pk(job), ":prefix": TICK_PREFIX}),
            ScanIndexForward=False,
            Limit=limit,
        )
        return [RunRecord.from_item(from_wire(i) or {}) for i in response.get("Items", [])]

    def head(self, job: str) -> JobHead | None:
        response = self._client.get_item(
            TableName=self._table,
            Key=to_wire({"pk": job_pk(job), "sk": HEAD_SK}),
            ConsistentRead=True,
        )
        item = from_wire(response.get("Item"))
        return JobHead.from_item(item) if item else None

    def heads(self) -> list[JobHead]:
        """The latest state of every job, from the sparse jobs index."""
        heads: list[JobHead] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": JOBS_INDEX,
            "KeyConditionExpression": "entity = :entity",
            "ExpressionAttributeValues": to_wire({":entity": HEAD_ENTITY}),
        }
        while True:
            response = self._client.query(**kwargs)
            heads += [JobHead.from_item(from_wire(i) or {}) for i in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return heads
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _update(
        self, pk: str, sk: str, update: str, condition: str | None, values: dict[str, Any]
    ) -> dict[str, Any]:
        """One Update action; DynamoDB rejects unused placeholders, so only used ones are sent."""
        used = set(_PLACEHOLDER.findall(f"{update} {condition or ''}"))
        action: dict[str, Any] = {
            "TableName": self._table,
            "Key": to_wire({"pk": pk, "sk": sk}),
            "UpdateExpression": update,
            "ExpressionAttributeValues": to_wire({k: v for k, v in values.items() if k in used}),
        }
        if condition:
            action["ConditionExpression"] = condition
        names = {n: n[1:] for n in ("#status", "#trigger") if n in f"{update} {condition or ''}"}
        if names:
            action["ExpressionAttributeNames"] = names
        return action


_PLACEHOLDER = re.compile(r":[a-z_]+")


def _last_outcome(
    tick: str, status: RunStatus, at: datetime, error: str | None
) -> tuple[list[str], list[str], dict[str, Any]]:
    """The head's "latest state" fields; an outcome without an error clears the last one."""
    values: dict[str, Any] = {":last_tick": tick, ":last_status": status.value, ":last_at": iso(at)}
    sets = ["last_tick = :last_tick", "last_status = :last_status", "last_finished_at = :last_at"]
    if error:
        values[":last_error"] = _truncate(error)
        return [*sets, "last_error = :last_error"], [], values
    return sets, ["last_error"], values


def _set_remove(sets: list[str], removes: list[str]) -> str:
    return f"SET {', '.join(sets)}" + (f" REMOVE {', '.join(removes)}" if removes else "")


def _truncate(text: str) -> str:
    return text if len(text) <= ERROR_MESSAGE_LIMIT else text[: ERROR_MESSAGE_LIMIT - 1] + "…"
