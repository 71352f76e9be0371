"""The run store: every DynamoDB request the jobs guard makes, and nothing else.

One table holds, per job (partition ``JOB#<job>``):

* ``HEAD``: the job's fence, its lease under the ``skip`` policy, and its last recorded tick. The
  sparse index ``jobs-index`` (``entity``, ``job``) lists every job's head in one query.
* ``TICK#<scheduled time>``: one record per tick, newest first when queried backwards; it expires
  through DynamoDB TTL (``expires_at``) after the retention period.

Request budget: a claim is one ``TransactWriteItems``; finishing is one more. A refused claim
returns the items it saw (ALL_OLD), so a suppressed duplicate costs that single request, and so
does a refused finish: the record it hands back tells a run fenced out from a run whose own
earlier try landed (see :class:`Finish`), with no read after it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, Sleeper, epoch_ms, iso
from vigil.contract.jobs import JOB_PK_PREFIX, JOBS_INDEX
from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE, Verdict
from vigil.dynamo import (
    Item,
    Update,
    all_of,
    any_of,
    batch_get,
    cancellation_reasons,
    from_wire,
    is_condition_failure,
    old_item,
    to_wire,
    truncate,
)
from vigil.fenced_write import RunRecordSite
from vigil.jobs.model import RERUNNABLE_STATUSES, JobHead, Overlap, RunRecord, RunStatus
from vigil.leases import fence_advances, lease_free
from vigil.settle import settlement, write_settlement

HEAD_SK = "HEAD"
BATCH_GET_KEYS = 100
"""BatchGetItem's most keys a request."""
TICK_PREFIX = "TICK#"
HEAD_ENTITY = "job"
LEASE_ATTRIBUTES = ("lease_token", "lease_tick", "lease_until_ms", "lease_until", "lease_holder")


def job_pk(job: str) -> str:
    return f"{JOB_PK_PREFIX}{job}"


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
    request_id: str | None = None
    first_attempt: int = 1


@dataclass(frozen=True)
class Refusal:
    """A cancelled claim: which update was refused, and what each one saw."""

    tick_refused: bool
    tick_seen: Item | None
    head_refused: bool
    head_seen: Item | None


@dataclass(frozen=True)
class Finish:
    """A run's outcome as it is written: the run (job, tick, fencing token) and what it did.

    Built once per run, so every try of the write is the same request: DynamoDB answers a repeat
    of an applied transaction under the same ``ClientRequestToken`` (within 10 minutes) as
    applied, but only when every other parameter is the same too.
    """

    job: str
    tick: str
    token: int
    overlap: Overlap
    status: RunStatus
    finished_at: datetime
    duration_ms: int
    attempt: int = 1
    """Not written (the claim wrote it): what the run reports."""
    error_type: str | None = None
    error_message: str | None = None
    duration_flag: str | None = None
    uncertain_effect: str | None = None

    @property
    def request_token(self) -> str:
        """The transaction's ``ClientRequestToken``: one per run and outcome, at most 36
        characters (DynamoDB's limit), whatever the job's name."""
        run = f"{self.job}|{self.tick}|{self.token}|{self.status.value}"
        return "finish-" + hashlib.sha256(run.encode()).hexdigest()[:29]

    @property
    def error_summary(self) -> str | None:
        return f"{self.error_type}: {self.error_message}" if self.error_type else None

    @property
    def run(self) -> tuple[str, str]:
        return (self.job, self.tick)

    @property
    def label(self) -> str:
        return f"{self.job} tick {self.tick}"

    def landed_in(self, seen: Item | None) -> bool:
        """Whether the record a refused try saw is this very outcome, written by an earlier try
        whose answer was lost (a timeout after DynamoDB applied it). Only this run can write a
        final status under its token (the write is conditional on it), so this is not a guess."""
        return (
            seen is not None
            and seen.get("fencing_token") == self.token
            and seen.get("status") == self.status.value
        )


class TickTaken(Exception):
    """A final record could not be written because the tick's record changed meanwhile."""

    def __init__(self, message: str, seen: Item | None) -> None:
        super().__init__(message)
        self.seen = seen


REFUSED = "ConditionalCheckFailed"
CONFLICT_ATTEMPTS = 4
CONFLICT_BACKOFF_S = 0.05

Reasons = list[tuple[str, Item | None]]


