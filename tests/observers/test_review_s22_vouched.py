"""Review of the pooled observer's vouched heartbeat (issue 31): what held. A host that stopped
beating vouches for nothing later than its last beat, and the host an observer left vouches
for nothing at all, even if it still names the same generation. (Pure functions, instant.)"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from vigil.contract.hosts import HostStatus
from vigil.observers.host_fleet.model import Host
from vigil.observers.model import Desired, Observer, Status
from vigil.observers.vouched import as_seen

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
CLAIMED = NOW - timedelta(minutes=20)


def observer(host: str) -> Observer:
    return Observer(
        name="a",
        kind="pooled-ticker",
        config={},
        desired=Desired.RUNNING,
        status=Status.RUNNING,
        created_at=CLAIMED,
        updated_at=CLAIMED,
        generation=3,
        heartbeat_at=CLAIMED,
        host=host,
    )


def host(host_id: str, beat: datetime, status: HostStatus = HostStatus.RUNNING) -> Host:
    return Host(
        host_id=host_id,
        kind="pooled-ticker",
        status=status,
        slots=4,
        created_at=CLAIMED,
        running={"a": {"generation": 3}},
        heartbeat_at=beat,
    )


def test_a_dead_hosts_last_beat_is_all_it_vouched() -> None:
    last = NOW - timedelta(minutes=5)
    hosts = {"h1": host("h1", last, HostStatus.LOST)}
    (seen,) = as_seen([observer("h1")], hosts.get)
    assert seen.heartbeat_at == last  # not now, whatever the clock: the beat is the host's


def test_the_host_an_observer_left_vouches_for_nothing() -> None:
    hosts = {"h1": host("h1", NOW), "h2": host("h2", NOW - timedelta(seconds=40))}
    hosts["h2"] = replace(hosts["h2"], running={})  # not started there yet
    (seen,) = as_seen([observer("h2")], hosts.get)
    assert seen.heartbeat_at == CLAIMED  # h1 still names generation 3; h2 does not
