"""An operator's verdict on a run left UNCERTAIN by ``run.once``: the one conditional update
``vigil jobs settle`` and ``vigil tasks settle`` write on the run's record.

The record must be UNCERTAIN on that very effect (else the update is refused and nothing
changes). Done: the journal records the completion (``settled``, fence 0: no run wrote it) and
the record takes ``done_status``. Not done: the intent is cleared and the record takes
``failed_status`` with an ``error_message`` saying how it runs again, the effect included.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import iso
from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE, EffectState
from vigil.dynamo import Item, Update, from_wire, is_condition_failure, old_item, to_wire


class NotSettleable(ValueError):
    """A settlement refused: the record is not UNCERTAIN on that effect; nothing changed."""


UNCERTAIN = "UNCERTAIN"
"""The status both jobs' and tasks' records take (``RunStatus`` / ``TaskStatus``)."""


def settlement(
    effect: str, *, done: bool, now: datetime, done_status: str, failed_status: str, again: str
) -> Update:
    update = Update().set("finished_at", iso(now))
    if done:
        entry = {"state": EffectState.DONE.value, "fence": 0, "at": iso(now), "settled": True}
        update.set_in(JOURNAL_ATTRIBUTE, effect, entry)
        update.set("status", done_status)
        update.remove("error_type", "error_message")
    else:
        update.remove_in(JOURNAL_ATTRIBUTE, effect)
        update.set("status", failed_status)
        update.set("error_type", "Settled")
        update.set("error_message", f"effect {effect!r} settled not done: {again}")
    update.remove(UNCERTAIN_EFFECT_ATTRIBUTE)
    return update.condition(
        update.eq("status", UNCERTAIN), update.eq(UNCERTAIN_EFFECT_ATTRIBUTE, effect)
    )


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
