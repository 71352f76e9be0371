"""A resync costs the same whatever stopped records the account keeps (issue 21).

The fleet index holds every observer but the STOPPED ones (``contract.observers.status_fields``
moves a record between it and the small stopped index in the write that changes its status); the
list and FleetStopped read the stopped index; records from before the split are moved by the first
pass; a record an older writer restarted inside the stopped index is moved back on a sweep.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.helpers.clients import ItemReads
from tests.helpers.moto_fleet import TABLE, MotoFleet
from tests.helpers.observers import registry_key
from vigil.clock import epoch_ms, iso
from vigil.contract.observers import (
    FLEET_ATTRIBUTE,
    FLEET_PARTITION,
    STOPPED_ATTRIBUTE,
    STOPPED_INDEX_PROJECTION,
    TRACKING_ATTRIBUTES,
    Status,
    status_fields,
)
from vigil.dynamo import Update
from vigil.observers import decisions as d
from vigil.observers.fleet_store import FleetStore
from vigil.observers.model import Desired, LastExit
from vigil.observers.reconciler.hosts import sweep_due
from vigil.observers.registry import ObserverRegistry
from vigil.telemetry import ObserverMetric

LIVE = 3
STOPPED = 600


def stopped_history(fleet: MotoFleet, count: int) -> None:
    """Observers stopped long ago, kept in the registry (their records are never deleted)."""
    fleet.put_many(
        [
            fleet.observer(f"old-{i:04d}", desired=Desired.STOPPED, status=Status.STOPPED)
            for i in range(count)
        ]
    )


def minute(fleet: MotoFleet, *, sweep: bool) -> None:
    """Advance to the next minute that is (or is not) a sweep's."""
    fleet.clock.advance(timedelta(minutes=1))
    while sweep_due(fleet.clock()) is not sweep:
        fleet.clock.advance(timedelta(minutes=1))


def beat(fleet: MotoFleet, name: str) -> None:
    update = Update().set_all(
        {"heartbeat_at": iso(fleet.clock()), "heartbeat_at_ms": epoch_ms(fleet.clock())}
    )
    fleet.dynamodb.update_item(
        TableName=TABLE, Key=registry_key(fleet.dynamodb, TABLE, name), **update.request()
    )


def membership(fleet: MotoFleet, name: str) -> tuple[bool, bool]:
    """(in the fleet index, in the stopped index)."""
    item = fleet.item(name)
    return FLEET_ATTRIBUTE in item, STOPPED_ATTRIBUTE in item


def as_written_before_the_split(fleet: MotoFleet, name: str) -> None:
    """A STOPPED record as every writer left it before the stopped index: still in the fleet
    index."""
    update = Update().set(FLEET_ATTRIBUTE, FLEET_PARTITION).remove(STOPPED_ATTRIBUTE)
    fleet.dynamodb.update_item(
        TableName=TABLE, Key=registry_key(fleet.dynamodb, TABLE, name), **update.request()
    )


def gauge(fleet: MotoFleet, metric: ObserverMetric) -> list[float]:
    return [value for name, _, value in fleet.metrics if name == metric.value]


# Cost of a pass -----------------------------------------------------------------------------------


def test_a_pass_reads_the_live_records_whatever_the_stopped_ones(fleet: MotoFleet) -> None:
    # Given 3 live observers beside 600 stopped ones
    for i in range(LIVE):
        fleet.running_task(f"obs-{i}", 1)
    stopped_history(fleet, STOPPED)
    minute(fleet, sweep=False)
    for i in range(LIVE):
        beat(fleet, f"obs-{i}")
    reads = ItemReads(fleet.dynamodb)
    fleet.counter.reset()
    # When an ordinary minute's resync runs
    report = fleet.reconciler().resync("healthy")
    # Then it read the 3 live records in one page, not the 600 stopped ones
    assert report is not None and report.observers == LIVE
    assert (reads.queries, reads.items) == (1, LIVE)
    assert fleet.counter.calls["Query"] == 1
    # And it does not claim a count of stopped observers it did not read
    assert gauge(fleet, ObserverMetric.FLEET_STOPPED) == []
    assert gauge(fleet, ObserverMetric.FLEET_RUNNING) == [LIVE]


