"""Moving a deployed fleet's observers from its registry keyed by name (every deployment before
the registry was keyed by kind) into the registry keyed by kind, losing none and running none twice.

A table's key cannot change in place, so the upgrade deploys the new table beside the old one
(``-c legacyRegistry=true``: the old table stays in the stack as it was, its stream wired to the
reconciler, and the grants its running containers write with). From its first invocation on,
before any pass acts (a pass that did not know an observer would take its task for an orphan),
the reconciler:

1. **copies** every observer (:meth:`Migration.ensure`, once): the record as it stands, marked
   ``LEGACY_ATTRIBUTE`` (its running generation's container still writes the old table) with the
   old record's version (``LEGACY_VERSION``), its name's claim, and the fleet counter; then marks
   the copy done (``MIGRATION_KEY``). The API answers 503 until then, so no name is created twice;
2. **replays** each later write of the old table onto the marked copy (:meth:`Migration.replay`,
   the old table's stream): heartbeats keep the running generation alive to the reconciler, and a
   claim, a checkpoint, a host's exit report reach it as if written here; so does a write the old
   reconciler or API made while the deploy was under way (a new generation, a stop, a create);
3. **takes over** when it starts a marked observer's next generation (a rollout's hand-over, a
   restart: :meth:`vigil.observers.fleet_store.FleetStore.apply`): in one transaction it carries
   over what the old container wrote since the last replay (checkpoint, ``ctx.once``'s journal),
   drops the mark, and fences the old record (its generation set to the new one), so the old
   container learns it was replaced at its next write, as any replaced container does::

    old table:  g RUNNING .. beat .. beat .. checkpoint, exit     | generation g+1 (fenced)
                   | copy      | replay (the old table's stream)   | take-over (one transaction)
    new table:  g RUNNING, marked <- beats, checkpoint, exit ...  | g+1 STARTING, unmarked

The deploy changes every kind's task definition, so the rollout hands every marked observer over
within its kind's ``max_unavailable`` (a marked one counts as outdated whatever it runs; a host
started before the migration takes no new observer and is drained). ``vigil observers migrate``
(``GET /migration``) says when no generation writes the old table any more; the next deploy,
without the context, drops the old table from the stack (it is retained) and its grants.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from vigil.clock import Clock, iso, system_clock
from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE
from vigil.contract.observers import (
    LEGACY_ATTRIBUTE,
    LEGACY_VERSION,
    MIGRATION_KEY,
    NAMED_KIND,
    NAMES_PARTITION,
    REGISTRY_KEY,
    UNCERTAIN_REASON,
    Desired,
    Status,
)
from vigil.dynamo import (
    Item,
    Update,
    cancellation_reasons,
    from_wire,
    paginate,
    to_wire,
)
from vigil.observers.model import FLEET_INDEX, FLEET_PARTITION, is_observer_item
from vigil.observers.registry.errors import RegistryError
from vigil.observers.registry.layout import RegistryRef
from vigil.observers.registry.table import count_update, put_new

CARRIED = (
    "checkpoint",
    "checkpoint_at",
    JOURNAL_ATTRIBUTE,
    UNCERTAIN_EFFECT_ATTRIBUTE,
    UNCERTAIN_REASON,
)
"""What a take-over carries from the old record when the replay has not brought its last writes:
what the next generation starts from (its checkpoint, ``ctx.once``'s journal and an uncertain
effect)."""
WRITING = (Status.STARTING, Status.RUNNING, Status.STOPPING)
"""A marked observer in one of these may have a container writing the old table."""
MAX_ATTEMPTS = 5
_NOT_REPLAYED = frozenset({"version", REGISTRY_KEY, "kind"})
"""The old record's own version (the copy keeps its own), and the keys."""
_REFUSED = "ConditionalCheckFailed"


class RegistryMigrating(RegistryError):
    """The API's answer while the reconciler has not yet copied the name-keyed registry."""

    def __init__(self) -> None:
        super().__init__(
            "the observers are being copied into the registry keyed by kind (an upgrade): "
            "retry in a minute"
        )


class Adoption(StrEnum):
    COPIED = "copied"
    PRESENT = "present"
    """Already here (copied before, or by a concurrent pass)."""
    CONFLICT = "conflict"
    """The name is taken here by an observer of another kind (or the old record has no kind):
    left in the old table only, named on the marker."""


@dataclass(frozen=True)
class Progress:
    """The migration marker (``MIGRATION_KEY``): what the copy did, and when."""

    copied: int
    """The old table's observers that are in the registry keyed by kind (copied by this copy or
    an earlier one that did not finish)."""
    done_at: datetime | None
    conflicts: tuple[str, ...] = ()
    """Names not copied: another kind's observer has the name here."""

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> Progress | None:
        if item is None:
            return None
        done = item.get("done_at")
        return cls(
            copied=int(item.get("copied", 0)),
            done_at=datetime.fromisoformat(done) if done else None,
            conflicts=tuple(sorted(item.get("conflicts") or ())),
        )


