"""The operators' side of the registry: create, stop, restart and list (the API and the CLI).

Writes are read-modify-write under optimistic concurrency (``version = :expected``), retried a few
times on a conflict with the reconciler. The fleet maximum is exact: the ``active`` counter on the
``#fleet`` item counts observers whose desired state is RUNNING and moves in the same transaction
as the desired state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, Sleeper, iso, system_clock
from vigil.contract.hosts import OBSERVER_HOST, OBSERVER_TASK_DEFINITION
from vigil.contract.journal import UNCERTAIN_EFFECT_ATTRIBUTE
from vigil.contract.observers import (
    FLEET_ATTRIBUTE,
    FLEET_COUNTER_KEY,
    NAMED_KIND,
    NAMES_PARTITION,
    REGISTRY_PARTITION,
    STATUS_REASON,
    STOPPED_ATTRIBUTE,
    STOPPED_INDEX,
    UNCERTAIN_REASON,
    status_fields,
)
from vigil.dynamo import (
    Item,
    Update,
    batch_get,
    cancellation_reasons,
    error_code,
    from_wire,
    to_wire,
)
from vigil.observers.model import (
    FLEET_INDEX,
    FLEET_INDEX_ATTRIBUTES,
    FLEET_PARTITION,
    Desired,
    Observer,
    Status,
    from_item,
    is_observer_item,
    to_item,
    validate_config,
    validate_name,
)
from vigil.observers.registry.cursor import decode_cursor, encode_cursor
from vigil.observers.registry.errors import (
    MAX_OPTIMISTIC_ATTEMPTS,
    FleetFull,
    InvalidCursor,
    ObserverExists,
    VersionConflict,
)
from vigil.observers.registry.layout import RegistryRef
from vigil.observers.registry.table import RegistryTable, count_update, put_new
from vigil.settle import NotSettleable, verdict

MAX_PAGE = 100
"""BatchGetItem's limit, and small enough that 100 configs of 32 KB fit in a Lambda response."""
REFUSED = "ConditionalCheckFailed"
LIST_ATTRIBUTES = (
    "name",
    FLEET_ATTRIBUTE,
    STOPPED_ATTRIBUTE,
    "config",
    *FLEET_INDEX_ATTRIBUTES,
    OBSERVER_HOST,
    OBSERVER_TASK_DEFINITION,
    STATUS_REASON,
    UNCERTAIN_EFFECT_ATTRIBUTE,
    UNCERTAIN_REASON,
)
"""What a listed observer carries: everything but its checkpoint (and its journal)."""
_LIVE_TASK = (Status.STARTING, Status.RUNNING, Status.STOPPING)
_REARMED = (Status.FAILED, Status.STOPPED)


@dataclass(frozen=True)
class Page:
    observers: list[Observer]
    cursor: str | None
    """Pass back to read the next page; None on the last page."""


@dataclass(frozen=True)
class _Change:
    sets: dict[str, Any]
    removes: tuple[str, ...] = ()
    count: int = 0
    also: Callable[[Update], object] | None = None
    """More of the same write (clauses, conditions) that a plain set or remove cannot say."""


def _restart(current: Observer) -> _Change:
    """``restart``'s change (also the end of a settlement): see ``request_restart``."""
    sets: dict[str, Any] = {
        "restart_generation": current.generation,
        "consecutive_failures": 0,
        "desired": Desired.RUNNING.value,
    }
    unlisted: tuple[str, ...] = ()
    if current.status in _REARMED:
        status, unlisted = status_fields(Status.PENDING)
        sets.update(status)
    return _Change(
        sets=sets,
        removes=("next_start_at", "next_start_at_ms", "failure_reason", *unlisted),
        count=+1 if current.desired is Desired.STOPPED else 0,
    )


def _refusal(name: str, effect: str, current: Observer, generation: int) -> str:
    if current.generation != generation:
        return (
            f"observer {name!r} moved from generation {generation} to {current.generation} "
            "meanwhile: look at it again; nothing changed"
        )
    if current.uncertain_effect is None:
        return f"observer {name!r} is {current.status.value}, not uncertain: nothing changed"
    if current.status not in _REARMED:
        # Its generation's exit is still on its way to the reconciler, which would mark it
        # FAILED after a settlement's restart: settle once it has.
        return (
            f"observer {name!r} is still {current.status.value} (its uncertain generation "
            "has not ended yet): settle it once it is FAILED; nothing changed"
        )
    return (
        f"observer {name!r} is uncertain on effect {current.uncertain_effect!r}, not "
        f"{effect!r}: nothing changed"
    )