def test_a_sweep_minute_counts_the_stopped_ones_from_their_small_index(fleet: MotoFleet) -> None:
    fleet.running_task("obs-a", 1)
    stopped_history(fleet, STOPPED)
    minute(fleet, sweep=True)
    reads = ItemReads(fleet.dynamodb)
    report = fleet.reconciler().resync("sweep")
    assert report is not None and report.observers == 1
    # One more query (600 items of a name and a status: one page, a few read units)
    assert (reads.queries, reads.items) == (2, 1 + STOPPED)
    assert gauge(fleet, ObserverMetric.FLEET_STOPPED) == [STOPPED]


# Keeping each record in the index its status belongs to ---------------------------------------------


@pytest.mark.parametrize("status", list(Status))
def test_a_status_puts_a_record_in_exactly_one_index(status: Status) -> None:
    sets, removes = status_fields(status)
    assert sets["status"] == status.value
    listed = {FLEET_ATTRIBUTE, STOPPED_ATTRIBUTE} & sets.keys()
    assert listed == ({STOPPED_ATTRIBUTE} if status is Status.STOPPED else {FLEET_ATTRIBUTE})
    assert set(removes) == {FLEET_ATTRIBUTE, STOPPED_ATTRIBUTE} - listed


def test_heartbeats_never_write_the_stopped_index() -> None:
    # Its projection is the status alone: a heartbeat (or a checkpoint, or a version bump) of a
    # record in it changes nothing it holds, so it costs no index write (the fleet index's
    # write per heartbeat is unchanged: same projection, same items).
    assert STOPPED_INDEX_PROJECTION == ("status",)
    assert not set(STOPPED_INDEX_PROJECTION) & {
        "heartbeat_at",
        "heartbeat_at_ms",
        "version",
        "updated_at",
        "checkpoint",
        *TRACKING_ATTRIBUTES,
    }


def writes(now: datetime) -> list[d.Write]:
    return [
        d.MarkStopped(LastExit(exit_code=0)),  # STOPPED: out of the fleet index ...
        d.StartTask(generation=2, restart=True, consecutive_failures=0, retry_at=now),  # back
        d.MarkStopping(),
        d.MarkStopped(None),
        d.Backoff(until=now, consecutive_failures=1, last_exit=None),
        d.MarkStopped(None),
        d.MarkFailed("crashed", 5, None),
    ]


def test_every_reconciler_transition_moves_the_record_with_its_status(fleet: MotoFleet) -> None:
    fleet.running_task("a", 1)
    store = FleetStore(fleet.dynamodb, TABLE)
    for write in writes(fleet.clock()):
        record = store.get("a")
        assert record is not None
        store.apply(record, write, fleet.clock(), None)
        stopped = fleet.item("a")["status"] == Status.STOPPED.value
        assert membership(fleet, "a") == (not stopped, stopped), write


def test_every_registry_status_write_moves_the_record_with_its_status(fleet: MotoFleet) -> None:
    registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=fleet.clock)
    registry.create("a", "ticker", {"every": 5})
    assert membership(fleet, "a") == (True, False)  # PENDING
    registry.request_stop("a")  # no task yet: STOPPED at once
    assert membership(fleet, "a") == (False, True)
    registry.request_restart("a")  # re-armed: PENDING
    assert membership(fleet, "a") == (True, False)
    # The reconciler starts it; its container claims, then stops because asked to
    minute(fleet, sweep=False)
    fleet.reconciler().resync("start")
    assert fleet.item("a")["status"] == Status.STARTING.value
    registry.claim_generation("a", 1)
    assert membership(fleet, "a") == (True, False)
    registry.request_stop("a")
    assert fleet.item("a")["status"] == Status.STOPPING.value
    assert membership(fleet, "a") == (True, False)
    registry.report_exit("a", 1, exit_code=0, reason="asked to stop", task_arn=None, stopped=True)
    assert fleet.item("a")["status"] == Status.STOPPED.value
    assert membership(fleet, "a") == (False, True)


# Records from before the split, and older writers during a deployment ------------------------------


