"""``ctx.once`` in an observer: the journal of effects on the observer's registry record, kept
across generations (the same discipline as ``run.once``, :mod:`vigil.effects.journal`)."""

from __future__ import annotations

from typing import Any

import pytest

from vigil.clock import ManualClock
from vigil.contract.journal import JOURNAL_ATTRIBUTE, UNCERTAIN_EFFECT_ATTRIBUTE
from vigil.dynamo import to_wire
from vigil.effects import journal
from vigil.observers import decisions as d
from vigil.observers.registry import ObserverRegistry
from vigil.observers.runtime import ExitCode, ObserverContext, StopReason

from .conftest import StoredObserver
from .test_runtime import Harness, install


class Crash(Exception):
    """The container dying after the page went out, before its completion was written."""


@pytest.fixture
def observer(registry: ObserverRegistry) -> ObserverRegistry:
    registry.create("obs", "sample", {})
    return registry


def generation(
    registry: ObserverRegistry, stored: StoredObserver, clock: ManualClock, number: int
) -> Harness:
    stored.start(number)
    return Harness(registry, clock, generation=number)


def paging(sent: list[int], *, crash_first: bool = False, check: Any = None) -> Any:
    def behaviour(ctx: ObserverContext) -> None:
        with ctx.once("page:incident-7", check=check) as first:
            if first:
                sent.append(ctx.generation)
                if crash_first and len(sent) == 1:
                    raise Crash("died after paging")

    return behaviour


def test_an_effect_done_by_one_generation_is_skipped_by_its_replacement(
    observer: ObserverRegistry,
    stored: StoredObserver,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[int] = []
    install(monkeypatch, paging(sent))

    first = generation(observer, stored, clock, 1).runtime.run()
    second = generation(observer, stored, clock, 2).runtime.run()

    assert (first, second, sent) == (ExitCode.CLEAN, ExitCode.CLEAN, [1])
    entry = stored.raw()[JOURNAL_ATTRIBUTE]["page:incident-7"]
    assert (entry["state"], entry["fence"]) == ("DONE", 1)


def test_a_crash_between_intent_and_completion_stops_the_next_generation_uncertain(
    observer: ObserverRegistry,
    stored: StoredObserver,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[int] = []
    install(monkeypatch, paging(sent, crash_first=True))
    assert generation(observer, stored, clock, 1).runtime.run() is ExitCode.CRASH

    replacement = generation(observer, stored, clock, 2).runtime
    code = replacement.run()

    assert sent == [1]  # not a second page
    assert (code, replacement.stop_reason) == (ExitCode.UNCERTAIN, StopReason.UNCERTAIN)
    item = stored.raw()
    assert item[UNCERTAIN_EFFECT_ATTRIBUTE] == "page:incident-7"
    assert "never recorded done" in item["uncertain_reason"]
    assert item["last_exit"]["exit_code"] == ExitCode.UNCERTAIN
    # and the reconciler does not restart it: FAILED, saying what to type
    plan = d._restart(
        d.Record(observer.get("obs")),
        d.TaskState(arn="arn:task/2", last_status="STOPPED", exit_code=int(ExitCode.UNCERTAIN)),
        clock(),
        d.Settings(),
    )
    (failed,) = plan.actions
    assert isinstance(failed, d.MarkFailed) and "uncertain_effect" in failed.reason


@pytest.mark.parametrize(("happened", "sent_by"), [(True, [1]), (False, [1, 2])])
def test_a_check_decides_an_effect_left_unfinished(
    observer: ObserverRegistry,
    stored: StoredObserver,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    happened: bool,
    sent_by: list[int],
) -> None:
    sent: list[int] = []
    install(monkeypatch, paging(sent, crash_first=True, check=lambda: happened))
    generation(observer, stored, clock, 1).runtime.run()

    code = generation(observer, stored, clock, 2).runtime.run()

    assert (code, sent) == (ExitCode.CLEAN, sent_by)
    entry = stored.raw()[JOURNAL_ATTRIBUTE]["page:incident-7"]
    assert entry["state"] == "DONE"


def test_a_replaced_generation_cannot_begin_an_effect(
    observer: ObserverRegistry,
    stored: StoredObserver,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[int] = []
    old = generation(observer, stored, clock, 1)

    def replaced_then_pages(ctx: ObserverContext) -> None:
        stored.start(2)
        paging(sent)(ctx)

    install(monkeypatch, replaced_then_pages)
    code = old.runtime.run()

    assert (code, sent) == (ExitCode.FENCED, [])
    assert "page:incident-7" not in stored.raw()[JOURNAL_ATTRIBUTE]


def test_a_full_observer_journal_forgets_its_oldest_finished_effects_instead_of_refusing(
    observer: ObserverRegistry,
    stored: StoredObserver,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An observer names each occurrence (``alert:<incident>``) and lives for years: a journal
    that only grows would refuse every new effect after its cap and stop the observer for good.
    Full, it forgets its oldest finished effects (a batch, one request) and goes on; a recent one
    is still skipped by a replacement."""
    monkeypatch.setattr(journal, "MAX_EFFECTS", 4)
    monkeypatch.setattr(journal, "FORGET_BATCH", 2)
    sent: list[str] = []

    def alerting(incidents: range) -> Any:
        def behaviour(ctx: ObserverContext) -> None:
            for incident in incidents:
                clock.advance(1)
                with ctx.once(f"alert:{incident}") as first:
                    if first:
                        sent.append(f"alert:{incident}")

        return behaviour

    install(monkeypatch, alerting(range(7)))
    assert generation(observer, stored, clock, 1).runtime.run() is ExitCode.CLEAN
    assert sent == [f"alert:{i}" for i in range(7)]
    kept = stored.raw()[JOURNAL_ATTRIBUTE]
    assert sorted(kept) == ["alert:4", "alert:5", "alert:6"]  # 0-1 forgotten at 4, 2-3 at 6

    install(monkeypatch, alerting(range(5, 7)))
    assert generation(observer, stored, clock, 2).runtime.run() is ExitCode.CLEAN
    assert len(sent) == 7  # the replacement skips what is still remembered


def test_a_full_observer_journal_of_unfinished_effects_is_still_refused(
    observer: ObserverRegistry,
    stored: StoredObserver,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only finished effects are forgotten: an intent without its completion is exactly what a
    person must settle, never dropped to make room."""
    monkeypatch.setattr(journal, "MAX_EFFECTS", 2)
    stored.start(1)
    site = observer.record_site("obs", 1, lambda: 5.0)
    begun = {"state": {"S": "INTENT"}, "fence": {"N": "1"}, "at": {"S": "2026-11-25T00:00:00Z"}}
    site.client.update_item(
        TableName=site.table,
        Key=to_wire(site.key),
        UpdateExpression="SET #j = :j",
        ExpressionAttributeNames={"#j": JOURNAL_ATTRIBUTE},
        ExpressionAttributeValues={":j": {"M": {f"e{i}": {"M": begun} for i in range(2)}}},
    )
    with pytest.raises(journal.JournalFull), journal.Journal(site).once("e2"):
        pass
