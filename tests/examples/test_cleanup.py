"""The example job ``cleanup`` (every 5 minutes, policy ``skip``), tested as a team tests its own:
on the deployed app, through Scheduler's deliveries, the guard and the runs table."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jobs.cleanup import LAST_RUN
from vigil.contract.effects import FENCE_ATTRIBUTE
from vigil_tools.testing import VigilStack


def test_a_tick_delivered_three_times_runs_once(vigil_stack: VigilStack) -> None:
    t = vigil_stack.now() + timedelta(minutes=5)

    vigil_stack.fire("cleanup", at=t, copies=3)

    assert [r.status for r in vigil_stack.history("cleanup")] == ["SUCCEEDED"]
    (tick,) = vigil_stack.history("cleanup")
    assert tick.scheduled_at == t
    assert tick.attempts == 1


def test_the_schedule_fires_every_five_minutes(vigil_stack: VigilStack) -> None:
    start = vigil_stack.now()

    vigil_stack.advance(minutes=15)

    history = vigil_stack.history("cleanup")
    assert [r.scheduled_at - start for r in history] == [
        timedelta(minutes=15),
        timedelta(minutes=10),
        timedelta(minutes=5),
    ]
    assert {r.status for r in history} == {"SUCCEEDED"}
    assert vigil_stack.now() == start + timedelta(minutes=15)


def test_a_delivery_past_the_lateness_limit_is_recorded_missed(vigil_stack: VigilStack) -> None:
    t = vigil_stack.now() - timedelta(minutes=10)

    vigil_stack.fire("cleanup", at=t)

    assert [(r.scheduled_at, r.status) for r in vigil_stack.history("cleanup")] == [(t, "MISSED")]
    assert vigil_stack.dead_letters("cleanup") == []


def _sessions(vigil_stack: VigilStack) -> tuple[Any, str]:
    return vigil_stack.account.session.client("dynamodb"), vigil_stack.table("Sessions")


def _seen(client: Any, table: str, session: str, at: datetime) -> None:
    client.put_item(
        TableName=table,
        Item={"id": {"S": session}, "last_seen": {"N": str(int(at.timestamp()))}},
    )


def _ids(client: Any, table: str) -> set[str]:
    return {i["id"]["S"] for i in client.scan(TableName=table)["Items"]}


def test_idle_sessions_are_deleted_through_the_fenced_table(vigil_stack: VigilStack) -> None:
    client, table = _sessions(vigil_stack)
    t = vigil_stack.now() + timedelta(minutes=5)
    _seen(client, table, "idle", t - timedelta(days=8))
    _seen(client, table, "fresh", t - timedelta(days=1))

    vigil_stack.fire("cleanup", at=t)

    assert _ids(client, table) == {"fresh", LAST_RUN}
    last = client.get_item(TableName=table, Key={"id": {"S": LAST_RUN}})["Item"]
    (tick,) = vigil_stack.history("cleanup")
    assert (last["tick"]["S"], last["deleted"]["N"]) == (tick.tick, "1")
    assert last[FENCE_ATTRIBUTE]["S"].endswith(f"#{tick.fencing_token:020d}")


def test_a_run_frozen_past_its_lease_cannot_write_after_its_successor(
    vigil_stack: VigilStack,
) -> None:
    client, table = _sessions(vigil_stack)
    t = vigil_stack.now() + timedelta(minutes=5)
    _seen(client, table, "idle", t - timedelta(days=8))
    held = vigil_stack.fire("cleanup", at=t, hold=True)  # frozen right after its claim

    vigil_stack.advance(minutes=5)  # its lease runs out; the next tick runs, with a newer token
    late = held.release().attempts[-1]  # the frozen run goes on, late

    # Then the next tick's summary is the one kept; the frozen run's write was refused
    successor, frozen = vigil_stack.history("cleanup")
    assert (successor.scheduled_at, successor.status) == (t + timedelta(minutes=5), "SUCCEEDED")
    last = client.get_item(TableName=table, Key={"id": {"S": LAST_RUN}})["Item"]
    assert (last["tick"]["S"], last["deleted"]["N"]) == (successor.tick, "1")
    assert _ids(client, table) == {LAST_RUN}
    # its own tick, which no one took over, ends FENCED: superseded, not retried (a retry's newer
    # token would write the older tick's summary over its successor's), nor dead-lettered
    assert (late.error_type, late.payload["outcome"]) == (None, "FENCED")
    assert (frozen.tick, frozen.status, frozen.error_type) == (held.tick, "FENCED", "Fenced")
    assert frozen.attempts == 1 and vigil_stack.dead_letters("cleanup") == []
    assert "superseded" in (frozen.error_message or "")
