"""The reconciler's registry access: the fleet read in pages, and versioned transitions.

Every transition is one conditional UpdateItem on ``version = :expected`` that bumps the version, with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``: a writer that lost a race gets the current record
back in the same round trip and decides again from it (:class:`Conflict`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import epoch_ms, from_epoch_ms, iso
from vigil.contract.hosts import (
    HOST_EXIT,
    HOST_EXIT_RAN_MS,
    OBSERVER_CAPACITY,
    OBSERVER_HOST,
    OBSERVER_TASK_DEFINITION,
    WAITING_ATTRIBUTE,
    WAITING_INDEX,
    WAITING_SORT,
)
from vigil.contract.observers import (
    LEGACY_ATTRIBUTE,
    LEGACY_VERSION,
    STATUS_REASON,
    STOPPED_ATTRIBUTE,
    STOPPED_INDEX,
    status_fields,
)
from vigil.dynamo import (
    Item,
    Update,
    cancellation_reasons,
    from_wire,
    is_condition_failure,
    old_item,
    paginate,
    to_wire,
    truncate,
)
from vigil.observers.decisions import (
    Backoff,
    HandOver,
    HostExit,
    MarkFailed,
    MarkStopped,
    MarkStopping,
    Pooled,
    Record,
    SeeTask,
    StartTask,
    TaskState,
    Tracking,
    Write,
)
from vigil.observers.migration import LegacyRegistry, take_over_update
from vigil.observers.model import (
    FLEET_INDEX,
    FLEET_PARTITION,
    LastExit,
    Status,
    from_item,
    is_observer_item,
)
from vigil.observers.registry.layout import RegistryRef
from vigil.observers.registry.table import RegistryTable

MAX_ATTEMPTS = 4


class Conflict(Exception):
    """The record changed under a write; ``current`` is what it is now (None: it is gone)."""

    def __init__(self, current: Record | None) -> None:
        super().__init__("observer record changed concurrently")
        self.current = current


def record_from_item(item: Mapping[str, Any]) -> Record:
    return Record(
        observer=from_item(dict(item)),
        tracking=Tracking(
            task_version=int(item["task_version"]) if "task_version" in item else None,
            task_status=item.get("task_status"),
            started_at=from_epoch_ms(int(item["started_at_ms"]))
            if "started_at_ms" in item
            else None,
            start_attempts=int(item.get("start_attempts", 0)),
            capacity=item.get(OBSERVER_CAPACITY),
            legacy=bool(item.get(LEGACY_ATTRIBUTE)),
            legacy_version=int(item[LEGACY_VERSION]) if LEGACY_VERSION in item else None,
        ),
        pooled=_pooled(item),
    )


def _pooled(item: Mapping[str, Any]) -> Pooled:
    if OBSERVER_HOST not in item and HOST_EXIT not in item:
        return Pooled()
    raw = item.get(HOST_EXIT)
    host_exit = None
    if isinstance(raw, Mapping) and raw.get("generation") is not None:
        code = raw.get("exit_code")
        at = raw.get("at_ms")
        ran = raw.get(HOST_EXIT_RAN_MS)
        host_exit = HostExit(
            generation=int(raw["generation"]),
            exit_code=int(code) if code is not None else None,
            reason=raw.get("reason"),
            at=from_epoch_ms(int(at)) if at is not None else None,
            ran=timedelta(milliseconds=int(ran)) if ran is not None else None,
        )
    return Pooled(
        host=item.get(OBSERVER_HOST),
        host_exit=host_exit,
    )


class FleetStore:
    def __init__(
        self,
        client: Any,
        table: str | RegistryRef,
        *,
        index: str = FLEET_INDEX,
        pooled_kinds: frozenset[str] = frozenset(),
        legacy: LegacyRegistry | None = None,
    ) -> None:
        self._client = client
        self._legacy = legacy
        """The name-keyed registry being migrated: a marked observer's next generation fences
        its old record (:mod:`vigil.observers.migration`)."""
        self._keys = RegistryTable(client, table)
        """Every key the store makes (an observer's kind found from its name's claim when an
        ECS event names only the observer, remembered from every record read)."""
        self._ref = self._keys.ref
        self._table = self._ref.table
        self._index = index
        self._pooled = pooled_kinds

    @property
    def ref(self) -> RegistryRef:
        return self._ref

    def _key(self, name: str) -> dict[str, Any] | None:
        """The observer's key; None when no observer has the name."""
        kind = self._keys.kind_of(name)
        return None if kind is None else self._ref.key(kind, name)

    def _read(self, item: Mapping[str, Any]) -> Record:
        record = record_from_item(item)
        self._keys.remember(record.name, record.observer.kind)
        return record

    # Reads ---------------------------------------------------------------------------------------

    def fleet(self) -> Iterator[Record]:
        """Every observer but the STOPPED ones, from the fleet index's small projection: one Query
        per 1 MB page. (A STOPPED record an older writer left in it comes too: see
        :meth:`relist`.)"""
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": self._index,
            "KeyConditionExpression": "fleet = :fleet",
            "ExpressionAttributeValues": to_wire({":fleet": FLEET_PARTITION}),
        }
        while True:
            response = self._client.query(**request)
            for raw in response.get("Items") or []:
                item = from_wire(raw)
                assert item is not None
                yield self._read(item)
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def stopped(self) -> dict[str, Status]:
        """The stopped index's names and statuses (a few dozen bytes each, one Query per 1 MB
        page): STOPPED, or another status an older writer left there (see :meth:`relist`)."""
        request = {
            "TableName": self._table,
            "IndexName": STOPPED_INDEX,
            "KeyConditionExpression": "#p = :p",
            "ProjectionExpression": "#name, #status, #kind",
            "ExpressionAttributeNames": {
                "#p": STOPPED_ATTRIBUTE,
                "#name": "name",
                "#status": "status",
                "#kind": "kind",
            },
            "ExpressionAttributeValues": to_wire({":p": FLEET_PARTITION}),
        }
        found: dict[str, Status] = {}
        for item in paginate(self._client.query, request):
            name = str(item["name"])
            self._keys.remember(name, str(item.get("kind", "")))
            found[name] = Status(item.get("status", Status.STOPPED))
        return found

    def relist(self, name: str, status: Status) -> bool:
        """Put a record in the index its ``status`` belongs to (:func:`status_fields`): one
        written before the indexes split (STOPPED, still in the fleet index) or by a writer of
        that time during a deployment. Conditional on the status still being ``status``, and
        without a version bump (what the record says does not change), so it races with nobody;
        idempotent. False if the status moved on (its writer placed it)."""
        fields, unlisted = status_fields(status)
        update = Update().set_all(fields).remove(*unlisted)
        update.condition(update.eq("status", status.value))
        key = self._key(name)
        if key is None:
            return False
        try:
            self._client.update_item(TableName=self._table, Key=key, **update.request())
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            return False
        return True

    def waiting(self, kind: str) -> dict[str, datetime]:
        """Pooled observers of ``kind`` wanting a placement, with when each may be tried (the
        sparse index's keys: one Query page per 1 MB, usually one). Those not due yet are
        backing off: the fleet gauges count them as wanted and not running."""
        request = {
            "TableName": self._table,
            "IndexName": WAITING_INDEX,
            "KeyConditionExpression": "#w = :kind",
            "ExpressionAttributeNames": {"#w": WAITING_ATTRIBUTE},
            "ExpressionAttributeValues": to_wire({":kind": kind}),
        }
        waiting: dict[str, datetime] = {}
        for item in paginate(self._client.query, request):
            self._keys.remember(str(item["name"]), kind)
            waiting[str(item["name"])] = from_epoch_ms(int(item[WAITING_SORT]))
        return waiting

    def get(self, name: str) -> Record | None:
        key = self._key(name)
        if key is None:
            return None
        response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        item = from_wire(response.get("Item"))
        return self._read(item) if item is not None and is_observer_item(item) else None

    # Transitions ---------------------------------------------------------------------------------

    def apply(self, record: Record, write: Write, now: datetime, seen: TaskState | None) -> None:
        """Write one decided transition, conditional on the record's version."""
        pooled = record.observer.kind in self._pooled
        update = _transition(record, write, now, seen, pooled=pooled)
        if isinstance(write, StartTask) and record.tracking.legacy:
            self._take_over(record, write.generation, update, now)
            return
        self._update(record.name, record.observer.version, update, now)

    def _take_over(self, record: Record, generation: int, update: Update, now: datetime) -> None:
        """The next generation of an observer whose running one writes the name-keyed registry:
        what that container wrote since the last replay comes over, the mark goes, and its old
        record is fenced, in one transaction (:mod:`vigil.observers.migration`). With the old
        table retired (no grant reaches it any more) only the mark goes."""
        old = self._legacy.get(record.name) if self._legacy is not None else None
        take_over_update(update, old, record.tracking.legacy_version)
        if old is None or self._legacy is None:
            self._update(record.name, record.observer.version, update, now)
            return
        if int(old.get("generation", 0)) >= generation:
            # The old side started a generation the copy does not show yet (its writer ran on
            # during the deploy): decide again once the replay has brought it.
            raise Conflict(self.get(record.name))
        expected = record.observer.version
        update.set_all({"version": expected + 1, "updated_at": iso(now)})
        update.condition(update.eq("version", expected))
        key = self._ref.key(record.observer.kind, record.name)
        mine = {"TableName": self._table, "Key": key, **update.request()}
        mine["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        fence = self._legacy.fence(old, generation)
        try:
            self._client.transact_write_items(TransactItems=[{"Update": mine}, fence])
        except ClientError as error:
            reasons = cancellation_reasons(error)
            if reasons is None:
                raise
            (code, current), _ = reasons
            if code == "ConditionalCheckFailed":
                raise Conflict(
                    self._read(current) if current and is_observer_item(current) else None
                ) from error
            raise Conflict(self.get(record.name)) from error  # the old record moved: again

    def record_placed(
        self,
        name: str,
        generation: int,
        host: str,
        task_arn: str | None,
        now: datetime,
        written_version: int,
    ) -> bool:
        """The host took the observer: it leaves the waiting index. False if its generation or
        host is no longer this one (a newer decision won; nothing to do)."""

        def update() -> Update:
            values: dict[str, Any] = {"start_attempts": 0}
            if task_arn:
                values["task_arn"] = task_arn
            return (
                Update()
                .set_all(values)
                .remove("next_start_at", "next_start_at_ms", STATUS_REASON, WAITING_ATTRIBUTE)
            )

        expected = written_version
        for _ in range(MAX_ATTEMPTS):
            try:
                self._update(name, expected, update(), now)
                return True
            except Conflict as conflict:
                current = conflict.current
            if (
                current is None
                or current.observer.generation != generation
                or current.pooled.host != host
                or current.observer.status not in (Status.STARTING, Status.RUNNING)
            ):
                return False
            expected = current.observer.version
        return False

    def record_host(
        self, record: Record, host: str, task_definition: str | None, now: datetime
    ) -> None:
        """Move a waiting observer's placement to another host (same generation)."""
        values: dict[str, Any] = {OBSERVER_HOST: host}
        if task_definition:
            values[OBSERVER_TASK_DEFINITION] = task_definition
        self._update(record.name, record.observer.version, Update().set_all(values), now)

    def record_task(
        self,
        name: str,
        generation: int,
        arn: str,
        now: datetime,
        written_version: int,
        *,
        task_definition: str | None = None,
        capacity: str | None = None,
    ) -> bool:
        """Note the task RunTask started (and the task definition and capacity it got); False if
        its generation is no longer wanted.

        ``written_version`` is the version of the record as the starter left it (STARTING, this
        generation, no task): if it still holds, one write suffices; otherwise the failed write
        returns the record and it is judged again.
        """
        started = {OBSERVER_TASK_DEFINITION: task_definition, OBSERVER_CAPACITY: capacity}

        def update() -> Update:
            values = {k: v for k, v in started.items() if v is not None}
            return (
                Update()
                .set_all({"task_arn": arn, "start_attempts": 0, **values})
                .remove("next_start_at", "next_start_at_ms", STATUS_REASON)
            )

        try:
            self._update(name, written_version, update(), now)
            return True
        except Conflict as conflict:
            current = conflict.current
        for _ in range(MAX_ATTEMPTS):
            if current is None or current.observer.generation != generation:
                return False
            observer = current.observer
            if observer.task_arn == arn:
                return True
            if observer.task_arn is not None or observer.status not in (
                Status.STARTING,
                Status.RUNNING,
            ):
                return False
            try:
                self._update(name, observer.version, update(), now)
                return True
            except Conflict as conflict:
                current = conflict.current
        return False

    def record_start_failure(
        self,
        record: Record,
        error: str,
        retry_at: datetime,
        now: datetime,
        *,
        capacity: str | None = None,
    ) -> None:
        """Keep the observer STARTING and say when RunTask is tried again, and why it failed.

        ``capacity``: where the retry must ask (on-demand once a Spot kind's fallback may have
        started the task); the task's own capacity replaces it when the task is recorded.
        """
        values: dict[str, Any] = {
            "start_attempts": record.tracking.start_attempts + 1,
            "next_start_at": iso(retry_at),
            "next_start_at_ms": epoch_ms(retry_at),
            STATUS_REASON: truncate(error),
        }
        if capacity is not None:
            values[OBSERVER_CAPACITY] = capacity
        update = Update().set_all(values)
        if record.observer.kind in self._pooled:
            update.set(WAITING_ATTRIBUTE, record.observer.kind)
        self._update(record.name, record.observer.version, update, now)

    def record_stop_failure(self, name: str, expected: int, error: str, now: datetime) -> None:
        """Say on the record why an observer asked to stop still runs: StopTask failed.

        Written once (not on every pass that fails again) and only while the record is as the
        pass saw it; the record's STOPPED transition removes it.
        """
        update = Update().set(
            STATUS_REASON, truncate(f"StopTask failed, retried every pass: {error}")
        )
        update.condition(update.absent(STATUS_REASON))
        # Conflict: already said, or the record moved on (the next pass looks again).
        with suppress(Conflict):
            self._update(name, expected, update, now)

    def _update(self, name: str, expected: int, update: Update, now: datetime) -> None:
        """One write conditional on ``version = expected``, which it advances by one."""
        update.set_all({"version": expected + 1, "updated_at": iso(now)})
        update.condition(update.eq("version", expected))
        key = self._key(name)
        if key is None:
            raise Conflict(None)  # no observer has the name (any more): as a record gone
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **update.request(),
            )
        except ClientError as error:
            if not is_condition_failure(error):
                raise
            old: Item | None = old_item(error)
            raise Conflict(
                self._read(old) if old is not None and is_observer_item(old) else None
            ) from error


