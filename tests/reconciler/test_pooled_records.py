"""What the manager reads about a pooled observer (issue 33, item 4).

* A stream record is a picture of the record when it was written: the event source mapping
  redelivers a batch (``bisect_batch_on_error`` retries records up to an hour old), so the stream
  pass must not act on a picture the record has moved past.
"""

from __future__ import annotations

from datetime import timedelta

from tests.helpers.moto_fleet import TABLE, stream
from tests.helpers.pooled_fleet import PooledFleet, create, resync
from tests.reconciler.test_host_planning import KIND
from vigil.contract.hosts import OBSERVER_HOST
from vigil.contract.observers import Desired, Status
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
