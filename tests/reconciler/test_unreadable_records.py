"""A kind's task role may UpdateItem its own partition (``CONTAINER_UPDATE_ATTRIBUTES``): a
compromised or buggy container can leave an item there no writer of ours makes (a status that is
none, or an item without ``created_at`` under any name, another kind's observer's too). Such an
item is skipped and counted (``ReconcilePassErrors``) by every reader that walks the fleet, never
the end of a pass over every kind's observers. Cost: ~1 s (moto)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from handlers.reconciler import dispatch
from tests.helpers.moto_fleet import KIND, TABLE, MotoFleet, stream, task_event
from vigil.contract.observers import CONTAINER_UPDATE_ATTRIBUTES
from vigil.dynamo import to_wire
from vigil.observers.model import Status, to_item
from vigil.observers.reconciler import changed_records
from vigil.observers.reconciler.hosts import sweep_due
from vigil.observers.registry import ObserverRegistry
from vigil.observers.registry.table import RegistryTable

ROGUE = "rogue"


def rogue_write(fleet: MotoFleet, name: str, values: dict[str, Any]) -> None:
    """What the rogue kind's role may write: its own partition, container attributes only."""
    assert set(values) <= set(CONTAINER_UPDATE_ATTRIBUTES)
    names = {f"#a{i}": attribute for i, attribute in enumerate(values)}
    fleet.dynamodb.update_item(
        TableName=TABLE,
        Key=to_wire({"kind": ROGUE, "name": name}),
        UpdateExpression="SET " + ", ".join(f"{n} = :v{n[2:]}" for n in names),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=to_wire(
            {f":v{i}": value for i, value in enumerate(values.values())}
        ),
    )


def test_given_items_a_rogue_kind_wrote_when_resyncing_then_every_other_observer_is_decided(
    fleet: MotoFleet,
) -> None:
    fleet.put(fleet.observer("good"))
    fleet.put(fleet.observer("bad", kind=ROGUE, status=Status.RUNNING, generation=1))
    # its own observer's status made none, and an item under another kind's observer's name
    rogue_write(fleet, "bad", {"status": "HACKED"})
    rogue_write(
        fleet,
        "good",
        {"status": "RUNNING", "fleet": "observers", "generation": 1, "version": 9},
    )

    report = fleet.reconciler().resync("pass")

    assert report is not None and report.errors == 2
    assert fleet.item("good")["status"] == "STARTING"  # decided, and still its own kind's
    assert fleet.item("good")["kind"] != ROGUE


def test_given_a_stream_picture_no_writer_makes_when_dispatched_then_the_others_are_acted_on(
    fleet: MotoFleet,
) -> None:
    fleet.put(fleet.observer("good"))
    good = to_item(fleet.observer("good"))
    bad = {**to_item(fleet.observer("bad", kind=ROGUE)), "status": "HACKED"}

    assert [r.name for r in changed_records([stream(bad), stream(good)])] == ["good"]
    dispatch({"Records": [stream(bad), stream(good)]}, "r1", fleet.reconciler(), fleet.cluster_arn)
    assert fleet.item("good")["status"] == "STARTING"


def test_given_an_item_a_rogue_kind_wrote_in_the_stopped_index_when_sweeping_then_no_write_goes_to_it(
    fleet: MotoFleet,
) -> None:
    """Under another kind's observer's name, in the stopped index (which the sweep reads for
    names and statuses only): the name's claim says whose observer it is, not the item."""
    fleet.put(fleet.observer("good"))
    rogue_write(fleet, "good", {"status": "STOPPED", "stopped_fleet": "observers", "version": 1})
    while not sweep_due(fleet.clock()):
        fleet.clock.advance(timedelta(minutes=1))

    fleet.reconciler().resync("pass")

    assert fleet.item("good")["status"] == "STARTING"  # started, its own record written
    phantom = fleet.dynamodb.get_item(
        TableName=TABLE, Key=to_wire({"kind": ROGUE, "name": "good"})
    )["Item"]
    assert set(phantom) == {"kind", "name", "status", "stopped_fleet", "version"}