def _transition(
    record: Record, write: Write, now: datetime, seen: TaskState | None, *, pooled: bool = False
) -> Update:
    """The record's new fields for one decided write (and the newest task state seen).

    A pooled observer is in the waiting index exactly while it has a ``next_start_at``.
    """
    set_: dict[str, Any] = {}
    remove: list[str] = []
    status: Status | None = None
    if record.pooled.host_exit is not None and not isinstance(write, MarkStopping | SeeTask):
        remove.append(HOST_EXIT)  # consumed: its exit is now the record's last_exit
    if (
        seen is not None
        and seen.arn == record.observer.task_arn
        and not isinstance(write, StartTask)
    ):
        if seen.version is not None:
            set_["task_version"] = seen.version
        set_["task_status"] = seen.last_status
    match write:
        case StartTask():
            if write.host:
                set_[OBSERVER_HOST] = write.host
            if write.task_definition:
                set_[OBSERVER_TASK_DEFINITION] = write.task_definition
            set_.update(
                {
                    "generation": write.generation,
                    "consecutive_failures": write.consecutive_failures,
                    "restarts": record.observer.restarts + (1 if write.restart else 0),
                    "started_at_ms": epoch_ms(now),
                    "start_attempts": 0,
                    # RunTask is in flight until then: nobody else retries it before.
                    "next_start_at": iso(write.retry_at),
                    "next_start_at_ms": epoch_ms(write.retry_at),
                }
            )
            status = Status.STARTING
            remove += ["task_arn", "heartbeat_at", "heartbeat_at_ms", "task_version", "task_status"]
            # A restart request is answered by this generation; clearing it keeps heartbeats out
            # of the stream filter that wakes the reconciler for pending requests.
            remove += ["failure_reason", STATUS_REASON, "restart_generation"]
            # Its starter records what this generation runs on (RunTask's answer).
            remove += [OBSERVER_TASK_DEFINITION, OBSERVER_CAPACITY]
            _set_exit(set_, write.last_exit)
        case Backoff():
            status = Status.PENDING
            set_.update(
                {
                    "consecutive_failures": write.consecutive_failures,
                    "next_start_at": iso(write.until),
                    "next_start_at_ms": epoch_ms(write.until),
                }
            )
            _set_exit(set_, write.last_exit)
        case MarkStopping() | HandOver():
            status = Status.STOPPING
        case MarkStopped():
            status = Status.STOPPED
            remove += ["next_start_at", "next_start_at_ms", STATUS_REASON]
            _set_exit(set_, write.last_exit)
        case MarkFailed():
            status = Status.FAILED
            set_.update(
                {
                    "failure_reason": write.reason,
                    "consecutive_failures": write.consecutive_failures,
                }
            )
            remove += ["next_start_at", "next_start_at_ms"]
            _set_exit(set_, write.last_exit)
        case SeeTask():
            set_["task_arn"] = write.arn
            set_["task_status"] = write.status
            if write.version is not None:
                set_["task_version"] = write.version
    if status is not None:
        fields, unlisted = status_fields(status)
        set_.update(fields)
        remove += unlisted
    if pooled and "next_start_at_ms" in set_:
        set_[WAITING_ATTRIBUTE] = record.observer.kind
    elif pooled and "next_start_at_ms" in remove:
        remove.append(WAITING_ATTRIBUTE)
    return Update().set_all(set_).remove(*remove)


def _set_exit(values: dict[str, Any], last_exit: LastExit | None) -> None:
    if last_exit is not None:
        values["last_exit"] = last_exit.to_json()
