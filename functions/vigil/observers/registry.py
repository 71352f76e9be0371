"""The observer registry's data access for the API, the CLI and the container runtime.

Every write is one conditional request (or one transaction), so a racing writer is refused by
DynamoDB rather than overwritten. Two kinds of condition guard the record:

- operator writes (create, stop, restart) are read-modify-write under optimistic concurrency:
  ``version = :expected``, retried a few times on a conflict with the reconciler;
- container writes (claim, heartbeat, checkpoint, exit report) are fenced by ``generation``: the
  reconciler bumps the generation when it replaces a task, and from then on every write of the old
  container fails, which is how it learns it was replaced. They still bump ``version`` so that
  read-modify-write writers see the change.

The fleet maximum is exact: the ``active`` counter on the ``#fleet`` item counts observers whose
desired state is RUNNING and moves in the same transaction as the desired state.

AWS errors become the domain exceptions below only here, in the ``except`` blocks around the
conditional writes (reading the old item or the transaction's cancellation reasons).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, epoch_ms, iso, system_clock
from vigil.dynamo import (
    Item,
    cancellation_reasons,
    error_code,
    from_wire,
    is_condition_failure,
    old_item,
    to_wire,
)
from vigil.observers.model import (
    FLEET_COUNTER_NAME,
    FLEET_INDEX,
    FLEET_INDEX_ATTRIBUTES,
    FLEET_PARTITION,
    NAME_PATTERN,
    Desired,
    LastExit,
    Observer,
    Status,
    from_item,
    is_observer_item,
    to_item,
    validate_checkpoint,
    validate_config,
    validate_name,
)

MAX_OPTIMISTIC_ATTEMPTS = 5
MAX_PAGE = 100
"""BatchGetItem's limit, and small enough that 100 configs of 32 KB fit in a Lambda response."""
_BATCH_GET_ATTEMPTS = 6
_LIVE_TASK = (Status.STARTING, Status.RUNNING, Status.STOPPING)
_REARMED = (Status.FAILED, Status.STOPPED)


class RegistryError(Exception):
    """Base of the registry's domain errors."""


