"""The upgrade's copy, replay and take-over (``vigil.observers.migration``), on moto tables created
from the app as the upgrade deploys it (``-c legacyRegistry=true``): the old registry keyed by
name, written by this code working as older deployments did (``RegistryRef(..., BY_NAME)``), and
the registry keyed by kind. The whole upgrade, with containers and a rollout, runs in
``tests/upgrade/test_registry_upgrade.py``. Cost: ~2 s in all.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from vigil.clock import ManualClock
from vigil.contract.observers import (
    FLEET_COUNTER_KEY,
    LEGACY_ATTRIBUTE,
    LEGACY_VERSION,
    Status,
)
from vigil.dynamo import Update, from_wire, to_wire
from vigil.observers import decisions as d
from vigil.observers.api import MigrationGate
from vigil.observers.fleet_store import Conflict, FleetStore
from vigil.observers.migration import (
    Adoption,
    LegacyRegistry,
    Migration,
    RegistryMigrating,
    migration_status,
)
from vigil.observers.registry import (
    Fenced,
    FencedWrites,
    Layout,
    ObserverRegistry,
    RegistryRef,
)
from vigil_tools.emulator.streams import StreamMapping
from vigil_tools.emulator.template import Synthesized, create_table

OLD, NEW = "old-registry", "registry"
NEW_REF = RegistryRef(NEW)
OLD_REF = RegistryRef(OLD, Layout.BY_NAME)


@pytest.fixture
def tables(dynamodb: Any, migrating: Synthesized) -> Iterator[Any]:
    create_table(migrating, dynamodb, "Vigil/Observers/Registry", OLD)
    create_table(migrating, dynamodb, "Vigil/Observers/KindRegistry", NEW)
    yield dynamodb


@pytest.fixture
def old(tables: Any, clock: ManualClock) -> ObserverRegistry:
    """The old registry as an older deployment's API and containers write it."""
    return ObserverRegistry(tables, OLD_REF, clock=clock, max_observers=10)


@pytest.fixture
def migration(tables: Any, clock: ManualClock) -> Migration:
    return Migration(tables, NEW_REF, LegacyRegistry(tables, OLD), clock=clock)


def item(client: Any, ref: RegistryRef, kind: str, name: str) -> dict[str, Any]:
    found = from_wire(client.get_item(TableName=ref.table, Key=ref.key(kind, name)).get("Item"))
    assert found is not None, (ref.table, name)
    return found


def counter(client: Any) -> int:
    key = to_wire(NEW_REF.special(FLEET_COUNTER_KEY))
    found = from_wire(client.get_item(TableName=NEW, Key=key).get("Item")) or {}
    return int(found.get("active", 0))


def start_generation(client: Any, name: str, generation: int) -> None:
    """What an older reconciler writes in the old table when it starts a generation."""
    update = Update().set_all(
        {
            "generation": generation,
            "task_arn": f"arn:task/{name}-{generation}",
            "status": "STARTING",
        }
    )
    client.update_item(
        TableName=OLD, Key=OLD_REF.key("", name), **update.increment("version").request()
    )


def running(old: ObserverRegistry, client: Any, name: str, kind: str, generation: int) -> None:
    """An older reconciler started ``generation`` and its container claimed it."""
    old.create(name, kind, {"n": name})
    start_generation(client, name, generation)
    old.claim_generation(name, generation)


