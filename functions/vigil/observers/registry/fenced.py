"""The container's side of the registry: claim, heartbeat, checkpoint and exit report.

Every write is fenced by ``generation``: the reconciler bumps the generation when it replaces a
task, and from then on every write of the old container fails, which is how it learns it was
replaced. The writes still bump ``version`` so that the read-modify-write writers (operators, the
reconciler) see the change. A container's writes and reads name keys of its own kind's partition
only (``RegistryRef.kind``): its role reaches no other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Sleeper, epoch_ms, iso
from vigil.contract.hosts import HOST_EXIT, HOST_EXIT_RAN_MS, OBSERVER_HOST
from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE
from vigil.contract.observers import UNCERTAIN_REASON, ExitCode, status_fields
from vigil.dynamo import Item, Update, from_wire, is_condition_failure, old_item, truncate
from vigil.fenced_write import RunRecordSite
from vigil.observers.model import (
    Desired,
    LastExit,
    Observer,
    Status,
    from_item,
    is_observer_item,
    validate_checkpoint,
)
from vigil.observers.registry.errors import (
    Fenced,
    GivenUp,
    ObserverNotFound,
    PlacedElsewhere,
    StopRequested,
)
from vigil.observers.registry.table import RegistryTable


class FencedWrites(RegistryTable):
    def claim_generation(self, name: str, generation: int, *, host: str | None = None) -> Observer:
        """The container of ``generation`` announces it runs: status RUNNING, first heartbeat.

        Only from STARTING (or RUNNING, a repeated claim): the reconciler records STARTING with
        the generation, before RunTask, so any other status means it has since given up on this
        generation (FAILED, PENDING in a backoff, STOPPING, STOPPED). A pooled observer's claim
        also needs the record to place it on ``host`` (raises PlacedElsewhere otherwise).
        """
        now = self._clock()
        status, unlisted = status_fields(Status.RUNNING)
        update = _beat(Update(), now).set_all({**status, "updated_at": iso(now)})
        update.set_default(JOURNAL_ATTRIBUTE, {})  # ctx.once's journal, kept across generations
        update.remove(*unlisted)
        update.condition(
            update.eq("desired", Desired.RUNNING.value),
            update.one_of("status", Status.STARTING.value, Status.RUNNING.value),
        )
        try:
            answer = self._update(name, generation, update, return_values="ALL_NEW", host=host)
        except StopRequested as refused:
            old = refused.seen
            if old is not None and old.get("desired") == Desired.RUNNING.value:
                raise GivenUp(name, generation, str(old.get("status"))) from refused
            raise
        return from_item(from_wire(answer["Attributes"]) or {})

    def heartbeat(self, name: str, generation: int) -> Observer:
        """Prove the container is alive. Returns the record so the caller sees a stop request."""
        update = _beat(Update(), self._clock())
        answer = self._update(name, generation, update, return_values="ALL_NEW")
        return from_item(from_wire(answer["Attributes"]) or {})

    def checkpoint(self, name: str, generation: int, state: dict[str, Any]) -> None:
        update = Update().set_all(
            {"checkpoint": validate_checkpoint(state), "checkpoint_at": iso(self._clock())}
        )
        self._update(name, generation, update.increment("version"))

    def record_site(
        self,
        name: str,
        generation: int,
        time_left_s: Callable[[], float],
        sleep: Sleeper = time.sleep,
    ) -> RunRecordSite:
        """Where ``ctx.once`` journals effects: the observer's record, while ``generation`` holds
        it (any status: a stopping generation may still finish an effect)."""
        kind = self.kind_of(name)
        if kind is None:
            raise ObserverNotFound(name)
        return RunRecordSite(
            client=self._client,
            table=self._table,
            key=self._ref.plain_key(kind, name),
            token_attribute="generation",
            token=generation,
            running=None,
            label=f"observer {name} generation {generation}",
            rolling=True,
            time_left_s=time_left_s,
            clock=self._clock,
            sleep=sleep,
        )

    def mark_uncertain(self, name: str, generation: int, effect: str, reason: str) -> None:
        """``ctx.once`` met ``effect`` begun by an earlier generation and never recorded done: the
        record says which (``uncertain_effect``) and why, until a person settles it."""
        now = self._clock()
        update = Update().set_all(
            {UNCERTAIN_EFFECT_ATTRIBUTE: effect, UNCERTAIN_REASON: truncate(reason)}
        )
        update.set("updated_at", iso(now))
        self._update(name, generation, update.increment("version"))

    def report_exit(
        self,
        name: str,
        generation: int,
        *,
        exit_code: int,
        reason: str,
        task_arn: str | None,
        stopped: bool,
    ) -> None:
        """The container's own account of how it ended. ``stopped``: it ended because the
        registry asked it to, so the observer is STOPPED (unless someone wanted it back since)."""
        now = self._clock()
        last_exit = LastExit(
            exit_code=exit_code, reason=truncate(reason), task_arn=task_arn, at=now
        )
        update = Update().set_all({"last_exit": last_exit.to_json(), "updated_at": iso(now)})
        update.increment("version")
        if stopped:
            status, unlisted = status_fields(Status.STOPPED)
            update.set_all(status).remove(*unlisted)
            update.condition(update.eq("desired", Desired.STOPPED.value))
        self._update(name, generation, update)

    def report_host_exit(
        self,
        name: str,
        generation: int,
        *,
        host: str,
        exit_code: ExitCode,
        reason: str,
        ran_s: float | None = None,
    ) -> bool:
        """A pooled observer's host records how its child process ended (``HOST_EXIT``), which the
        reconciler reads as it reads a dedicated task's STOPPED event. Fenced by generation and
        host: False (nothing written) when the observer has moved on, which is no error.
        ``ran_s``: how long the child ran, by the host's monotonic clock (``ran_ms``: the
        reconciler's failure count reads it instead of comparing the host's clock with its own)."""
        now = self._clock()
        report: dict[str, Any] = {
            "generation": generation,
            "exit_code": int(exit_code),
            "reason": truncate(reason),
            "at_ms": epoch_ms(now),
        }
        if ran_s is not None:
            report[HOST_EXIT_RAN_MS] = round(ran_s * 1000)
        update = Update().set_all({HOST_EXIT: report, "updated_at": iso(now)})
        try:
            self._update(name, generation, update.increment("version"), host=host)
        except Fenced:
            return False
        return True

    def _update(
        self,
        name: str,
        generation: int,
        update: Update,
        *,
        return_values: str = "NONE",
        host: str | None = None,
    ) -> dict[str, Any]:
        """One write conditional on ``generation`` (and on ``host`` when given, and whatever
        ``update`` adds): raises Fenced when the generation moved on, PlacedElsewhere when the
        host did, StopRequested when only the rest failed."""
        update.condition(update.eq("generation", generation))
        if host is not None:
            update.condition(update.eq(OBSERVER_HOST, host))
        kind = self.kind_of(name)
        if kind is None:
            raise Fenced(name, generation, None)  # no record of that name: as a record gone
        try:
            return dict(
                self._client.update_item(
                    TableName=self._table,
                    Key=self._ref.key(kind, name),
                    ReturnValues=return_values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **update.request(),
                )
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            old = old_item(error)
            _raise_if_fenced(name, generation, old)
            if host is not None and old is not None and old.get(OBSERVER_HOST) != host:
                raise PlacedElsewhere(name, generation, host, old.get(OBSERVER_HOST)) from error
            raise StopRequested(name, seen=old) from error


def _beat(update: Update, now: datetime) -> Update:
    update.set_all({"heartbeat_at": iso(now), "heartbeat_at_ms": epoch_ms(now)})
    return update.increment("version")


def _raise_if_fenced(name: str, generation: int, old: Item | None) -> None:
    if not is_observer_item(old):
        raise Fenced(name, generation, None)
    assert old is not None
    current = int(old.get("generation", 0))
    if current != generation:
        raise Fenced(name, generation, current)