def test_given_items_a_rogue_kind_wrote_when_listing_then_every_observer_is_listed_once(
    fleet: MotoFleet,
) -> None:
    """The API's list (and ``vigil observers list``): an item under another kind's observer's
    name in either index neither hides that observer nor fails the page."""
    fleet.put_many([fleet.observer("a-good"), fleet.observer("b-good", status=Status.STOPPED)])
    fleet.put(fleet.observer("bad", kind=ROGUE, status=Status.RUNNING, generation=1))
    rogue_write(fleet, "bad", {"status": "HACKED"})
    rogue_write(fleet, "a-good", {"status": "STOPPED", "stopped_fleet": "observers"})
    rogue_write(fleet, "b-good", {"status": "RUNNING", "fleet": "observers"})
    registry = ObserverRegistry(fleet.dynamodb, TABLE, clock=fleet.clock)

    listed = [(o.name, o.kind, o.status) for o in registry.iter_all()]

    assert listed == [("a-good", KIND, Status.PENDING), ("b-good", KIND, Status.STOPPED)]


def test_given_a_name_read_with_two_kinds_when_its_kind_is_asked_then_its_claim_answers(
    fleet: MotoFleet,
) -> None:
    fleet.put(fleet.observer("good"))
    table = RegistryTable(fleet.dynamodb, TABLE)
    for kind in (ROGUE, KIND, ROGUE):  # whichever item is read first
        table.remember("good", kind)

    assert table.kind_of("good") == KIND
    table.remember("good", ROGUE)
    assert table.kind_of("good") == KIND


class RogueAtTheWrite:
    """The registry's client, but the rogue kind rewrites its observer's record (a status that is
    none, the version moved on) just before the reconciler's first write of it lands."""

    def __init__(self, fleet: MotoFleet, name: str) -> None:
        self._fleet, self._name, self.done = fleet, name, False

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._fleet.dynamodb, attribute)

    def _first(self, names: set[str]) -> None:
        if self._name in names and not self.done:
            self.done = True
            rogue_write(self._fleet, self._name, {"status": "HACKED", "version": 50})

    def update_item(self, **request: Any) -> Any:
        self._first({str(request["Key"]["name"]["S"])})
        return self._fleet.dynamodb.update_item(**request)

    def transact_write_items(self, **request: Any) -> Any:
        keys = [next(iter(action.values())).get("Key") or {} for action in request["TransactItems"]]
        self._first({str(key.get("name", {}).get("S")) for key in keys})
        return self._fleet.dynamodb.transact_write_items(**request)


def test_given_a_record_made_unreadable_under_a_write_when_resyncing_then_the_pass_goes_on(
    fleet: MotoFleet,
) -> None:
    """The reconciler's conditional write loses to the rogue's, and the record it gets back (to
    decide again from) is unreadable: that observer is skipped, the others decided."""
    fleet.put_many([fleet.observer("a-bad", kind=ROGUE), fleet.observer("b-good")])
    client = RogueAtTheWrite(fleet, "a-bad")

    report = fleet.reconciler(dynamodb=client).resync("pass")

    assert client.done and report is not None and report.errors == 1
    assert fleet.item("b-good")["status"] == "STARTING"


def test_given_an_unreadable_record_when_its_task_event_comes_then_skipped_not_failed(
    fleet: MotoFleet,
) -> None:
    """A failed invocation would have the event redelivered into the same item, then dead-lettered."""
    fleet.put(fleet.observer("bad", kind=ROGUE, status=Status.RUNNING, generation=1))
    rogue_write(fleet, "bad", {"status": "HACKED"})
    arn = fleet.run_observer_task("bad", 1)
    event = task_event(fleet, arn, name="bad", generation=1, last_status="STOPPED", version=3)

    answer = dispatch(event, "r1", fleet.reconciler(), fleet.cluster_arn)

    assert answer["pass"] == "event"