def test_records_from_before_the_split_are_moved_by_the_first_pass_once(fleet: MotoFleet) -> None:
    # Given a table written before the stopped index: its STOPPED records in the fleet index
    fleet.settings = d.Settings(heartbeat_interval=timedelta(hours=1))  # obs-a stays healthy
    fleet.running_task("obs-a", 1)
    stopped_history(fleet, 5)
    for i in range(5):
        as_written_before_the_split(fleet, f"old-{i:04d}")
    minute(fleet, sweep=False)
    # When the first pass runs, it decides the live one only and moves the stopped ones out
    fleet.counter.reset()
    report = fleet.reconciler().resync("first")
    assert report is not None and report.observers == 1 and report.errors == 0
    first = fleet.counter.calls["UpdateItem"]
    assert all(membership(fleet, f"old-{i:04d}") == (False, True) for i in range(5))
    # Then the next passes find nothing to move: the backfill is idempotent
    reads = ItemReads(fleet.dynamodb)
    for holder in ("second", "third"):
        minute(fleet, sweep=False)
        fleet.counter.reset()
        fleet.reconciler().resync(holder)
        assert fleet.counter.calls["UpdateItem"] == first - 5
    assert reads.items == 2
    assert FleetStore(fleet.dynamodb, TABLE).relist("old-0000", Status.STOPPED)  # again: a no-op
    assert membership(fleet, "old-0000") == (False, True)
    # And the stopped ones are counted (and listed) from the stopped index
    minute(fleet, sweep=True)
    fleet.reconciler().resync("sweep")
    assert gauge(fleet, ObserverMetric.FLEET_STOPPED) == [5]


def test_a_record_an_older_writer_restarted_in_the_stopped_index_is_moved_back(
    fleet: MotoFleet,
) -> None:
    # Given a STOPPED record that an API of the previous release re-armed during the deployment:
    # PENDING, but still in the stopped index (that writer knew nothing of the indexes' split)
    stopped_history(fleet, 1)
    update = Update().set_all({"status": Status.PENDING.value, "desired": Desired.RUNNING.value})
    fleet.dynamodb.update_item(
        TableName=TABLE, Key=registry_key(fleet.dynamodb, TABLE, "old-0000"), **update.request()
    )
    # Then an ordinary pass does not see it, the sweep minute moves it back, and it starts
    minute(fleet, sweep=False)
    report = fleet.reconciler().resync("ordinary")
    assert report is not None and report.observers == 0
    minute(fleet, sweep=True)
    fleet.reconciler().resync("sweep")
    assert membership(fleet, "old-0000") == (True, False)
    assert gauge(fleet, ObserverMetric.FLEET_STOPPED) == [0]
    minute(fleet, sweep=False)
    report = fleet.reconciler().resync("starts")
    assert report is not None and report.started == 1


def test_a_move_loses_to_a_status_that_changed_meanwhile(fleet: MotoFleet) -> None:
    stopped_history(fleet, 1)
    as_written_before_the_split(fleet, "old-0000")
    registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=fleet.clock)
    registry.request_restart("old-0000")  # PENDING, in the fleet index (it always was)
    # The pass that read it STOPPED moves it too late: refused, nothing changes
    assert not FleetStore(fleet.dynamodb, TABLE).relist("old-0000", Status.STOPPED)
    assert membership(fleet, "old-0000") == (True, False)


# The list reads both indexes -------------------------------------------------------------------


def test_the_list_merges_both_indexes_in_name_order_across_pages(fleet: MotoFleet) -> None:
    registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=fleet.clock)
    names = [f"obs-{i:02d}" for i in range(9)]
    for name in names:
        registry.create(name, "ticker", {})
    for name in names[::3] + names[1::4]:  # 00 03 06 01 05: stopped, interleaved with live ones
        registry.request_stop(name)
    stopped = sorted(set(names[::3] + names[1::4]))

    def listed(status: Status | None, limit: int) -> list[tuple[str, str]]:
        seen, cursor = [], None
        while True:
            page = registry.list_page(status=status, limit=limit, cursor=cursor)
            assert len(page.observers) <= limit
            seen += [(o.name, o.status.value) for o in page.observers]
            if page.cursor is None:
                return seen
            cursor = page.cursor

    for limit in (1, 2, 4, 100):
        everything = listed(None, limit)
        assert [n for n, _ in everything] == names
        assert [n for n, s in everything if s == "STOPPED"] == stopped
        assert [n for n, _ in listed(Status.STOPPED, limit)] == stopped
        assert [n for n, _ in listed(Status.PENDING, limit)] == sorted(set(names) - set(stopped))


def test_a_first_pass_on_a_sweep_minute_counts_the_records_it_moves(fleet: MotoFleet) -> None:
    stopped_history(fleet, 4)
    for i in range(4):
        as_written_before_the_split(fleet, f"old-{i:04d}")
    minute(fleet, sweep=True)
    fleet.reconciler().resync("sweep")
    assert gauge(fleet, ObserverMetric.FLEET_STOPPED) == [4]
    assert all(membership(fleet, f"old-{i:04d}") == (False, True) for i in range(4))