def test_the_copy_brings_every_observer_marked_claims_its_name_and_counts_the_running(
    tables: Any, old: ObserverRegistry, migration: Migration, clock: ManualClock
) -> None:
    # Given the old registry: two running (one checkpointing), one stopped, one just created
    running(old, tables, "a", "ticker", 3)
    old.checkpoint("a", 3, {"count": 7})
    running(old, tables, "b", "pooled-ticker", 1)
    old.create("c", "ticker", {})
    old.request_stop("c")
    old.create("e", "ticker", {})
    # When the reconciler's first invocation copies it
    progress = migration.ensure()
    # Then each is here as it was, marked, with its name claimed; the counter counts the three
    # wanted running; the marker says it is done
    assert progress.copied == 4 and progress.conflicts == ()
    registry = ObserverRegistry(tables, NEW_REF)
    for name in "abce":
        mine, theirs = registry.get(name), old.get(name)
        assert mine.to_json() == theirs.to_json()
        assert item(tables, NEW_REF, mine.kind, name)[LEGACY_ATTRIBUTE] is True
        assert item(tables, NEW_REF, mine.kind, name)[LEGACY_VERSION] == theirs.version
    assert registry.get("a").checkpoint == {"count": 7}
    assert counter(tables) == 3
    # And a process that starts later reads the marker, copies nothing
    before = list(tables.scan(TableName=NEW)["Items"])
    again = Migration(tables, NEW_REF, LegacyRegistry(tables, OLD), clock=clock).ensure()
    assert again.done_at is not None and list(tables.scan(TableName=NEW)["Items"]) == before
    status = migration_status(tables, NEW_REF, OLD)
    assert status.writing == ("a", "b") and status.waiting == ("e",) and not status.complete


def test_a_name_another_kind_holds_here_is_left_in_the_old_table_and_named(
    tables: Any, old: ObserverRegistry, migration: Migration
) -> None:
    ObserverRegistry(tables, NEW_REF).create("x", "pooled-ticker", {})
    old.create("x", "ticker", {})
    assert migration.adopt(dict(item(tables, OLD_REF, "", "x"))) is Adoption.CONFLICT
    assert migration.ensure().conflicts == ("x",)
    assert ObserverRegistry(tables, NEW_REF).get("x").kind == "pooled-ticker"  # untouched


def test_the_old_table_s_writes_are_replayed_onto_the_marked_copy(
    tables: Any, old: ObserverRegistry, migration: Migration, clock: ManualClock
) -> None:
    running(old, tables, "a", "ticker", 2)
    migration.ensure()
    stream = StreamMapping.of_table(boto3.session.Session(region_name="us-east-1"), OLD)
    copied = item(tables, NEW_REF, "ticker", "a")
    # When the old container heartbeats and checkpoints, an older API stops another observer
    # it had running, and creates one
    clock.advance(timedelta(seconds=30))
    old.heartbeat("a", 2)
    old.checkpoint("a", 2, {"count": 9})
    running(old, tables, "late", "ticker", 1)  # created by an older API after the copy
    old.request_stop("late")
    for record in stream.poll():
        change = record["dynamodb"]
        migration.replay(from_wire(change.get("NewImage")), from_wire(change.get("OldImage")))
    # Then the copy shows each write, its own version moved on past them
    now = item(tables, NEW_REF, "ticker", "a")
    assert now["heartbeat_at_ms"] > copied["heartbeat_at_ms"]
    assert now["checkpoint"] == {"count": 9}
    assert now["version"] > copied["version"]
    assert now[LEGACY_VERSION] == old.get("a").version
    late = ObserverRegistry(tables, NEW_REF).get("late")
    assert (late.desired.value, late.status) == ("STOPPED", Status.STOPPING)
    assert counter(tables) == 1  # a: running; late: created (+1), then stopped (-1)
    # And a record replayed again (a stream batch retried) changes nothing
    before = item(tables, NEW_REF, "ticker", "a")
    migration.replay(dict(item(tables, OLD_REF, "", "a")), None)
    assert item(tables, NEW_REF, "ticker", "a") == before


def start(record: d.Record, generation: int) -> d.StartTask:
    retry_at = record.observer.updated_at + timedelta(minutes=10)
    return d.StartTask(generation, restart=True, consecutive_failures=0, retry_at=retry_at)