def transact_once(
    client: Any, actions: list[dict[str, Any]], request_token: str | None = None
) -> Reasons | None:
    """One transaction of updates: the cancellation reasons if a condition refused it, else None.
    Any other error (a conflict, a throttle, a timeout) is raised as it came, for the caller's
    retries; ``request_token`` makes a repeat of an applied transaction answer as applied."""
    request: dict[str, Any] = {"TransactItems": [{"Update": action} for action in actions]}
    if request_token:
        request["ClientRequestToken"] = request_token
    try:
        client.transact_write_items(**request)
        return None
    except ClientError as error:
        reasons = cancellation_reasons(error)
        if reasons is not None and any(code == REFUSED for code, _ in reasons):
            return reasons
        raise


def transact_updates(client: Any, actions: list[dict[str, Any]], sleep: Sleeper) -> Reasons | None:
    """Run a transaction of updates; the cancellation reasons if a condition refused it, else None.

    DynamoDB also cancels a transaction that collides with another one on the same item
    (``TransactionConflict``), which concurrent deliveries of one job do; botocore does not
    retry those. A cancelled transaction applied nothing, so it is retried here, briefly.
    """
    for attempt in range(CONFLICT_ATTEMPTS):
        try:
            return transact_once(client, actions)
        except ClientError as error:
            if cancellation_reasons(error) is None or attempt == CONFLICT_ATTEMPTS - 1:
                raise
            sleep(CONFLICT_BACKOFF_S * 2**attempt)
    raise AssertionError("unreachable")


