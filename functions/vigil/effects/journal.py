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
(``f"alert:{incident}"``); being an observer's for years, it is *rolling*: full, it forgets
its oldest finished effects to make room (never an unfinished one). Its record holds the run
while its generation does (``running`` None: a stopping observer's generation may still finish
an effect).

A block that raises leaves the intent without its completion: whether the effect happened before
the error is exactly what is not known.

Each block's writes carry a ``mark`` drawn for that block, so a write whose answer was lost (a
timeout, botocore's own retry) and whose repeat is refused is recognised as this block's own: an
intent found with this block's mark is the effect not yet done, not an earlier run's of unknown
fate. A ``check`` must answer a bool (a forgotten ``return`` is no "not sent"). The journal holds
at most :data:`MAX_EFFECTS` entries (the intent's condition counts them, in its own request), so
the record it lives on stays well inside DynamoDB's 400 KB item and its run can still finish.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from vigil.clock import iso
from vigil.contract.journal import JOURNAL_ATTRIBUTE, EffectState
from vigil.dynamo import Item, Update, is_condition_failure, old_item, to_wire
from vigil.effects.fence import Fenced
from vigil.fenced_write import Halt, RunRecordSite
from vigil.persist import persist

EFFECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")
MAX_EFFECTS = 1000
"""Entries one record's journal holds: 1,000 of the largest (about 210 bytes each) and an
observer's 64 KB checkpoint stay under 300 KB of DynamoDB's 400 KB item."""
FORGET_BATCH = 100
"""Finished effects a full rolling journal (an observer's) forgets at once, oldest first: one
request per batch, its REMOVE and conditions well inside DynamoDB's 4 KB expression limits."""
MARK_CHARS = 12
T = TypeVar("T")


class InvalidEffect(ValueError):
    """An effect name the journal refuses, before any request."""


class JournalFull(InvalidEffect):
    """The run's record already journals :data:`MAX_EFFECTS` effects: a new one is refused
    before it begins (nothing written), and the record stays writable for the run's outcome."""


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

_OPEN: set[tuple[str, str, int, str]] = set()
"""The blocks open in this process (record, run's token, effect): the journal alone cannot tell
this run's still-open block from one that raised, so a nested repeat is caught here, in memory."""


class Journal:
    """The effects journal of one run, on its own record (:class:`RunRecordSite`); what ends
    the run (``Uncertain``, ``Fenced``, a block that raised after its intent) is noted on the
    run's :class:`~vigil.fenced_write.Halt`, so a body that catches it cannot hide it."""

    def __init__(self, site: RunRecordSite, halt: Halt | None = None) -> None:
        self._site = site
        self._halt = halt if halt is not None else Halt()

    @contextmanager
    def once(self, effect: str, check: Check | None = None) -> Iterator[bool]:
        validate(effect)
        if check is not None and not callable(check):
            raise InvalidEffect(f"effect {effect!r}: check must be a callable returning a bool")
        block = self._block(effect)
        if block in _OPEN:
            raise InvalidEffect(
                f"{self._site.label}: effect {effect!r} is already open in this run (a block "
                "nested in its own block): nothing written; give the inner effect its own name"
            )
        _OPEN.add(block)
        try:
            mark = secrets.token_hex(MARK_CHARS // 2)
            first = self._noted(lambda: self._begin(effect, check, mark))
            try:
                yield first
            except BaseException as error:
                self._halt.note(error)
                if first:
                    self._halt.note_unfinished(effect, error)
                raise
            if first:
                try:
                    self._noted(
                        lambda: self._write(
                            effect, EffectState.DONE, mark, expected_fence=self._site.token
                        )
                    )
                except BaseException as error:  # the completion never recorded: still unknown
                    self._halt.note_unfinished(effect, error)
                    raise
        finally:
            _OPEN.discard(block)

    def _noted(self, step: Callable[[], T]) -> T:
        try:
            return step()
        except BaseException as error:
            self._halt.note(error)
            raise

    def _block(self, effect: str) -> tuple[str, str, int, str]:
        site = self._site
        return (
            site.table,
            json.dumps(dict(site.key), sort_keys=True, default=str),
            site.token,
            effect,
        )

    def _begin(
        self, effect: str, check: Check | None, mark: str, *, may_forget: bool = True
    ) -> bool:
        """Record the intent, or learn from the refusal what an earlier run did."""
        seen = self._persist(effect, EffectState.INTENT, mark, expected_fence=None)
        if seen is None or self._landed(seen, effect, EffectState.INTENT, mark):
            return True
        journal = seen.get(JOURNAL_ATTRIBUTE) or {}
        entry = journal.get(effect)
        cancelled = self._site.cancelled(seen)
        if cancelled is not None and (entry is None or entry.get("state") == EffectState.DONE):
            raise cancelled  # no new intent once a cancel is asked for; noted by _noted
        # An earlier run's unfinished intent goes on as without a cancel (Uncertain, or its
        # check): a cancel must not bury an effect whose fate nobody knows under CANCELLED.
        if not self._site.holds(seen):
            raise self._fenced(seen)
        if entry is None and may_forget and self._site.rolling and self._forget_oldest(journal):
            return self._begin(effect, check, mark, may_forget=False)
        if entry is None:
            # Held, no entry: the only condition left is the journal's size.
            raise JournalFull(
                f"{self._site.label}: effect {effect!r} refused, nothing done: the journal "
                f"already holds {len(journal)} effects, at most {MAX_EFFECTS} per record "
                "(DynamoDB's 400 KB item); journal fewer, larger effects"
            )
        if entry.get("state") == EffectState.DONE:
            return False
        if check is None:
            raise Uncertain(self._site.label, effect, entry)
        try:
            return self._resolve(effect, check, mark, int(entry.get("fence", 0)))
        except BaseException as error:
            # The earlier run's intent is still unresolved: a body that catches this and
            # returns must not end the run SUCCEEDED over an effect nobody will settle.
            self._halt.note_unfinished(effect, error)
            raise

    def _resolve(self, effect: str, check: Check, mark: str, earlier: int) -> bool:
        """An earlier run's unfinished intent, resolved by ``check``: True if this run does
        the effect (the intent taken over), False if it happened (recorded done, the entry
        still naming the earlier run)."""
        happened = check()
        if not isinstance(happened, bool):
            raise InvalidEffect(
                f"{self._site.label}: check of effect {effect!r} answered {happened!r}, not "
                "True (it happened) or False (it did not): the intent is kept, nothing sent"
            )
        if happened:  # the earlier run did it: the entry keeps naming that run
            self._write(effect, EffectState.DONE, mark, expected_fence=earlier, doer=earlier)
        else:  # taken over: this run does it
            self._write(effect, EffectState.INTENT, mark, expected_fence=earlier)
        return not happened

    def _forget_oldest(self, journal: Item) -> bool:
        """Remove the oldest :data:`FORGET_BATCH` finished entries of a full rolling journal, each
        only if still finished and the record still this run's; False if none is finished (a
        journal full of unfinished intents is a stuck run's, for a person)."""
        done = sorted(
            (str(entry.get("at", "")), name)
            for name, entry in journal.items()
            if isinstance(entry, dict) and entry.get("state") == EffectState.DONE
        )[:FORGET_BATCH]
        if not done:
            return False
        site = self._site
        update = Update()
        finished = update.value(EffectState.DONE.value)
        for _, name in done:
            update.remove_in(JOURNAL_ATTRIBUTE, name)
            update.condition(f"{update.path(JOURNAL_ATTRIBUTE, name, 'state')} = {finished}")
        self._site.while_held(update)

        def forget() -> None:
            try:
                site.client.update_item(
                    TableName=site.table, Key=to_wire(site.key), **update.request()
                )
            except ClientError as error:
                # Refused: another forget won the race or the run lost its record; the intent's
                # next try tells which.
                if not is_condition_failure(error):
                    raise

        persist(forget, time_left_s=site.time_left_s, sleep=site.sleep)
        return True

    def _write(
        self,
        effect: str,
        state: EffectState,
        mark: str,
        *,
        expected_fence: int,
        doer: int | None = None,
    ) -> None:
        seen = self._persist(effect, state, mark, expected_fence=expected_fence, doer=doer)
        if seen is not None and not self._landed(seen, effect, state, mark, doer):
            raise self._fenced(seen)

    def _persist(
        self,
        effect: str,
        state: EffectState,
        mark: str,
        *,
        expected_fence: int | None,
        doer: int | None = None,
    ) -> Item | None:
        """:meth:`_try`, retried through transient faults: a try that landed unanswered is
        refused on its repeat, which :meth:`_landed` recognises by the block's mark."""
        return persist(
            lambda: self._try(effect, state, mark, expected_fence=expected_fence, doer=doer),
            time_left_s=self._site.time_left_s,
            sleep=self._site.sleep,
        )

    def _try(
        self,
        effect: str,
        state: EffectState,
        mark: str,
        *,
        expected_fence: int | None,
        doer: int | None = None,
    ) -> Item | None:
        """One conditional write of the entry: None if applied, else the record that refused it.

        ``expected_fence`` None: the entry must be absent (a first intent) and the journal not
        full; else the entry must still be the one of that fence (this run's own, or the
        earlier run's it takes over). ``doer``: the token the entry names as the run that did
        the effect (default this run's; an earlier run's when a ``check`` says it did it)."""
        site = self._site
        fence = site.token if doer is None else doer
        update = Update().set_in(
            JOURNAL_ATTRIBUTE,
            effect,
            {"state": state.value, "fence": fence, "at": iso(site.clock()), "mark": mark},
        )
        self._site.while_held(update, starting=state is EffectState.INTENT)
        entry = update.path(JOURNAL_ATTRIBUTE, effect)
        if expected_fence is None:
            update.condition(f"attribute_not_exists({entry})")
            update.condition(update.size_lt(JOURNAL_ATTRIBUTE, MAX_EFFECTS))
        else:
            found = update.path(JOURNAL_ATTRIBUTE, effect, "fence")
            update.condition(f"{found} = {update.value(expected_fence)}")
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

    def _landed(
        self, seen: Item, effect: str, state: EffectState, mark: str, doer: int | None = None
    ) -> bool:
        """A refusal that shows this very write, applied by a try whose answer was lost."""
        entry = (seen.get(JOURNAL_ATTRIBUTE) or {}).get(effect) or {}
        return (
            self._site.holds(seen)
            and entry.get("fence") == (self._site.token if doer is None else doer)
            and entry.get("state") == state.value
            and entry.get("mark") == mark
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
