"""What the manager reads about a pooled observer, and from whom (issue 33, items 4 and 5).

* A stream record is a picture of the record when it was written: the event source mapping
  redelivers a batch (``bisect_batch_on_error`` retries records up to an hour old), so the stream
  pass must not act on a picture the record has moved past.
* A child's run time is read with one clock: the host measures it on its own monotonic clock
  (``ran_ms``), never the host's wall clock against the reconciler's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.helpers.moto_fleet import TABLE, stream
from tests.helpers.pooled_fleet import PooledFleet, create, resync
from tests.reconciler.test_host_planning import KIND, NOW, SETTINGS, host
from vigil.clock import epoch_ms
from vigil.contract.hosts import HOST_EXIT, OBSERVER_HOST
from vigil.contract.observers import Desired, Status
from vigil.observers import decisions as d
from vigil.observers.fleet_store import record_from_item
from vigil.observers.host_fleet.decide import decide_pooled
from vigil.observers.model import Observer, to_item
from vigil.observers.reconciler import changed_records
from vigil.observers.registry import ObserverRegistry

# -- item 4: a redelivered stream record --------------------------------------------------------


def running_on_its_host(pool: PooledFleet, name: str) -> tuple[str, int]:
    item = pool.item(name)
    assert item["status"] == Status.RUNNING.value, item
    host_id = str(item[OBSERVER_HOST])
    generation = int(item["generation"])
    assert pool.host(host_id).assigned.get(name) == generation
    return host_id, generation


def test_a_redelivered_stale_stopped_record_leaves_the_current_generation_on_its_host(
    pool: PooledFleet,
) -> None:
    # Given "a" on a host; its child fails with bad configuration (FAILED), an operator stops it
    # (STOPPED at once: no child left) and later restarts it: generation 2 runs on a host
    registry = ObserverRegistry(pool.dynamodb, TABLE, clock=pool.clock)
    create(pool, "a", "b")
    pool.heartbeat_all()
    resync(pool, "p0")
    change = pool.host_exit("a", 2, "bad configuration")
    pool.reconciler().on_records(changed_records([stream(change["new"], change["old"])]))
    assert pool.item("a")["status"] == Status.FAILED.value
    before = pool.item("a")
    registry.request_stop("a")
    stopped = stream(pool.item("a"), before)  # the picture: desired STOPPED, status STOPPED
    pool.reconciler().on_records(changed_records([stopped]))
    before = pool.item("a")
    registry.request_restart("a")
    pool.reconciler().on_records(changed_records([stream(pool.item("a"), before)]))
    pool.clock.advance(timedelta(seconds=15))
    pool.heartbeat_all()
    host_id, generation = running_on_its_host(pool, "a")
    assert generation == 2
    version = pool.item("a")["version"]

    # When the stream delivers the old STOPPED picture again (a batch retried)
    assert changed_records([stopped]), "the picture calls for the stream pass"
    pool.reconciler().on_records(changed_records([stopped]))
    pool.clock.advance(timedelta(seconds=15))
    pool.heartbeat_all()

    # Then generation 2 is still on its host, untouched, and the picture was counted as stale
    assert running_on_its_host(pool, "a") == (host_id, 2)
    assert pool.item("a")["version"] == version
    assert pool.item("a")["desired"] == Desired.RUNNING.value
    assert ("ObserverStaleEventIgnored", KIND, 1) in pool.metrics

    # And taking an older generation off its host never takes a later one off (whoever asks)
    placer = pool.reconciler().changes.settler.executor.placer
    assert placer is not None
    placer.take_off(changed_records([stopped])[0])
    assert pool.host(host_id).assigned["a"] == 2


# -- item 5: one clock for the failure count ----------------------------------------------------

SKEW = timedelta(minutes=6)
HEALTHY_RUN = timedelta(minutes=8)
QUICK_RUN = timedelta(seconds=30)


def exit_reported(
    observer: Observer, placed_at: datetime, host_clock: datetime, ran: timedelta | None
) -> d.Record:
    """The record as the stream pass reads it once the host reported the crash: placed (the
    reconciler's clock), its ``HOST_EXIT`` stamped by the host's clock, with the run time the
    host measured (``ran``; None: a host from before ``ran_ms``)."""
    item: dict[str, Any] = {
        **to_item(observer),
        OBSERVER_HOST: "h1",
        "started_at_ms": epoch_ms(placed_at),
    }
    report: dict[str, Any] = {
        "generation": observer.generation,
        "exit_code": 1,
        "reason": "the observer's code raised",
        "at_ms": epoch_ms(host_clock),
    }
    if ran is not None:
        report["ran_ms"] = int(ran.total_seconds() * 1000)
    item[HOST_EXIT] = report
    return record_from_item(item)


def crash_five_times(run: timedelta, skew: timedelta, *, measured: bool) -> list[d.Plan]:
    """Five crashes in a row, each generation running ``run`` (then reported at once) on a host
    whose clock is ``skew`` off the reconciler's; the plans, up to FAILED."""
    now = NOW
    observer = Observer(
        name="a",
        kind=KIND,
        config={},
        desired=Desired.RUNNING,
        status=Status.RUNNING,
        created_at=NOW,
        updated_at=NOW,
        generation=1,
    )
    plans: list[d.Plan] = []
    for _ in range(5):
        placed_at = now
        now += run + timedelta(seconds=5)  # the report reaches the stream pass 5 s later
        record = exit_reported(
            observer, placed_at, now - timedelta(seconds=5) + skew, run if measured else None
        )
        plan = decide_pooled(record, host("h1", "a"), now, SETTINGS)
        plans.append(plan)
        write = plan.write
        if isinstance(write, d.MarkFailed):
            break
        assert isinstance(write, d.StartTask | d.Backoff), plan
        if isinstance(write, d.Backoff):
            now = max(now, write.until)
        observer = Observer(
            **{
                **observer.__dict__,
                "generation": observer.generation + 1,
                "consecutive_failures": write.consecutive_failures,
            }
        )
    return plans


@pytest.mark.parametrize("skew", [-SKEW, SKEW], ids=["host-6min-behind", "host-6min-ahead"])
@pytest.mark.parametrize("measured", [True, False], ids=["ran_ms", "no-ran_ms"])
def test_five_spaced_crashes_of_a_healthy_observer_never_make_it_failed(
    skew: timedelta, measured: bool
) -> None:
    plans = crash_five_times(HEALTHY_RUN, skew, measured=measured)

    assert len(plans) == 5 and not any(isinstance(p.write, d.MarkFailed) for p in plans)
    assert all(p.write.consecutive_failures == 1 for p in plans)  # type: ignore[union-attr]


@pytest.mark.parametrize("skew", [-SKEW, SKEW], ids=["host-6min-behind", "host-6min-ahead"])
@pytest.mark.parametrize("measured", [True, False], ids=["ran_ms", "no-ran_ms"])
def test_a_crash_loop_is_failed_at_the_threshold(skew: timedelta, measured: bool) -> None:
    plans = crash_five_times(QUICK_RUN, skew, measured=measured)

    assert [type(p.write).__name__ for p in plans] == [
        "StartTask",
        "Backoff",
        "Backoff",
        "Backoff",
        "MarkFailed",
    ]