class RunStore:
    def __init__(self, client: Any, table: str, sleep: Sleeper = time.sleep) -> None:
        self._client = client
        self._table = table
        self._sleep = sleep

    def _transact(self, actions: list[dict[str, Any]]) -> Reasons | None:
        return transact_updates(self._client, actions, self._sleep)

    # --- the two requests of a normal run -------------------------------------------------

    def claim(self, claim: Claim) -> Refusal | None:
        """Take the tick and the job's fence (and lease) in one transaction; None means taken."""
        tick = Update().set_all(
            {
                "job": claim.job,
                "scheduled_at": claim.tick,
                "status": RunStatus.RUNNING.value,
                "attempts": claim.attempt,
                "fencing_token": claim.token,
                "lease_until_ms": epoch_ms(claim.lease_until),
                "lease_until": iso(claim.lease_until),
                "started_at": iso(claim.now),
                "expires_at": int(claim.expires_at.timestamp()),
                "lease_holder": claim.holder,
                "execution_id": claim.execution_id or "",
                "trigger": claim.trigger,
                "first_attempt": claim.first_attempt,
            }
        )
        tick.set_default(JOURNAL_ATTRIBUTE, {})  # run.once's journal survives a takeover
        if claim.requested_by:
            tick.set("requested_by", claim.requested_by)
        if claim.request_id:
            tick.set("request_id", claim.request_id)
        else:
            tick.remove("request_id")
        tick.remove(
            "finished_at",
            "duration_ms",
            "error_type",
            "error_message",
            "detail",
            "duration_flag",
            UNCERTAIN_EFFECT_ATTRIBUTE,
        )
        reclaim = _rerunnable if claim.rerun else _reclaimable
        tick.condition(reclaim(tick, claim.expected_attempts, claim.now))
        head = Update().set_all({"entity": HEAD_ENTITY, "job": claim.job, "fence": claim.token})
        head.condition(fence_advances(head, claim.token), pause_over(head, claim.now))
        if claim.overlap is Overlap.SKIP:
            head.set_all(
                {
                    "lease_token": claim.token,
                    "lease_tick": claim.tick,
                    "lease_until_ms": epoch_ms(claim.lease_until),
                    "lease_until": iso(claim.lease_until),
                    "lease_holder": claim.holder,
                }
            )
            head.condition(lease_free(head, claim.now))
        actions = [self._update(claim.job, tick_sk(claim.tick), tick)]
        actions.append(self._update(claim.job, HEAD_SK, head))
        for action in actions:
            action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        reasons = self._transact(actions)
        if reasons is None:
            return None
        (tick_code, tick_seen), (head_code, head_seen) = reasons
        return Refusal(
            tick_refused=tick_code == REFUSED,
            tick_seen=tick_seen,
            head_refused=head_code == REFUSED,
            head_seen=head_seen,
        )

    def finish(self, outcome: Finish) -> bool:
        """One try at recording the outcome and releasing the lease, only if the run still holds
        the tick; transient faults are raised for the caller to retry (:mod:`vigil.jobs.finish`).

        True: recorded, by this try or, as the refusal's record shows, by an earlier one. False:
        the run was fenced out: a newer claim took the tick after this run's lease expired, and
        its outcome must not overwrite theirs. Under ``skip``, a newer tick that took only the
        job's lease leaves this tick's record to this run: it is written alone.
        """
        record = Update().set_all(
            {
                "status": outcome.status.value,
                "finished_at": iso(outcome.finished_at),
                "duration_ms": outcome.duration_ms,
            }
        )
        if outcome.error_type is not None:
            record.set("error_type", outcome.error_type)
            record.set("error_message", outcome.error_message or "")
        if outcome.duration_flag:
            record.set("duration_flag", outcome.duration_flag)
        if outcome.uncertain_effect:
            record.set(UNCERTAIN_EFFECT_ATTRIBUTE, outcome.uncertain_effect)
        record.remove("lease_until_ms", "lease_until")
        record.condition(
            record.eq("fencing_token", outcome.token), record.eq("status", RunStatus.RUNNING.value)
        )
        job, tick = outcome.job, outcome.tick
        head = _last_outcome(tick, outcome.status, outcome.finished_at, outcome.error_summary)

        def once(actions: list[dict[str, Any]]) -> Reasons | None:
            return transact_once(self._client, actions, outcome.request_token)

        if outcome.overlap is Overlap.SKIP:
            head.remove(*LEASE_ATTRIBUTES)
            head.condition(head.eq("lease_token", outcome.token))
            action = self._update(job, tick_sk(tick), record)
            action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            reasons = once([action, self._update(job, HEAD_SK, head)])
            written, seen = self._alone_if_only_the_head_refused(action, reasons)
        else:
            head.condition(head.exists("pk"))
            written, seen = self._record_and_head(job, tick, record, head, once)
        return written or outcome.landed_in(seen)

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
        rerun: bool = False,
    ) -> None:
        """Record a SKIPPED or MISSED tick so it is visible, never silent; raises TickTaken.

        An operator's rerun (``--at``, backfill) may replace what it was allowed to claim (a
        MISSED, SKIPPED or PAUSED record), so the refusal it meets is recorded over it."""
        record = Update().set_all(
            {
                "job": job,
                "scheduled_at": tick,
                "status": status.value,
                "finished_at": iso(now),
                "detail": detail,
                "expires_at": int(expires_at.timestamp()),
            }
        )
        record.set_default("attempts", 0).remove("lease_until_ms", "lease_until")
        replaceable = _rerunnable if rerun else _reclaimable
        record.condition(replaceable(record, expected_attempts, now))
        head = _last_outcome(tick, status, now, detail).set_all({"entity": HEAD_ENTITY, "job": job})
        written, seen = self._record_and_head(job, tick, record, head)
        if not written:
            raise TickTaken(f"{job} tick {tick} changed while recording {status}", seen)

    def _record_and_head(
        self,
        job: str,
        tick: str,
        record: Update,
        head: Update,
        transact: Callable[[list[dict[str, Any]]], Reasons | None] | None = None,
    ) -> tuple[bool, Item | None]:
        """Write the tick's record and the head's last_* together, but never move the head back
        to an older tick (an older tick under ``allow``, an audit's or a backfill's record): then
        the record is written alone, one request more in that case only. Returns whether the
        record was written and, if not, the record its condition refused (None if absent)."""
        head.condition(any_of(head.absent("last_tick"), head.le("last_tick", tick)))
        action = self._update(job, tick_sk(tick), record)
        action["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        reasons = (transact or self._transact)([action, self._update(job, HEAD_SK, head)])
        return self._alone_if_only_the_head_refused(action, reasons)

    def _alone_if_only_the_head_refused(
        self, action: dict[str, Any], reasons: Reasons | None
    ) -> tuple[bool, Item | None]:
        """The record's write without the head's, when only the head refused: the head belongs
        to a newer tick (its last_*, or under ``skip`` the job's lease a newer tick claimed after
        this run's expired), but the record is still this run's to finish. Returns whether the
        record was written and, if not, the record its condition refused (None if absent)."""
        if reasons is None:
            return True, None
        (record_code, record_seen), (head_code, _) = reasons
        if record_code == REFUSED or head_code != REFUSED:
            return False, record_seen
        try:
            self._client.update_item(**action)
        except ClientError as error:
            if is_condition_failure(error):
                return False, old_item(error)
            raise
        return True, None

    def record_site(
        self, job: str, tick: str, token: int, time_left_s: Callable[[], float], clock: Clock
    ) -> RunRecordSite:
        """Where ``run.once`` journals this run's effects: the tick's record, while the run
        holds it (its fencing token, still RUNNING)."""
        return RunRecordSite(
            client=self._client,
            table=self._table,
            key={"pk": job_pk(job), "sk": tick_sk(tick)},
            token_attribute="fencing_token",
            token=token,
            running=RunStatus.RUNNING.value,
            label=f"{job} tick {tick}",
            time_left_s=time_left_s,
            clock=clock,
            sleep=self._sleep,
        )

    def claim_site(
        self, job: str, token: int, time_left_s: Callable[[], float], clock: Clock
    ) -> RunRecordSite:
        """What ``run.fenced.strict`` checks: the job's ``HEAD``, whose fence every claim of any
        of the job's ticks advances, so it is still this run's until a newer run claims."""
        return RunRecordSite(
            client=self._client,
            table=self._table,
            key={"pk": job_pk(job), "sk": HEAD_SK},
            token_attribute="fence",
            token=token,
            running=None,
            label=f"job {job}'s newest claim",
            time_left_s=time_left_s,
            clock=clock,
            sleep=self._sleep,
        )

    def settle(
        self, job: str, tick: str, effect: str, *, verdict: Verdict, now: datetime
    ) -> RunRecord:
        """An operator's verdict on an UNCERTAIN tick's effect, in one conditional UpdateItem
        (the tick must be UNCERTAIN on that very effect, else :class:`NotSettleable` and nothing
        changes). Done: the journal records the completion and the tick ends SUCCEEDED with a
        note (what followed the effect in the body did not run). Done, rerun: the journal records
        the completion and the tick is FAILED, which a rerun (``vigil jobs run JOB --at TICK``)
        claims and runs, skipping the effect. Not done: the intent is cleared and the tick is
        FAILED, which a rerun or a redelivery claims and runs, the effect included."""
        record = settlement(
            effect,
            verdict=verdict,
            now=now,
            done_status=RunStatus.SUCCEEDED.value,
            failed_status=RunStatus.FAILED.value,
            again=f"`vigil jobs run {job} --at {tick}` runs it",
        )
        if verdict is Verdict.DONE:
            record.set("detail", f"settled: effect {effect!r} done (an operator's word)")
        key = {"pk": job_pk(job), "sk": tick_sk(tick)}
        item = write_settlement(
            self._client, self._table, key, record, run=f"{job} tick {tick}", effect=effect
        )
        return RunRecord.from_item(item)

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

    def heads_of(self, jobs: Iterable[str]) -> list[JobHead]:
        """The latest state of these jobs (those that ever ran: a job without a head has none),
        strongly consistent: one BatchGetItem per 100 jobs, and nothing of any other job."""
        keys: list[Mapping[str, Any]] = [{"pk": job_pk(job), "sk": HEAD_SK} for job in jobs]
        items: list[Item] = []
        for start in range(0, len(keys), BATCH_GET_KEYS):
            chunk = keys[start : start + BATCH_GET_KEYS]
            items += batch_get(
                self._client, self._table, chunk, None, sleep=self._sleep, consistent=True
            )
        return [JobHead.from_item(item) for item in items if "job" in item]

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

    def _update(self, job: str, sk: str, update: Update) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Key": to_wire({"pk": job_pk(job), "sk": sk}),
            **update.request(),
        }


