"""Pure rules the pooled review (rv7b) found broken: placement around a host that cannot start,
and the FleetHandingOver count."""

from __future__ import annotations

from datetime import timedelta

from tests.reconciler.test_host_planning import KIND, NOW, host
from vigil.contract.hosts import HostStatus
from vigil.observers import decisions as d
from vigil.observers.fleet_gauges import pooled_counts
from vigil.observers.host_fleet.model import Host
from vigil.observers.host_fleet.planning import choose_host, plan_hosts
from vigil.observers.kind_options import KindOptions, Placement


def refused(host_id: str, **fields: object) -> Host:
    """A host STARTING for an hour, every RunTask refused (quota, no capacity), backing off."""
    values: dict[str, object] = {
        "task_arn": None,
        "heartbeat_at": None,
        "status_reason": "RunTask failures: RESOURCE:FARGATE",
        "start_attempts": 8,
        "retry_at": NOW + timedelta(minutes=5),
    }
    values.update(fields)
    return host(host_id, status=HostStatus.STARTING, **values)


def test_a_host_whose_runtask_keeps_failing_does_not_take_observers_from_running_hosts() -> None:
    # h1 runs and has 2 free slots; h2 has been STARTING for an hour, every RunTask refused
    # (quota, no capacity), backing off. A new or displaced observer goes to h1, and one
    # already on h2 moves to h1 rather than stay where it never runs.
    h1 = host("h1", assigned={"a": 1})
    h2 = refused("h2", assigned={"x": 1})
    assert NOW - h2.created_at > d.Settings().start_timeout
    empty_h2 = Host(**{**h2.__dict__, "assigned": {}})
    chosen_new = choose_host([h1, empty_h2], KIND, None, "y")
    chosen_stuck = choose_host([h1, h2], KIND, "h2", "x")
    assert (chosen_new.host_id, chosen_stuck.host_id) == ("h1", "h1")  # type: ignore[union-attr]


def test_a_host_that_cannot_start_still_takes_observers_when_no_started_host_has_room() -> None:
    full = host("h1", assigned={"a": 1, "b": 1, "c": 1})
    chosen = choose_host([full, refused("h2")], KIND, None, "y")
    assert chosen is not None and chosen.host_id == "h2"  # it waits there, with the reason


def plan(
    *hosts: Host, waiting: int = 0, headroom: int = 2
) -> tuple[dict[str, int], tuple[str, ...]]:
    options = {KIND: KindOptions(Placement.POOLED, 3, headroom)}
    planned = plan_hosts(hosts, None, {KIND: waiting}, options, NOW, d.Settings())
    return dict(planned.start), planned.drain


def test_a_host_that_cannot_start_is_not_headroom_and_never_blocks_scale_in() -> None:
    # Two running hosts hold the headroom without it: the empty host that cannot start is
    # given up (it is the cheapest to drop: no task to stop), and not retried this pass.
    busy, spare = host("h1", assigned={"a": 1}), host("h3")
    options = {KIND: KindOptions(Placement.POOLED, 3, 2)}
    planned = plan_hosts(
        [busy, spare, refused("h2", retry_at=NOW)], None, {}, options, NOW, d.Settings()
    )
    assert (planned.drain, planned.retry_run) == (("h2",), ())
    # Without the started spare, it is needed: kept and retried, and no second host is started
    # (another RunTask would meet the same refusal)
    assert plan(busy, refused("h2"), headroom=3) == ({}, ())
    # One holding an observer is kept until that observer has moved
    assert plan(busy, spare, refused("h2", assigned={"x": 1})) == ({}, ())


def test_a_rollout_hand_over_counts_whatever_order_the_scan_returns_hosts() -> None:
    # A rebalance long ago took x off host A (A keeps handover {x: 5}); x then ran generation 6
    # on B. Now a rollout drains B: B hands x over at 6, x's generation 7 is assigned to C and
    # not running yet. That is a planned hand-over, whatever the scan order.
    a = host("a", handover={"x": 5})
    b = host("b", status=HostStatus.DRAINING, handover={"x": 6}, running={})
    c = host("c", assigned={"x": 7}, running={})
    for order in ([a, b, c], [b, c, a]):
        counts = pooled_counts(order, {KIND: []}, {KIND: 10})
        assert (counts.desired, counts.running) == (1, 0)
        assert counts.handing_over == 1, [h.host_id for h in order]


def test_a_stale_hand_over_entry_is_not_a_hand_over() -> None:
    # A handed x over at 5 long ago; x's generation 6 ran and crashed, its generation 7 waits
    # for its host to run it: a restart, not a hand-over (whatever the order)
    a = host("a", handover={"x": 5})
    c = host("c", assigned={"x": 7}, running={})
    for order in ([a, c], [c, a]):
        assert pooled_counts(order, {KIND: []}, {KIND: 10}).handing_over == 0


def test_a_hand_over_onto_a_host_that_never_starts_is_not_hidden_from_fleet_shortfall() -> None:
    # A rollout drained `old` (handover {x: 5}); x's generation 6 went to `new`, whose RunTask
    # has been refused for an hour. x has not run for an hour: that is a shortfall, not a
    # planned hand-over (else up to the kind's whole max_unavailable budget could sit here).
    old = host("old", status=HostStatus.DRAINING, handover={"x": 5}, running={})
    new = refused("new", start_attempts=12, assigned={"x": 6})
    counts = pooled_counts([old, new], {KIND: ["x"]}, {KIND: 10})
    shortfall = counts.desired - counts.running - counts.handing_over
    assert shortfall == 1, counts
