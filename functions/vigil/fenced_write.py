"""What the guards know of ``run.fenced`` and ``run.once`` without importing :mod:`vigil.effects`.

The guards (jobs, tasks) and the observer runtime treat a refused fenced write as their run being
superseded, not as a crash, and an effect found begun but not known finished as UNCERTAIN; they
must not load the effects for a run that never used them (if the module is not loaded, no write
went through it and no effect was journalled).

A body may catch what the effects raised (a per-item loop around ``run.once`` that logs and goes
on): the run's :class:`Halt` keeps it, noted where it was raised, so the guard ends the run
UNCERTAIN or FENCED whatever the body did with the exception.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vigil.clock import Clock, Sleeper, system_clock

if TYPE_CHECKING:
    from vigil.dynamo import Update


def refused_write(error: BaseException) -> bool:
    effects = sys.modules.get("vigil.effects")
    return effects is not None and isinstance(error, effects.Fenced)


def uncertain_effect(error: BaseException) -> str | None:
    """The effect's name when ``error`` is ``run.once`` stopping the run on an effect whose
    intent was recorded by an earlier run without its completion; else None."""
    effects = sys.modules.get("vigil.effects")
    if effects is not None and isinstance(error, effects.Uncertain):
        return str(error.effect)
    return None


class RunCancelled(RuntimeError):
    """Someone asked to cancel the run (a task's ``cancel`` while it ran): stop. The base of
    ``vigil.tasks.errors.TaskCancelled``, here so the effects can raise it without importing
    the tasks."""


def is_cancelled(error: BaseException) -> bool:
    return isinstance(error, RunCancelled)


class Halt:
    """What must end a run, noted where the effects raised it rather than where the body let it
    go: the first ``Uncertain`` (an effect an earlier run left unfinished), the first
    ``Fenced`` (a newer run wrote first), and the first block of ``run.once`` that raised after
    its intent (the effect's fate unknown, which only matters if the body then returns).

    The guard asks :meth:`stop` once the body is over: an UNCERTAIN effect outranks a refused
    write (a person must settle it; a superseded run's outcome is refused on its own anyway)."""

    def __init__(self) -> None:
        self.uncertain: BaseException | None = None
        self.fenced: BaseException | None = None
        self.unfinished: tuple[str, BaseException] | None = None
        self.cancelled: RunCancelled | None = None
        """The run was told it is cancelled: its later fenced writes are refused with it."""

    def note(self, error: BaseException) -> None:
        """Keep ``error`` if it is one that ends the run (a first of its kind); else nothing."""
        if self.uncertain is None and uncertain_effect(error) is not None:
            self.uncertain = error
        elif self.fenced is None and refused_write(error):
            self.fenced = error
        elif self.cancelled is None and isinstance(error, RunCancelled):
            self.cancelled = error

    def refuse_if_cancelled(self) -> None:
        """Before any fenced write: a run told it is cancelled writes nothing more."""
        if self.cancelled is not None:
            raise self.cancelled

    def note_unfinished(self, effect: str, error: BaseException) -> None:
        """``run.once`` for ``effect`` raised ``error`` with an intent left unresolved: its block
        raised after recording the intent, its completion was not recorded, or the ``check`` of
        an earlier run's intent failed."""
        if self.unfinished is None and uncertain_effect(error) is None:
            self.unfinished = (effect, error)

    def stop(self, *, returned: bool) -> BaseException | None:
        """What ends the run: an ``Uncertain`` (or, when the body ``returned``, an unfinished
        block's :class:`UnfinishedEffect`), else a ``Fenced``, else None. A body that raised
        leaves an unfinished block to its retry, which finds the intent (``check`` or
        UNCERTAIN)."""
        if self.uncertain is not None:
            return self.uncertain
        if returned and self.unfinished is not None and self.fenced is None:
            effect, error = self.unfinished
            return UnfinishedEffect(effect, error)
        return self.fenced


class UnfinishedEffect(Exception):
    """The body returned after ``run.once`` raised with an intent left unresolved (and the body
    caught it): its own block raised after the intent, the completion was not recorded, or the
    ``check`` of an earlier run's intent failed; so the run ends UNCERTAIN on the effect."""

    def __init__(self, effect: str, error: BaseException) -> None:
        super().__init__(
            f"effect {effect!r}: {type(error).__name__} ({error}) with its intent recorded and "
            "not resolved, and the body went on: whether it happened is unknown; settle it"
        )
        self.effect = effect


def stopped_on(error: BaseException) -> str | None:
    """The effect a run stops UNCERTAIN on, from what :meth:`Halt.stop` returned (or the body
    raised): an earlier run's unfinished effect, or the run's own unfinished block."""
    if isinstance(error, UnfinishedEffect):
        return error.effect
    return uncertain_effect(error)


@dataclass(frozen=True)
class RunRecordSite:
    """Where a run's own record is, and how a write proves the run still holds it: what
    ``run.once`` needs to journal effects on that record (:mod:`vigil.effects.journal`)."""

    client: Any
    table: str
    key: Mapping[str, Any]
    token_attribute: str
    token: int
    running: str | None
    """The status value of a record whose run is under way; None where the token alone says it
    (an observer's generation: a stopping observer's generation still holds its record)."""
    label: str
    time_left_s: Callable[[], float]
    rolling: bool = False
    """The journal outlives any one run (an observer's, across its generations): when full, it
    forgets its oldest finished effects to make room, instead of refusing the new one."""
    clock: Clock = system_clock
    sleep: Sleeper = time.sleep
    cancel: CancelCheck | None = None
    """Where a cancel request is noted on the record (tasks): a run's new intents and strict
    writes are refused once one is, with the error it makes."""

    def cancelled(self, seen: Mapping[str, Any] | None) -> RunCancelled | None:
        """The cancellation to raise when ``seen`` (a refusal's record) is still this run's but
        someone asked to cancel it; else None."""
        if self.cancel is None or not self.holds(seen) or seen is None:
            return None
        if not seen.get(self.cancel.attribute):
            return None
        return self.cancel.error(seen)

    def holds(self, seen: Mapping[str, Any] | None) -> bool:
        """Whether ``seen`` (the record as read, plain values) is still this run's."""
        if seen is None:
            return False
        running = self.running is None or seen.get("status") == self.running
        return seen.get(self.token_attribute) == self.token and running

    def while_held(self, update: Update, *, starting: bool = False) -> Update:
        """``update`` conditional on the record still being this run's: :meth:`holds`, in
        DynamoDB's terms. ``starting`` (a new intent, a strict write): also on no cancel having
        been asked for; what finishes an effect already begun is never refused by a cancel."""
        update.condition(update.eq(self.token_attribute, self.token))
        if self.running is not None:
            update.condition(update.eq("status", self.running))
        if starting and self.cancel is not None:
            update.condition(update.absent(self.cancel.attribute))
        return update


@dataclass(frozen=True)
class CancelCheck:
    """A record's cancel request: the attribute that notes it, and the error a run that meets
    it raises (built from the record as seen)."""

    attribute: str
    error: Callable[[Mapping[str, Any]], RunCancelled]


def once(
    record: RunRecordSite | None,
    effect: str,
    check: Callable[[], bool] | None,
    halt: Halt | None = None,
) -> AbstractContextManager[bool]:
    """``run.once`` of a job, task or observer run (:mod:`vigil.effects.journal`): the journal is
    loaded on first use, like ``run.fenced``; what it raises is noted on the run's ``halt``."""
    from vigil.effects import Journal

    if record is None:
        raise RuntimeError("this run has no record to journal effects on")
    return Journal(record, halt).once(effect, check)