def _reclaimable(update: Update, expected_attempts: int, now: datetime) -> str:
    """A tick record may be claimed (or finalised) when it is new, or when it is still the
    attempt the claimant saw and that attempt failed or lost its lease."""
    if not expected_attempts:
        return update.absent("sk")
    running = update.eq("status", RunStatus.RUNNING.value)
    expired = all_of(running, update.lt("lease_until_ms", epoch_ms(now)))
    return all_of(
        update.eq("attempts", expected_attempts),
        any_of(update.eq("status", RunStatus.FAILED.value), expired),
    )


def _rerunnable(update: Update, expected_attempts: int, now: datetime) -> str:
    """An operator's rerun (``--at``, backfill) may take over a new, expired or
    :data:`RERUNNABLE_STATUSES` record; the decision calls the rest a duplicate."""
    final_but_not_done = update.one_of("status", *sorted(s.value for s in RERUNNABLE_STATUSES))
    expired = all_of(
        update.eq("status", RunStatus.RUNNING.value), update.lt("lease_until_ms", epoch_ms(now))
    )
    return any_of(
        update.absent("sk"),
        all_of(update.eq("attempts", expected_attempts), any_of(final_but_not_done, expired)),
    )


def pause_over(update: Update, now: datetime) -> str:
    """On the head, with the claim's clock: the one condition a pause adds to the claim's write."""
    return any_of(update.absent("paused_until_ms"), update.le("paused_until_ms", epoch_ms(now)))


def _last_outcome(tick: str, status: RunStatus, at: datetime, error: str | None) -> Update:
    """The head's "latest state" fields; an outcome without an error clears the last one."""
    update = Update().set_all({"last_tick": tick, "last_status": status.value})
    update.set("last_finished_at", iso(at))
    if error:
        return update.set("last_error", truncate(error))
    return update.remove("last_error")