class LegacyRegistry:
    """The name-keyed registry being migrated: read whole, one record, and a record's fence."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table

    def records(self) -> Iterator[Item]:
        """Every observer's record (a consistent Scan: the copy must miss no recent write)."""
        request = {"TableName": self.table, "ConsistentRead": True}
        yield from (i for i in paginate(self._client.scan, request) if is_observer_item(i))

    def get(self, name: str) -> Item | None:
        answer = self._client.get_item(
            TableName=self.table, Key=to_wire({REGISTRY_KEY: name}), ConsistentRead=True
        )
        return from_wire(answer.get("Item"))

    def fence(self, record: Mapping[str, Any], generation: int) -> dict[str, Any]:
        """A transaction's update that sets the old record's generation to ``generation`` (every
        container write is conditioned on its own), if the record is still as read."""
        update = Update().set("generation", generation).increment("version")
        update.condition(update.eq("version", int(record.get("version", 0))))
        key = to_wire({REGISTRY_KEY: record[REGISTRY_KEY]})
        return {"Update": {"TableName": self.table, "Key": key, **update.request()}}

    def owns(self, stream_record: Mapping[str, Any]) -> bool:
        """Whether a stream record (as Lambda delivers it) comes from this table."""
        arn = str(stream_record.get("eventSourceARN", ""))
        return f":table/{self.table}/stream/" in arn


