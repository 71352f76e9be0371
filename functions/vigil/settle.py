"""An operator's verdict on a run left UNCERTAIN by ``run.once`` (or ``ctx.once``): the one
conditional update ``vigil jobs settle``, ``vigil tasks settle`` and ``vigil observers settle``
write on the record that holds the journal.

The record must be uncertain on that very effect (else the update is refused and nothing
changes). Done (:class:`~vigil.contract.journal.Verdict`: ``done`` or ``done_rerun``): the
journal records the completion (``settled``, fence 0: no run wrote it), so the next run skips it.
Not done: the intent is cleared, so the next run does it. A job's or task's record then takes
``done_status`` (done: the run ends there) or ``failed_status`` (done_rerun, not_done: it runs
again, through its usual rerun) (:func:`settlement`); an observer's record is re-armed by the
registry's restart instead (``ObserverCommands.request_settle``: its next generation runs its code
again whatever the verdict), both on top of :func:`journal_verdict`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import iso
from vigil.contract.journal import (
    JOURNAL_ATTRIBUTE,
    UNCERTAIN_EFFECT_ATTRIBUTE,
    EffectState,
    Verdict,
)
from vigil.dynamo import Item, Update, from_wire, is_condition_failure, old_item, to_wire


class NotSettleable(ValueError):
    """A settlement refused: the record is not UNCERTAIN on that effect; nothing changed."""


UNCERTAIN = "UNCERTAIN"
"""The status both jobs' and tasks' records take (``RunStatus`` / ``TaskStatus``)."""


def journal_verdict(update: Update, effect: str, *, verdict: Verdict, now: datetime) -> Update:
    """The journal's side of a settlement, alike on every record: the entry DONE (it happened)
    or gone (not done), ``uncertain_effect`` removed, on condition that it names ``effect``."""
    if verdict.happened:
        entry = {"state": EffectState.DONE.value, "fence": 0, "at": iso(now), "settled": True}
        update.set_in(JOURNAL_ATTRIBUTE, effect, entry)
    else:
        update.remove_in(JOURNAL_ATTRIBUTE, effect)
    update.remove(UNCERTAIN_EFFECT_ATTRIBUTE)
    return update.condition(update.eq(UNCERTAIN_EFFECT_ATTRIBUTE, effect))


def settlement(
    effect: str,
    *,
    verdict: Verdict,
    now: datetime,
    done_status: str,
    failed_status: str,
    again: str,
) -> Update:
    """A job's tick or a task: :func:`journal_verdict`, and the record UNCERTAIN -> ``done_status``
    (done) or ``failed_status`` (done_rerun, not_done: with ``again``, how it runs again)."""
    update = Update().set("finished_at", iso(now))
    journal_verdict(update, effect, verdict=verdict, now=now)
    if verdict is Verdict.DONE:
        update.set("status", done_status)
        update.remove("error_type", "error_message")
    else:
        said = "done: the rest of the body still to run" if verdict.happened else "not done"
        update.set("status", failed_status)
        update.set("error_type", "Settled")
        update.set("error_message", f"effect {effect!r} settled {said}: {again}")
    return update.condition(update.eq("status", UNCERTAIN))


def refusal(run: str, effect: str, seen: dict[str, object] | None) -> str:
    """Why a settlement was refused, from the record it saw (None: no record)."""
    if seen is None:
        return f"{run}: no such record; nothing changed"
    on = seen.get(UNCERTAIN_EFFECT_ATTRIBUTE)
    found = f"{seen.get('status')}" + (f" on effect {on!r}" if on else "")
    return f"{run} is {found}, not UNCERTAIN on {effect!r}: nothing changed"


def write_settlement(
    client: Any, table: str, key: Mapping[str, Any], update: Update, *, run: str, effect: str
) -> Item:
    """Write ``update`` (a :func:`settlement`) on the record at ``key``: the record as it is
    after, or :class:`NotSettleable` saying what the record was (nothing changed)."""
    try:
        answer = client.update_item(
            TableName=table,
            Key=to_wire(key),
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
            **update.request(),
        )
    except ClientError as error:
        if not is_condition_failure(error):
            raise
        raise NotSettleable(refusal(run, effect, old_item(error))) from None
    return from_wire(answer["Attributes"]) or {}


def write_settlements(
    client: Any,
    table: str,
    writes: Sequence[tuple[Mapping[str, Any], Update]],
    *,
    run: str,
    effect: str,
) -> Item:
    """Several conditional updates written together (one TransactWriteItems): a flow's record
    and its step's item. The first is the record: it after, or :class:`NotSettleable` saying
    what the record was (one GetItem more; nothing changed)."""
    items = [
        {"Update": {"TableName": table, "Key": to_wire(dict(key)), **update.request()}}
        for key, update in writes
    ]
    try:
        client.transact_write_items(TransactItems=items)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
            raise
        record = from_wire(
            client.get_item(
                TableName=table, Key=to_wire(dict(writes[0][0])), ConsistentRead=True
            ).get("Item")
        )
        why = refusal(run, effect, record)
        if record is not None and record.get(UNCERTAIN_EFFECT_ATTRIBUTE) == effect:
            why = f"{run}: {effect} is not a step begun and unrecorded in its journal; nothing changed"
        raise NotSettleable(why) from None
    answer = client.get_item(TableName=table, Key=to_wire(dict(writes[0][0])), ConsistentRead=True)
    return from_wire(answer.get("Item")) or {}
