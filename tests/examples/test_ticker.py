"""The example observer kind ``ticker``, tested as a team tests its own kind: created through the
management API, started by the reconciler, run by the container runtime on a simulated clock."""

from __future__ import annotations

from typing import Any

from vigil.contract.effects import FENCE_ATTRIBUTE
from vigil_tools.testing import VigilStack


def _count(vigil_stack: VigilStack, name: str) -> dict[str, Any]:
    client = vigil_stack.account.session.client("dynamodb")
    table = vigil_stack.table("TickerCounts")
    item = client.get_item(TableName=table, Key={"observer": {"S": name}})["Item"]
    return {k: next(iter(v.values())) for k, v in item.items()}


def test_a_ticker_runs_and_checkpoints_its_count(vigil_stack: VigilStack) -> None:
    vigil_stack.create_observer("btc-watch", "ticker", {"interval_seconds": 10})

    vigil_stack.advance(seconds=60)

    observer = vigil_stack.observer("btc-watch")
    assert (observer.status, observer.generation) == ("RUNNING", 1)
    assert observer.checkpoint == {"count": 7}  # at 0, 10, ..., 60 s
    # and its count is in the team's table, written with the generation's fence
    count = _count(vigil_stack, "btc-watch")
    assert (count["count"], count["generation"]) == ("7", "1")
    assert count[FENCE_ATTRIBUTE] == f"observer:btc-watch#{1:020d}"


def test_after_a_crash_it_resumes_from_the_checkpoint(vigil_stack: VigilStack) -> None:
    vigil_stack.create_observer("btc-watch", "ticker", {"interval_seconds": 10})
    vigil_stack.advance(seconds=30)

    vigil_stack.crash("btc-watch")

    observer = vigil_stack.observer("btc-watch")
    assert (observer.status, observer.generation, observer.restarts) == ("RUNNING", 2, 1)
    assert observer.last_exit is not None and observer.last_exit["exit_code"] == 1
    # generation 2 counts on from generation 1's checkpoint (4), it does not start again at 1
    assert observer.checkpoint == {"count": 5}
    assert (
        _count(vigil_stack, "btc-watch")["count"],
        _count(vigil_stack, "btc-watch")["generation"],
    ) == ("5", "2")


def test_a_stopped_ticker_saves_its_count_and_stops(vigil_stack: VigilStack) -> None:
    vigil_stack.create_observer("btc-watch", "ticker", {"interval_seconds": 10})
    vigil_stack.advance(seconds=20)

    vigil_stack.stop_observer("btc-watch")

    observer = vigil_stack.observer("btc-watch")
    assert (observer.status, observer.desired) == ("STOPPED", "STOPPED")
    assert observer.checkpoint == {"count": 3}
