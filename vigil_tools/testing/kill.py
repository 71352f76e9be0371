"""Killing a run at a chosen request: how a test puts a function's process down mid-run.

``with vigil_stack.kill(KillAt("SendMessage")) as kill:`` kills the first invocation that makes
that request, right after AWS applied it (its answer never arrives: ``applied=True``) or right
before it leaves (``applied=False``); ``nth`` picks a later one, ``where`` which requests count
(their parameters). The killed invocation makes no further request (its guard cannot record a
failure, as a process that is gone cannot), Lambda reports it (``Runtime.ExitError``) and
retries an asynchronous invocation, and an SQS batch comes back after its visibility timeout::

    kill:       ... UpdateItem (intent) ─ email sent ─ UpdateItem (DONE) ✗  killed, nothing more
    the record: RUNNING (its lease runs out), the effect's intent without its completion

Only requests made inside a function's invocation count (not the test's own, nor an observer
container's). ``KillAt.effect_intent(name)`` and ``KillAt.effect_done(name)`` name the journal's
two writes of ``run.once(name)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.client import BaseClient

from vigil.contract.journal import JOURNAL_ATTRIBUTE, EffectState
from vigil_tools.emulator.lambda_runtime import (
    InvocationKilled,
    in_invocation,
    kill_invocation,
    killed_invocation,
)


@dataclass(frozen=True)
class KillAt:
    """Where a run dies: the ``nth`` request ``operation`` (an AWS operation's name, as botocore
    spells it: ``"PutObject"``, ``"SendMessage"``, ``"UpdateItem"``) for which ``where(params)``
    holds, once AWS applied it (``applied``) or before it left."""

    operation: str
    nth: int = 1
    applied: bool = True
    where: Callable[[dict[str, Any]], bool] | None = None

    def __post_init__(self) -> None:
        if not self.operation or not self.operation[0].isupper():
            raise ValueError(
                f"KillAt({self.operation!r}): name the AWS operation as botocore does "
                "(PutObject, SendMessage, UpdateItem)"
            )
        if self.nth < 1:
            raise ValueError(f"KillAt(nth={self.nth}): the first matching request is nth=1")

    @classmethod
    def effect_intent(cls, effect: str) -> KillAt:
        """Right after ``run.once(effect)`` recorded its intent: the effect never happened."""
        return cls("UpdateItem", applied=True, where=_journal_write(effect, EffectState.INTENT))

    @classmethod
    def effect_done(cls, effect: str) -> KillAt:
        """Right before ``run.once(effect)`` records its completion: the effect happened, the
        record does not say so."""
        return cls("UpdateItem", applied=False, where=_journal_write(effect, EffectState.DONE))

    def matches(self, operation: str, params: dict[str, Any]) -> bool:
        """Whether the request ``operation`` with these parameters is one that counts."""
        return operation == self.operation and (self.where is None or self.where(params))


def _journal_write(effect: str, state: EffectState) -> Callable[[dict[str, Any]], bool]:
    def write(params: dict[str, Any]) -> bool:
        names = set((params.get("ExpressionAttributeNames") or {}).values())
        values = (params.get("ExpressionAttributeValues") or {}).values()
        entry = {"S": state.value}
        return {JOURNAL_ATTRIBUTE, effect} <= names and any(
            isinstance(v, dict) and v.get("M", {}).get("state") == entry for v in values
        )

    return write


class Kill:
    """One kill, armed until it fires: ``fired`` says whether it did, ``operation`` at what."""

    def __init__(self, at: KillAt) -> None:
        self.at = at
        self.fired = False
        self._seen = 0

    def _request(
        self, made: Callable[[BaseClient, str, dict[str, Any]], Any]
    ) -> Callable[[BaseClient, str, dict[str, Any]], Any]:
        """``made`` (botocore's request), killing the invocation where ``at`` says."""

        def request(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
            if not in_invocation():
                return made(client, operation, params)
            dead = killed_invocation()
            if dead is not None:  # the process is gone: nothing more leaves it
                raise InvocationKilled(dead)
            if self.fired or not self.at.matches(operation, params):
                return made(client, operation, params)
            self._seen += 1
            if self._seen < self.at.nth:
                return made(client, operation, params)
            self.fired = True
            when = "after it was applied" if self.at.applied else "before it was sent"
            if self.at.applied:
                # Applied or refused by AWS (a condition, a validation): either way its answer
                # never reaches the dead process, which must not go on as if it had heard it.
                with contextlib.suppress(Exception):
                    made(client, operation, params)
            raise kill_invocation(f"killed at {operation} (request {self._seen}), {when}")

        return request


@contextmanager
def killing(at: KillAt) -> Iterator[Kill]:
    """Kill the first invocation that makes the request ``at`` names, while the block runs."""
    kill = Kill(at)
    made = BaseClient._make_api_call
    BaseClient._make_api_call = kill._request(made)  # type: ignore[method-assign]
    try:
        yield kill
    finally:
        BaseClient._make_api_call = made  # type: ignore[method-assign]