def test_the_next_generation_carries_the_old_container_s_last_writes_and_fences_its_record(
    tables: Any, old: ObserverRegistry, migration: Migration, clock: ManualClock
) -> None:
    running(old, tables, "a", "ticker", 2)
    migration.ensure()
    # The old container's last checkpoint lands after the last replay the copy saw
    old.checkpoint("a", 2, {"count": 12})
    store = FleetStore(tables, NEW_REF, legacy=LegacyRegistry(tables, OLD))
    record = store.get("a")
    assert record is not None and record.tracking.legacy
    # When the reconciler starts generation 3 (a rollout's hand-over)
    store.apply(record, start(record, 3), clock(), None)
    # Then it starts from that checkpoint, unmarked, and the old record is fenced
    now = item(tables, NEW_REF, "ticker", "a")
    assert (now["generation"], now["status"], now["checkpoint"]) == (3, "STARTING", {"count": 12})
    assert LEGACY_ATTRIBUTE not in now and LEGACY_VERSION not in now
    assert item(tables, OLD_REF, "", "a")["generation"] == 3
    with pytest.raises(Fenced):
        FencedWrites(tables, OLD_REF).heartbeat("a", 2)  # the old container, at its next beat
    assert migration_status(tables, NEW_REF, OLD).writing == ()  # unmarked: it writes here


def test_a_take_over_waits_while_the_old_side_has_a_newer_generation_the_copy_lacks(
    tables: Any, old: ObserverRegistry, migration: Migration, clock: ManualClock
) -> None:
    running(old, tables, "a", "ticker", 2)
    migration.ensure()
    store = FleetStore(tables, NEW_REF, legacy=LegacyRegistry(tables, OLD))
    record = store.get("a")
    assert record is not None
    # An older reconciler, still running during the deploy, started generation 3 there
    start_generation(tables, "a", 3)
    before = (item(tables, NEW_REF, "ticker", "a"), item(tables, OLD_REF, "", "a"))
    with pytest.raises(Conflict):
        store.apply(record, start(record, 3), clock(), None)
    assert (item(tables, NEW_REF, "ticker", "a"), item(tables, OLD_REF, "", "a")) == before


def test_the_api_waits_for_the_copy_then_answers(
    tables: Any, old: ObserverRegistry, migration: Migration
) -> None:
    gate = MigrationGate(tables, NEW_REF, OLD)
    with pytest.raises(RegistryMigrating):
        gate.check()
    assert gate.status().to_json()["copied_at"] is None
    migration.ensure()
    gate.check()
    assert gate.status().to_json()["copied"] == 0 and gate.status().complete


def test_what_is_no_observer_in_the_old_stream_is_not_replayed(
    tables: Any, migration: Migration
) -> None:
    migration.ensure()
    before = list(tables.scan(TableName=NEW)["Items"])
    for new, old in (
        (None, None),  # a REMOVE
        ({"name": "#fleet", "active": 3}, None),  # the old counter
        ({"name": "#resync", "lease_holder": "x"}, None),  # the old lease
        ({"name": "x", "fleet": "observers"}, None),  # no kind: nothing to key it by
    ):
        migration.replay(new, old)
    assert list(tables.scan(TableName=NEW)["Items"]) == before


def test_a_copy_cut_short_is_finished_by_the_next_counting_each_observer_once(
    tables: Any, old: ObserverRegistry, migration: Migration, clock: ManualClock
) -> None:
    for name in ("a", "b", "c"):
        running(old, tables, name, "ticker", 1)
    # The first invocation copied one observer, then Lambda ended it (no marker written)
    migration.adopt(dict(item(tables, OLD_REF, "", "a")))
    with pytest.raises(RegistryMigrating):
        MigrationGate(tables, NEW_REF, OLD).check()
    # The next one copies the rest; the one already here is neither copied again nor counted
    fresh = Migration(tables, NEW_REF, LegacyRegistry(tables, OLD), clock=clock)
    assert fresh.ensure().copied == 3
    assert counter(tables) == 3
    assert sorted(o.name for o in ObserverRegistry(tables, NEW_REF).iter_all()) == ["a", "b", "c"]