class ObserverExists(RegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(f"an observer named {name!r} already exists")
        self.name = name


class ObserverNotFound(RegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no observer named {name!r}")
        self.name = name


class FleetFull(RegistryError):
    def __init__(self, limit: int, active: int | None) -> None:
        super().__init__(
            f"the fleet is at its maximum of {limit} running observers"
            + (f" ({active} active)" if active is not None else "")
        )
        self.limit = limit
        self.active = active


class Fenced(RegistryError):
    """The container's generation is no longer the observer's current one: it was replaced."""

    def __init__(self, name: str, generation: int, current: int | None) -> None:
        super().__init__(
            f"observer {name!r} generation {generation} was replaced"
            + (f" by generation {current}" if current is not None else " (record gone)")
        )
        self.name = name
        self.generation = generation
        self.current = current


class GivenUp(Fenced):
    """The generation is still current but the reconciler gave up on it before it claimed
    (FAILED, a backoff, a stop): a late container must not bring it back to RUNNING."""

    def __init__(self, name: str, generation: int, status: str) -> None:
        super().__init__(name, generation, generation)
        self.args = (
            f"observer {name!r} generation {generation} was given up before it claimed "
            f"(status {status})",
        )
        self.status = status


class StopRequested(RegistryError):
    """Claiming failed because the observer's desired state is STOPPED."""

    def __init__(self, name: str) -> None:
        super().__init__(f"observer {name!r} was asked to stop")
        self.name = name


class VersionConflict(RegistryError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"observer {name!r} kept changing under {MAX_OPTIMISTIC_ATTEMPTS} attempts; retry"
        )
        self.name = name


class InvalidCursor(RegistryError):
    def __init__(self) -> None:
        super().__init__("the pagination cursor is not one this API returned")


@dataclass(frozen=True)
class Page:
    observers: list[Observer]
    cursor: str | None
    """Pass back to read the next page; None on the last page."""


class ObserverRegistry:
    def __init__(
        self,
        client: Any,
        table: str,
        *,
        clock: Clock = system_clock,
        max_observers: int | None = None,
    ) -> None:
        self._client = client
        self._table = table
        self._clock = clock
        self._max = max_observers

    # -- reads -------------------------------------------------------------------------------

    def get(self, name: str) -> Observer:
        item = self._get_item(name)
        if item is None:
            raise ObserverNotFound(name)
        return from_item(item)

    def list_page(
        self, *, status: Status | None = None, limit: int = MAX_PAGE, cursor: str | None = None
    ) -> Page:
        """One page in name order: keys from the fleet index, full items by BatchGetItem.

        The index holds no config (it stays small for the reconciler's passes), so the page's
        items are fetched by key, at most 100 per request, without their checkpoints.
        """
        limit = max(1, min(limit, MAX_PAGE))
        start = _decode_cursor(cursor)
        names: list[str] = []
        while len(names) < limit:
            request: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": FLEET_INDEX,
                "KeyConditionExpression": "fleet = :fleet",
                "ExpressionAttributeValues": to_wire({":fleet": FLEET_PARTITION}),
                "ExpressionAttributeNames": {"#name": "name"},
                "ProjectionExpression": "#name",
                # Limit counts evaluated items, so a filtered page can never overshoot.
                "Limit": limit - len(names),
            }
            if status is not None:
                request["FilterExpression"] = "#status = :status"
                request["ExpressionAttributeNames"]["#status"] = "status"
                request["ExpressionAttributeValues"].update(to_wire({":status": status.value}))
            if start:
                request["ExclusiveStartKey"] = start
            try:
                answer = self._client.query(**request)
            except ClientError as error:
                if request.get("ExclusiveStartKey") is not None and (
                    error_code(error) == "ValidationException"
                ):
                    raise InvalidCursor() from error
                raise
            names += [str((from_wire(i) or {})["name"]) for i in answer.get("Items", [])]
            start = answer.get("LastEvaluatedKey")
            if not start:
                break
        observers = self._batch_get(names)
        return Page(observers=observers, cursor=_encode_cursor(start) if start else None)

    def iter_all(self, *, status: Status | None = None) -> Iterator[Observer]:
        cursor: str | None = None
        while True:
            page = self.list_page(status=status, cursor=cursor)
            yield from page.observers
            if page.cursor is None:
                return
            cursor = page.cursor

    def active_count(self) -> int:
        item = self._get_item(FLEET_COUNTER_NAME)
        return int(item.get("active", 0)) if item else 0

    # -- operator writes ---------------------------------------------------------------------

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
        put = {
            "Put": {
                "TableName": self._table,
                "Item": to_wire(to_item(observer)),
                "ConditionExpression": "attribute_not_exists(#name)",
                "ExpressionAttributeNames": {"#name": "name"},
                "ReturnValuesOnConditionCheckFailure": "NONE",
            }
        }
        try:
            self._client.transact_write_items(TransactItems=[put, self._count_update(+1)])
        except ClientError as error:
            reasons = cancellation_reasons(error)
            if reasons is None:
                raise
            if reasons[0][0] == "ConditionalCheckFailed":
                raise ObserverExists(name) from error
            if reasons[1][0] == "ConditionalCheckFailed":
                raise self._fleet_full(reasons[1][1]) from error
            raise
        return observer

    def request_stop(self, name: str) -> Observer:
        """Desired STOPPED. With a live task the status becomes STOPPING until the reconciler
        has stopped it; without one it is STOPPED at once. Idempotent."""

        def change(current: Observer) -> _Change | None:
            if current.desired is Desired.STOPPED:
                return None
            live = current.task_arn is not None and current.status in _LIVE_TASK
            status = Status.STOPPING if live else Status.STOPPED
            return _Change(
                sets={"desired": Desired.STOPPED.value, "status": status.value},
                removes=("next_start_at", "next_start_at_ms"),
                count=-1,
            )

        return self._read_modify_write(name, change)

    def request_restart(self, name: str) -> Observer:
        """Ask for a fresh task: the reconciler replaces any task of the current generation or
        older (``restart_generation``), clears backoff and the failure count, and re-arms a FAILED
        or STOPPED observer (which takes a place in the fleet again)."""

        def change(current: Observer) -> _Change:
            sets: dict[str, Any] = {
                "restart_generation": current.generation,
                "consecutive_failures": 0,
                "desired": Desired.RUNNING.value,
            }
            if current.status in _REARMED:
                sets["status"] = Status.PENDING.value
            return _Change(
                sets=sets,
                removes=("next_start_at", "next_start_at_ms", "failure_reason"),
                count=+1 if current.desired is Desired.STOPPED else 0,
            )

        return self._read_modify_write(name, change)

    # -- container writes (fenced by generation) ---------------------------------------------

    def claim_generation(self, name: str, generation: int) -> Observer:
        """The container of ``generation`` announces it runs: status RUNNING, first heartbeat.

        Only from STARTING (or RUNNING, a repeated claim): the reconciler records STARTING with
        the generation, before RunTask, so any other status means it has since given up on this
        generation (FAILED, PENDING in a backoff, STOPPING, STOPPED).
        """
        now = self._clock()
        try:
            answer = self._client.update_item(
                TableName=self._table,
                Key=_key(name),
                UpdateExpression=(
                    "SET #status = :running, heartbeat_at = :hb, heartbeat_at_ms = :hb_ms, "
                    "updated_at = :now, version = version + :one"
                ),
                ConditionExpression=(
                    "generation = :gen AND desired = :desired AND #status IN (:starting, :running)"
                ),
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=to_wire(
                    {
                        ":running": Status.RUNNING.value,
                        ":hb": iso(now),
                        ":hb_ms": epoch_ms(now),
                        ":now": iso(now),
                        ":one": 1,
                        ":gen": generation,
                        ":desired": Desired.RUNNING.value,
                        ":starting": Status.STARTING.value,
                    }
                ),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            old = old_item(error)
            self._raise_if_fenced(name, generation, old)
            assert old is not None
            if old.get("desired") == Desired.RUNNING.value:
                raise GivenUp(name, generation, str(old.get("status"))) from error
            raise StopRequested(name) from error
        return from_item(from_wire(answer["Attributes"]) or {})

    def heartbeat(self, name: str, generation: int) -> Observer:
        """Prove the container is alive. Returns the record so the caller sees a stop request."""
        now = self._clock()
        answer = self._fenced_update(
            name,
            generation,
            "SET heartbeat_at = :hb, heartbeat_at_ms = :hb_ms, version = version + :one",
            {":hb": iso(now), ":hb_ms": epoch_ms(now)},
            return_values="ALL_NEW",
        )
        return from_item(from_wire(answer["Attributes"]) or {})

    def checkpoint(self, name: str, generation: int, state: dict[str, Any]) -> None:
        now = self._clock()
        self._fenced_update(
            name,
            generation,
            "SET checkpoint = :cp, checkpoint_at = :now, version = version + :one",
            {":cp": validate_checkpoint(state), ":now": iso(now)},
        )

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
        last_exit = LastExit(exit_code=exit_code, reason=reason[:1000], task_arn=task_arn, at=now)
        expression = "SET last_exit = :exit, updated_at = :now, version = version + :one"
        values: dict[str, Any] = {":exit": last_exit.to_json(), ":now": iso(now)}
        condition = None
        if stopped:
            expression += ", #status = :stopped"
            values |= {":stopped": Status.STOPPED.value, ":desired": Desired.STOPPED.value}
            condition = "desired = :desired"
        self._fenced_update(name, generation, expression, values, extra_condition=condition)

    # -- helpers ------------------------------------------------------------------------------

    def _fenced_update(
        self,
        name: str,
        generation: int,
        expression: str,
        values: dict[str, Any],
        *,
        return_values: str = "NONE",
        extra_condition: str | None = None,
    ) -> dict[str, Any]:
        condition = "generation = :gen" + (f" AND {extra_condition}" if extra_condition else "")
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": _key(name),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": to_wire({**values, ":gen": generation, ":one": 1}),
            "ReturnValues": return_values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if "#status" in expression:
            request["ExpressionAttributeNames"] = {"#status": "status"}
        try:
            return dict(self._client.update_item(**request))
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            self._raise_if_fenced(name, generation, old_item(error))
            raise StopRequested(name) from error

    @staticmethod
    def _raise_if_fenced(name: str, generation: int, old: Item | None) -> None:
        if not is_observer_item(old):
            raise Fenced(name, generation, None)
        assert old is not None
        current = int(old.get("generation", 0))
        if current != generation:
            raise Fenced(name, generation, current)

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
            now = self._clock()
            sets = {**wanted.sets, "updated_at": iso(now)}
            names = {f"#a{i}": k for i, k in enumerate(sets)}
            values = {f":a{i}": v for i, v in enumerate(sets.values())}
            removes = [f"#r{i}" for i in range(len(wanted.removes))]
            names |= {f"#r{i}": k for i, k in enumerate(wanted.removes)}
            expression = "SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(sets)))
            expression += ", version = version + :one"
            if removes:
                expression += " REMOVE " + ", ".join(removes)
            update = {
                "TableName": self._table,
                "Key": _key(name),
                "UpdateExpression": expression,
                "ConditionExpression": "version = :expected",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": to_wire(
                    {**values, ":one": 1, ":expected": current.version}
                ),
            }
            items = [{"Update": update}]
            if wanted.count:
                items.append(self._count_update(wanted.count))
            try:
                self._client.transact_write_items(TransactItems=items)
            except ClientError as error:
                reasons = cancellation_reasons(error)
                if reasons is None:
                    raise
                if reasons[0][0] == "ConditionalCheckFailed":
                    continue
                if len(reasons) > 1 and reasons[1][0] == "ConditionalCheckFailed":
                    raise self._fleet_full(reasons[1][1]) from error
                raise
            return self.get(name)
        raise VersionConflict(name)

    def _count_update(self, delta: int) -> dict[str, Any]:
        """Move the fleet's active count; an increase is refused at the maximum."""
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": _key(FLEET_COUNTER_NAME),
            "UpdateExpression": "ADD active :delta",
            "ExpressionAttributeValues": to_wire({":delta": delta}),
        }
        if delta > 0 and self._max is not None:
            update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            update["ConditionExpression"] = "attribute_not_exists(active) OR active < :max"
            update["ExpressionAttributeValues"] = to_wire(
                {":delta": delta, ":max": self._max - delta + 1}
            )
        return {"Update": update}

    def _fleet_full(self, counter: Item | None) -> FleetFull:
        assert self._max is not None
        return FleetFull(self._max, int(counter["active"]) if counter else None)

    def _get_item(self, name: str) -> Item | None:
        answer = self._client.get_item(TableName=self._table, Key=_key(name), ConsistentRead=True)
        return from_wire(answer.get("Item"))

    def _batch_get(self, names: list[str]) -> list[Observer]:
        """Full items (minus checkpoints) for up to 100 names, in the order given."""
        if not names:
            return []
        found: dict[str, Observer] = {}
        keys: list[dict[str, Any]] = [_key(n) for n in names]
        projection = ", ".join(f"#p{i}" for i in range(len(_LIST_ATTRIBUTES)))
        attribute_names = {f"#p{i}": a for i, a in enumerate(_LIST_ATTRIBUTES)}
        for attempt in range(_BATCH_GET_ATTEMPTS):
            answer = self._client.batch_get_item(
                RequestItems={
                    self._table: {
                        "Keys": keys,
                        "ProjectionExpression": projection,
                        "ExpressionAttributeNames": attribute_names,
                    }
                }
            )
            for raw in answer.get("Responses", {}).get(self._table, []):
                item = from_wire(raw)
                if is_observer_item(item):
                    assert item is not None
                    found[item["name"]] = from_item(item)
            keys = answer.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", [])
            if not keys:
                break
            time.sleep(min(0.05 * 2**attempt, 1.0))  # DynamoDB asks callers to back off
        else:
            raise RegistryError(f"BatchGetItem left {len(keys)} keys unprocessed; retry")
        # An observer deleted between the index read and this one is simply absent.
        return [found[n] for n in names if n in found]


@dataclass(frozen=True)
class _Change:
    sets: dict[str, Any]
    removes: tuple[str, ...] = ()
    count: int = 0


_LIST_ATTRIBUTES = ("name", "fleet", "config", *FLEET_INDEX_ATTRIBUTES)


def _key(name: str) -> dict[str, Any]:
    return to_wire({"name": name})


def _encode_cursor(key: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str | None) -> dict[str, Any] | None:
    if not cursor:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, binascii.Error) as error:
        raise InvalidCursor() from error
    if not isinstance(key, dict) or set(key) != {"name", "fleet"}:
        raise InvalidCursor()
    name, fleet = (
        value.get("S") if isinstance(value, dict) and set(value) == {"S"} else None
        for value in (key["name"], key["fleet"])
    )
    # A key of another shape fails botocore's validation or DynamoDB's (ParamValidationError,
    # ValidationException): both would be a 500 for what is only a bad request.
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or fleet != FLEET_PARTITION:
        raise InvalidCursor()
    return key