class Migration:
    """The reconciler's side of the upgrade: the copy, then the replay of the old table."""

    def __init__(
        self,
        client: Any,
        registry: RegistryRef,
        legacy: LegacyRegistry,
        *,
        clock: Clock = system_clock,
    ) -> None:
        assert registry.by_kind, "a migration goes into the registry keyed by kind"
        self._client = client
        self._registry = registry
        self._table = registry.table
        self.legacy = legacy
        self._clock = clock
        self._done: Progress | None = None
        """The copy's progress once done (then no more reads in this process)."""

    # The copy -----------------------------------------------------------------------------------

    def ensure(self) -> Progress:
        """Copy every observer not copied yet, unless the marker says it was done (then only that
        one read, and none at all once this process has seen it done). Two invocations copying
        at once copy each observer once (each copy is conditional) and record the same."""
        if self._done is not None:
            return self._done
        progress = read_progress(self._client, self._registry)
        if progress is not None and progress.done_at is not None:
            self._done = progress
            return progress
        copied, conflicts = 0, set()
        for record in self.legacy.records():
            outcome = self.adopt(record)
            if outcome is Adoption.CONFLICT:
                conflicts.add(str(record["name"]))
            else:
                copied += 1  # here now, copied by this pass or an earlier (or concurrent) one
        now = self._clock()
        update = Update().set_all(
            {"copied": copied, "done_at": iso(now), "from": self.legacy.table}
        )
        if conflicts:
            update.add("conflicts", conflicts)  # beside any a replay added meanwhile
        key = to_wire(self._registry.special(MIGRATION_KEY))
        self._client.update_item(TableName=self._table, Key=key, **update.request())
        self._done = read_progress(self._client, self._registry)
        return self._done or Progress(copied, now, tuple(sorted(conflicts)))

    def adopt(self, record: Mapping[str, Any]) -> Adoption:
        """One old record here as it stands, marked, with its name's claim (and counted when it
        is wanted running), if neither is here yet: one transaction."""
        name, kind = str(record["name"]), str(record.get("kind") or "")
        if not kind:  # no kind to key it by (no API ever wrote such a record): for a person
            self._conflict(name)
            return Adoption.CONFLICT
        item = {k: v for k, v in record.items() if k != REGISTRY_KEY}
        item |= {"kind": kind, "name": name, LEGACY_ATTRIBUTE: True}
        item[LEGACY_VERSION] = int(record.get("version", 0))
        claim = {"kind": NAMES_PARTITION, "name": name, NAMED_KIND: kind}
        actions = [put_new(self._table, item), put_new(self._table, claim)]
        if record.get("desired") == Desired.RUNNING.value:
            actions.append(count_update(self._registry, +1))  # admitted by the old registry
        try:
            self._client.transact_write_items(TransactItems=actions)
        except ClientError as error:
            reasons = cancellation_reasons(error)
            if reasons is None:
                raise
            if reasons[0][0] == _REFUSED:
                return Adoption.PRESENT
            if reasons[1][0] == _REFUSED:
                self._conflict(name)
                return Adoption.CONFLICT
            raise
        return Adoption.COPIED

    # The replay ---------------------------------------------------------------------------------

    def replay(self, new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> None:
        """One write of the old table (a stream record's images) onto the copy, while it is
        marked: what that write changed, set and removed alike; the copy's version moves on
        (the reconciler's next write of it decides again). A record not here yet is copied."""
        if not new or not is_observer_item(dict(new)) or not new.get("kind"):
            return
        name, kind = str(new["name"]), str(new["kind"])
        key = self._registry.key(kind, name)
        version = int(new.get("version", 0))
        changed = {
            a: v
            for a, v in new.items()
            if a not in _NOT_REPLAYED and (old is None or old.get(a) != v)
        }
        removed = [a for a in (old or {}) if a not in new and a not in _NOT_REPLAYED]
        for _ in range(MAX_ATTEMPTS):
            answer = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
            current = from_wire(answer.get("Item"))
            if current is None:
                if self.adopt(new) is not Adoption.PRESENT:
                    return
                continue
            if not current.get(LEGACY_ATTRIBUTE) or int(current.get(LEGACY_VERSION, 0)) >= version:
                return  # taken over (the old record is history), or this write is here already
            update = Update().set_all(changed).remove(*removed)
            update.set_all({LEGACY_VERSION: version, "version": int(current["version"]) + 1})
            update.condition(
                update.eq("version", int(current["version"])), update.exists(LEGACY_ATTRIBUTE)
            )
            actions = [{"Update": {"TableName": self._table, "Key": key, **update.request()}}]
            delta = _counted(new.get("desired")) - _counted(current.get("desired"))
            if delta:
                actions.append(count_update(self._registry, delta))
            try:
                self._client.transact_write_items(TransactItems=actions)
                return
            except ClientError as error:
                reasons = cancellation_reasons(error)
                if reasons is None or reasons[0][0] != _REFUSED:
                    raise
        raise RuntimeError(f"{name}: the copy kept changing; the stream record will be retried")

    # Helpers ------------------------------------------------------------------------------------

    def _conflict(self, name: str) -> None:
        """Say on the marker that an old record could not be copied (its name is another
        kind's here): ``vigil observers migrate`` lists it for a person."""
        update = Update().add("conflicts", {name})
        key = to_wire(self._registry.special(MIGRATION_KEY))
        self._client.update_item(TableName=self._table, Key=key, **update.request())


def _counted(desired: Any) -> int:
    return 1 if desired == Desired.RUNNING.value else 0


def read_progress(client: Any, registry: RegistryRef) -> Progress | None:
    answer = client.get_item(
        TableName=registry.table,
        Key=to_wire(registry.special(MIGRATION_KEY)),
        ConsistentRead=True,
    )
    return Progress.from_item(from_wire(answer.get("Item")))


@dataclass(frozen=True)
class MigrationStatus:
    """``GET /migration``: where the upgrade from a name-keyed registry stands."""

    legacy_table: str | None
    """The name-keyed registry this deployment migrates from (None: none wired)."""
    progress: Progress | None
    writing: tuple[str, ...]
    """Observers whose running generation may still write the old table (marked, and starting,
    running or stopping): the rollout hands each over."""
    waiting: tuple[str, ...]
    """Marked observers with no running generation (pending, failed; the stopped ones are not
    listed): taken over at their next start; none writes the old table."""

    @property
    def copied(self) -> bool:
        return self.progress is not None and self.progress.done_at is not None

    @property
    def complete(self) -> bool:
        """Nothing writes the old table any more: the deploy without ``legacyRegistry`` may go."""
        return (self.copied or self.legacy_table is None) and not self.writing

    def to_json(self) -> dict[str, Any]:
        progress = self.progress
        return {
            "legacy_table": self.legacy_table,
            "copied": progress.copied if progress else None,
            "copied_at": iso(progress.done_at) if progress and progress.done_at else None,
            "conflicts": list(progress.conflicts) if progress else [],
            "writing_old_registry": list(self.writing),
            "marked_not_running": list(self.waiting),
            "complete": self.complete,
        }


def migration_status(
    client: Any, registry: RegistryRef, legacy_table: str | None
) -> MigrationStatus:
    """The marker, and the marked observers from the fleet index (which projects the mark): one
    read and one Query per 1 MB page of the fleet."""
    request = {
        "TableName": registry.table,
        "IndexName": FLEET_INDEX,
        "KeyConditionExpression": "#p = :p",
        "FilterExpression": "attribute_exists(#legacy)",
        "ProjectionExpression": "#name, #status",
        "ExpressionAttributeNames": {
            "#p": "fleet",
            "#legacy": LEGACY_ATTRIBUTE,
            "#name": "name",
            "#status": "status",
        },
        "ExpressionAttributeValues": to_wire({":p": FLEET_PARTITION}),
    }
    marked = {str(i["name"]): str(i.get("status")) for i in paginate(client.query, request)}
    writing = tuple(sorted(n for n, s in marked.items() if s in WRITING))
    waiting = tuple(sorted(n for n in marked if n not in writing))
    return MigrationStatus(legacy_table, read_progress(client, registry), writing, waiting)


def take_over_update(
    update: Update, carried_from: Mapping[str, Any] | None, replayed_version: int | None
) -> Update:
    """A marked observer's next generation: the mark goes, and what the old container wrote since
    the last replay (``carried_from``: the old record, read just before) comes over."""
    update.remove(LEGACY_ATTRIBUTE, LEGACY_VERSION)
    if carried_from is not None and int(carried_from.get("version", 0)) > (replayed_version or 0):
        update.set_all({a: carried_from[a] for a in CARRIED if a in carried_from})
    return update
