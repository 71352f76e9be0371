"""``run.once``: a journal of effects that cannot be made conditional (an email, a payment call).

::

    with run.once("welcome-email") as first:
        if first:
            send_welcome_email(user)

The journal is a map on the run's own record (a job's tick, a task, an observer's registry
record for ``ctx.once``), ``effects``: effect name -> ``{state, fence, at}``. Entering the block
writes the intent (``INTENT``) and leaving it normally writes the completion (``DONE``): two
UpdateItems, each conditional on the record still being this run's (its token, still running),
so a superseded run can neither begin nor finish an effect. The completion is its own write rather than riding on the run's finish: riding would save
one request but widen the window in which a crash leaves the effect unknown from the effect
itself to the whole rest of the body (and a body that fails later would never record it), and
every such crash ends UNCERTAIN, for a person.

The intent's write is also the read: it is conditional on the effect having no entry yet, and a
refusal hands back the record (``ALL_OLD``), so a later delivery or a takeover learns what an
earlier run did with no request of its own:

* ``DONE`` -> the block is entered with ``first`` False (skip the effect);
* ``INTENT`` without completion (the earlier run crashed, hung, or its block raised) -> not
  guessed: ``check()`` when given (True: it happened -> recorded DONE, skipped; False -> the
  intent is taken over and the effect runs), else :class:`Uncertain` stops the run, which its
  guard records UNCERTAIN with the effect's name, not retried, for ``vigil jobs settle`` /
  ``vigil tasks settle`` (an observer's: ``vigil observers settle``);
* the record is another run's now -> :class:`~vigil.effects.fence.Fenced`.

An observer's journal is the observer's, not one generation's: a replacement generation skips
what an earlier one finished, and the entries stay on the record (with its checkpoint, within
DynamoDB's 400 KB item), so an observer names each occurrence of a repeated effect
(``f"alert:{incident}"``). Its record holds the run while its generation does (``running`` None:
a stopping observer's generation may still finish an effect).

A block that raises leaves the intent without its completion: whether the effect happened before
the error is exactly what is not known.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import iso
from vigil.contract.journal import JOURNAL_ATTRIBUTE, EffectState
from vigil.dynamo import Item, Update, is_condition_failure, old_item, to_wire
from vigil.effects.fence import Fenced
from vigil.fenced_write import RunRecordSite
from vigil.persist import persist

EFFECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")


class InvalidEffect(ValueError):
    """An effect name the journal refuses, before any request."""


class Uncertain(Exception):
    """An earlier run of this tick or task recorded the intent of ``effect`` but not its
    completion, and no ``check`` was given: whether it happened is for a person to settle."""

    def __init__(self, label: str, effect: str, entry: Item) -> None:
        super().__init__(
            f"{label}: effect {effect!r} was begun by token {entry.get('fence')} at "
            f"{entry.get('at')} and never recorded done; settle it as done or not done"
        )
        self.effect = effect


def validate(effect: str) -> str:
    if not isinstance(effect, str) or not EFFECT_NAME.fullmatch(effect):
        raise InvalidEffect(
            f"effect name {effect!r}: 1-100 letters, digits, '_', '.', ':' or '-', starting "
            "with a letter or digit"
        )
    return effect


Check = Callable[[], bool]


class Journal:
    """The effects journal of one run, on its own record (:class:`RunRecordSite`)."""

    def __init__(self, site: RunRecordSite) -> None:
        self._site = site

    @contextmanager
    def once(self, effect: str, check: Check | None = None) -> Iterator[bool]:
        validate(effect)
        if check is not None and not callable(check):
            raise InvalidEffect(f"effect {effect!r}: check must be a callable returning a bool")
        first = self._begin(effect, check)
        yield first
        if first:
            self._write(effect, EffectState.DONE, expected_fence=self._site.token)

    def _begin(self, effect: str, check: Check | None) -> bool:
        """Record the intent, or learn from the refusal what an earlier run did."""
        seen = self._try(effect, EffectState.INTENT, expected_fence=None)
        if seen is None:
            return True
        entry = (seen.get(JOURNAL_ATTRIBUTE) or {}).get(effect)
        if not self._holds(seen) or entry is None:
            raise self._fenced(seen)
        if entry.get("state") == EffectState.DONE:
            return False
        if check is None:
            raise Uncertain(self._site.label, effect, entry)
        happened = bool(check())
        state = EffectState.DONE if happened else EffectState.INTENT
        self._write(effect, state, expected_fence=int(entry.get("fence", 0)))
        return not happened

    def _write(self, effect: str, state: EffectState, *, expected_fence: int) -> None:
        seen = persist(
            lambda: self._try(effect, state, expected_fence=expected_fence),
            time_left_s=self._site.time_left_s,
            sleep=self._site.sleep,
        )
        if seen is not None and not self._landed(seen, effect, state):
            raise self._fenced(seen)

    def _try(self, effect: str, state: EffectState, *, expected_fence: int | None) -> Item | None:
        """One conditional write of the entry: None if applied, else the record that refused it.

        ``expected_fence`` None: the entry must be absent (a first intent); else the entry must
        still be the one of that fence (this run's own, or the earlier run's it takes over)."""
        site = self._site
        update = Update().set_in(
            JOURNAL_ATTRIBUTE,
            effect,
            {"state": state.value, "fence": site.token, "at": iso(site.clock())},
        )
        update.condition(update.eq(site.token_attribute, site.token))
        if site.running is not None:
            update.condition(update.eq("status", site.running))
        entry = update.path(JOURNAL_ATTRIBUTE, effect)
        if expected_fence is None:
            update.condition(f"attribute_not_exists({entry})")
        else:
            fence = update.path(JOURNAL_ATTRIBUTE, effect, "fence")
            update.condition(f"{fence} = {update.value(expected_fence)}")
        try:
            site.client.update_item(
                TableName=site.table,
                Key=to_wire(site.key),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **update.request(),
            )
        except ClientError as error:
            if is_condition_failure(error):
                return old_item(error) or {}
            raise
        return None

    def _holds(self, seen: Item) -> bool:
        site = self._site
        running = site.running is None or seen.get("status") == site.running
        return seen.get(site.token_attribute) == site.token and running

    def _landed(self, seen: Item, effect: str, state: EffectState) -> bool:
        """A refusal that shows this very write, applied by a try whose answer was lost."""
        entry = (seen.get(JOURNAL_ATTRIBUTE) or {}).get(effect) or {}
        return (
            self._holds(seen)
            and entry.get("fence") == self._site.token
            and entry.get("state") == state.value
        )

    def _fenced(self, seen: Item) -> Fenced:
        site = self._site
        newer = seen.get(site.token_attribute)
        return Fenced(
            f"{site.label} (effects journal)",
            str(site.token),
            str(newer) if newer is not None else None,
        )


def journal_entries(item: Item | None) -> dict[str, dict[str, Any]]:
    """The journal a record holds: effect -> {state, fence, at} (empty if none)."""
    return dict((item or {}).get(JOURNAL_ATTRIBUTE) or {})