class ObserverCommands(RegistryTable):
    def __init__(
        self,
        client: Any,
        table: str | RegistryRef,
        *,
        clock: Clock = system_clock,
        max_observers: int | None = None,
        sleep: Sleeper = time.sleep,
    ) -> None:
        super().__init__(client, table, clock=clock)
        self._max = max_observers
        self._sleep = sleep

    # -- reads -------------------------------------------------------------------------------

    def list_page(
        self, *, status: Status | None = None, limit: int = MAX_PAGE, cursor: str | None = None
    ) -> Page:
        """One page in name order: names from the fleet index (every observer but the STOPPED
        ones) and the stopped index, merged; full items by BatchGetItem.

        Neither index holds config (they stay small for the reconciler's passes), so the page's
        items are fetched by key, at most 100 per request, without their checkpoints. A status
        filter reads the one index that holds that status. The cursor is the last name the page
        covers, so it means the same in both indexes.
        """
        limit = max(1, min(limit, MAX_PAGE))
        after = decode_cursor(cursor)
        if status is None:
            indexes = [(FLEET_INDEX, FLEET_ATTRIBUTE), (STOPPED_INDEX, STOPPED_ATTRIBUTE)]
        elif status is Status.STOPPED:
            indexes = [(STOPPED_INDEX, STOPPED_ATTRIBUTE)]
        else:
            indexes = [(FLEET_INDEX, FLEET_ATTRIBUTE)]
        names: dict[str, str] = {}
        covered: str | None = None  # the names up to here are all read; None: all of them
        for index, attribute in indexes:
            found, last = self._names(index, attribute, status, after, limit)
            names.update(found)
            if last is not None:
                covered = last if covered is None else min(covered, last)
        page = sorted(n for n in names if covered is None or n <= covered)
        if len(page) > limit:
            page, covered = page[:limit], page[limit - 1]
        observers = self._batch_get([(n, names[n]) for n in page])
        return Page(observers=observers, cursor=encode_cursor(covered) if covered else None)

    def _names(
        self, index: str, attribute: str, status: Status | None, after: str | None, limit: int
    ) -> tuple[dict[str, str], str | None]:
        """Up to ``limit`` names (with their kinds) after ``after`` from one index, and the last
        name read when the index holds more (None: it was read to its end)."""
        names: dict[str, str] = {}
        while len(names) < limit:
            condition = "#p = :p" + (" AND #name > :after" if after is not None else "")
            values: dict[str, Any] = {":p": FLEET_PARTITION}
            request: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": index,
                "KeyConditionExpression": condition,
                "ExpressionAttributeNames": {"#p": attribute, "#name": "name", "#kind": "kind"},
                "ProjectionExpression": "#name, #kind",
                # Limit counts evaluated items, so a filtered page can never overshoot.
                "Limit": limit - len(names),
            }
            if after is not None:
                values[":after"] = after
            if status is not None:
                request["FilterExpression"] = "#status = :status"
                request["ExpressionAttributeNames"]["#status"] = "status"
                values[":status"] = status.value
            request["ExpressionAttributeValues"] = to_wire(values)
            try:
                answer = self._client.query(**request)
            except ClientError as error:
                if after is not None and error_code(error) == "ValidationException":
                    raise InvalidCursor() from error
                raise
            for raw in answer.get("Items", []):
                item = from_wire(raw) or {}
                names[str(item["name"])] = str(item.get(REGISTRY_PARTITION, ""))
            last = from_wire(answer.get("LastEvaluatedKey"))
            if not last:
                return names, None
            after = str(last["name"])
        return names, after

    def iter_all(self, *, status: Status | None = None) -> Iterator[Observer]:
        cursor: str | None = None
        while True:
            page = self.list_page(status=status, cursor=cursor)
            yield from page.observers
            if page.cursor is None:
                return
            cursor = page.cursor

    def active_count(self) -> int:
        answer = self._client.get_item(
            TableName=self._table,
            Key=to_wire(self._ref.special(FLEET_COUNTER_KEY)),
            ConsistentRead=True,
        )
        item = from_wire(answer.get("Item"))
        return int(item.get("active", 0)) if item else 0

    # -- writes ------------------------------------------------------------------------------

    def create(self, name: str, kind: str, config: dict[str, Any]) -> Observer:
        """Register a new observer (PENDING, desired RUNNING) if the name is free and the fleet
        has room; both checks and both writes are one transaction."""
        now = self._clock()
        observer = Observer(
            name=validate_name(name),
            kind=kind,
            config=validate_config(config),
            desired=Desired.RUNNING,
            status=Status.PENDING,
            created_at=now,
            updated_at=now,
        )
        puts = [put_new(self._table, to_item(observer))]
        if self._ref.by_kind:
            # Its name's claim: names stay unique across kinds, and a name finds its kind.
            claim = {"kind": NAMES_PARTITION, "name": name, NAMED_KIND: kind}
            puts.append(put_new(self._table, claim))
        try:
            self._client.transact_write_items(TransactItems=[*puts, self._count_update(+1)])
        except ClientError as error:
            reasons = cancellation_reasons(error)
            if reasons is None:
                raise
            if any(code == REFUSED for code, _ in reasons[: len(puts)]):
                raise ObserverExists(name) from error
            if reasons[len(puts)][0] == REFUSED:
                raise self._fleet_full(reasons[len(puts)][1]) from error
            raise
        self._kinds[name] = kind
        return observer

    def request_stop(self, name: str) -> Observer:
        """Desired STOPPED. With a live task the status becomes STOPPING until the reconciler
        has stopped it; without one it is STOPPED at once. Idempotent."""

        def change(current: Observer) -> _Change | None:
            if current.desired is Desired.STOPPED:
                return None
            live = current.task_arn is not None and current.status in _LIVE_TASK
            status, unlisted = status_fields(Status.STOPPING if live else Status.STOPPED)
            return _Change(
                sets={"desired": Desired.STOPPED.value, **status},
                removes=("next_start_at", "next_start_at_ms", *unlisted),
                count=-1,
            )

        return self._read_modify_write(name, change)

    def request_restart(self, name: str) -> Observer:
        """Ask for a fresh task: the reconciler replaces any task of the current generation or
        older (``restart_generation``), clears backoff and the failure count, and re-arms a FAILED
        or STOPPED observer (which takes a place in the fleet again)."""
        return self._read_modify_write(name, _restart)

    def request_settle(self, name: str, effect: str, *, done: bool) -> Observer:
        """An operator's verdict on the effect ``ctx.once`` stopped the observer UNCERTAIN on,
        and the observer back: the journal's side of :func:`vigil.settle.verdict` (done: the
        next generation skips the effect; not done: it does it again), ``uncertain_*`` cleared,
        and a restart's re-arming, in the one conditional write a restart makes. Refused
        (:class:`NotSettleable`, nothing changed) unless the record is uncertain on ``effect``
        at the generation first read (a word about that generation's record), with no live
        task (FAILED or STOPPED: the reconciler has taken the generation's exit)."""
        first: list[int] = []

        def change(current: Observer) -> _Change:
            first.append(current.generation)
            stopped = current.status in _REARMED
            if current.uncertain_effect != effect or current.generation != first[0] or not stopped:
                raise NotSettleable(_refusal(name, effect, current, first[0]))
            restart = _restart(current)
            now = self._clock()
            return replace(
                restart,
                removes=(*restart.removes, UNCERTAIN_REASON),
                also=lambda update: verdict(update, effect, done=done, now=now).condition(
                    update.eq("generation", first[0])
                ),
            )

        return self._read_modify_write(name, change)

    # -- helpers ------------------------------------------------------------------------------

    def _read_modify_write(
        self, name: str, change: Callable[[Observer], _Change | None]
    ) -> Observer:
        """Apply ``change(current) -> _Change | None`` under ``version = :expected``, re-reading
        after a conflict; the fleet counter moves in the same transaction when it must."""
        for _ in range(MAX_OPTIMISTIC_ATTEMPTS):
            current = self.get(name)
            wanted: _Change | None = change(current)
            if wanted is None:
                return current
            update = Update().set_all({**wanted.sets, "updated_at": iso(self._clock())})
            update.increment("version").remove(*wanted.removes)
            update.condition(update.eq("version", current.version))
            if wanted.also is not None:
                wanted.also(update)
            items = [
                {"Update": {"TableName": self._table, "Key": self.key(name), **update.request()}}
            ]
            if wanted.count:
                items.append(self._count_update(wanted.count))
            try:
                self._client.transact_write_items(TransactItems=items)
            except ClientError as error:
                reasons = cancellation_reasons(error)
                if reasons is None:
                    raise
                if reasons[0][0] == REFUSED:
                    continue
                if len(reasons) > 1 and reasons[1][0] == REFUSED:
                    raise self._fleet_full(reasons[1][1]) from error
                raise
            return self.get(name)
        raise VersionConflict(name)

    def _count_update(self, delta: int) -> dict[str, Any]:
        """Move the fleet's active count; an increase is refused at the maximum."""
        return count_update(self._ref, delta, self._max)

    def _fleet_full(self, counter: Item | None) -> FleetFull:
        assert self._max is not None
        return FleetFull(self._max, int(counter["active"]) if counter else None)

    def _batch_get(self, names: list[tuple[str, str]]) -> list[Observer]:
        """Full items (minus checkpoints) for up to 100 (name, kind), in the order given."""
        if not names:
            return []
        items = batch_get(
            self._client,
            self._table,
            [self._ref.plain_key(kind, name) for name, kind in names],
            LIST_ATTRIBUTES,
            sleep=self._sleep,
        )
        found = {item["name"]: from_item(item) for item in items if is_observer_item(item)}
        # An observer deleted between the index read and this one is simply absent.
        return [found[n] for n, _ in names if n in found]
