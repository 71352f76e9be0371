"""The rollout and rebalance planners: pure, so their promises are checked as properties.

Promises: never more than the budget in flight; progress whenever the budget allows; the same
state gives the same plan, and a pass over a state where the budget is used plans no move.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.contract.hosts import HostStatus
from vigil.contract.observers import Desired, Status
from vigil.observers.rollout import (
    HostView,
    Member,
    budget,
    plan_dedicated,
    plan_pooled,
    plan_rebalance,
)

OLD, NEW = "td:1", "td:2"


def test_budget_is_the_percentage_rounded_up_and_at_least_one() -> None:
    assert budget(10, 1000) == 100
    assert budget(10, 15) == 2
    assert budget(1, 3) == 1
    assert budget(100, 7) == 7
    assert budget(10, 0) == 1


# Dedicated ---------------------------------------------------------------------------------------

members = st.builds(
    Member,
    name=st.text(alphabet="abc", min_size=1, max_size=4),
    status=st.sampled_from(list(Status)),
    desired=st.sampled_from(list(Desired)),
    task_definition=st.sampled_from([None, OLD, NEW]),
)


def _unique(population: list[Member]) -> list[Member]:
    return list({m.name: m for m in population}.values())


def _in_flight(population: list[Member]) -> int:
    return sum(
        1
        for m in population
        if m.desired is Desired.RUNNING
        and m.status in (Status.PENDING, Status.STARTING, Status.STOPPING)
    )


def _wanted(population: list[Member]) -> int:
    return sum(
        1
        for m in population
        if m.desired is Desired.RUNNING and m.status not in (Status.FAILED, Status.STOPPED)
    )


@given(st.lists(members, max_size=40), st.integers(min_value=1, max_value=100))
def test_dedicated_stays_within_the_budget_and_progresses(
    population: list[Member], percent: int
) -> None:
    population = _unique(population)
    chosen = plan_dedicated(NEW, percent, population)
    limit = budget(percent, _wanted(population))
    by_name = {m.name: m for m in population}
    # never more than the budget in flight once the chosen ones are stopping
    assert _in_flight(population) + len(chosen) <= max(limit, _in_flight(population))
    # only outdated RUNNING observers wanted running are chosen
    for name in chosen:
        member = by_name[name]
        assert member.status is Status.RUNNING and member.desired is Desired.RUNNING
        assert member.task_definition == OLD
    # progress: while some are outdated and the budget has room, at least one moves
    outdated = [
        m
        for m in population
        if m.status is Status.RUNNING and m.desired is Desired.RUNNING and m.task_definition == OLD
    ]
    if outdated and _in_flight(population) < limit:
        assert chosen
    # the same state, the same plan; after it (the chosen are STOPPING), no more than the room
    assert plan_dedicated(NEW, percent, population) == chosen
    after = [replace(m, status=Status.STOPPING) if m.name in chosen else m for m in population]
    again = plan_dedicated(NEW, percent, after)
    assert not set(again) & set(chosen)
    assert _in_flight(after) + len(again) <= max(limit, _in_flight(population))


@given(st.integers(min_value=1, max_value=60), st.integers(min_value=1, max_value=100))
def test_dedicated_rollout_ends_with_every_observer_on_the_new_revision(
    count: int, percent: int
) -> None:
    population = [Member(f"o{i}", Status.RUNNING, Desired.RUNNING, OLD) for i in range(count)]
    limit = budget(percent, count)
    for _ in range(count + 2):
        chosen = set(plan_dedicated(NEW, percent, population))
        population = [
            replace(m, status=Status.STOPPING) if m.name in chosen else m for m in population
        ]
        assert _in_flight(population) <= limit
        # the stopped ones come back on the new revision
        population = [
            replace(m, status=Status.RUNNING, task_definition=NEW)
            if m.status is Status.STOPPING
            else m
            for m in population
        ]
        if all(m.task_definition == NEW for m in population):
            break
    assert all(m.task_definition == NEW for m in population)


# Pooled ------------------------------------------------------------------------------------------


@st.composite
def pooled_fleets(draw: st.DrawFn) -> tuple[list[HostView], int]:
    slots = draw(st.integers(min_value=1, max_value=8))
    loads = draw(st.lists(st.integers(min_value=0, max_value=slots), min_size=1, max_size=12))
    hosts = [
        HostView(f"h{i:02d}", "pool", OLD, HostStatus.RUNNING, load, slots)
        for i, load in enumerate(loads)
    ]
    return hosts, slots


def _simulate_pass(
    hosts: list[HostView], step_hosts: int, moves: list[tuple[str, int]], stop: tuple[str, ...]
) -> list[HostView]:
    """The manager carrying a step out: the moved observers land on current-revision RUNNING
    hosts (least loaded first) as starting; stopped hosts go; new hosts start empty."""
    by_id = {h.host_id: h for h in hosts if h.host_id not in stop}
    for host_id, count in moves:
        by_id[host_id] = replace(by_id[host_id], assigned=by_id[host_id].assigned - count)
        for _ in range(count):
            target = min(
                (
                    h
                    for h in by_id.values()
                    if h.task_definition == NEW and h.status is HostStatus.RUNNING and h.free
                ),
                key=lambda h: (h.assigned, h.host_id),
            )
            by_id[target.host_id] = replace(
                target, assigned=target.assigned + 1, starting=target.starting + 1
            )
    serial = 1 + max((int(h[1:]) for h in by_id if h.startswith("n")), default=0)
    for index in range(step_hosts):
        host_id = f"n{serial + index:03d}"
        slots = next(iter(by_id.values())).slots if by_id else 1
        by_id[host_id] = HostView(host_id, "pool", NEW, HostStatus.STARTING, 0, slots)
    return sorted(by_id.values(), key=lambda h: h.host_id)


def _settle(hosts: list[HostView]) -> list[HostView]:
    """Between passes: started hosts come up, moved observers report running."""
    return [
        replace(
            h,
            status=HostStatus.RUNNING if h.status is HostStatus.STARTING else h.status,
            starting=0,
        )
        for h in hosts
    ]


@settings(max_examples=150, deadline=None)
@given(pooled_fleets(), st.integers(min_value=1, max_value=100), st.booleans())
def test_pooled_rollout_stays_within_budget_and_finishes(
    fleet: tuple[list[HostView], int], percent: int, slow: bool
) -> None:
    hosts, slots = fleet
    total = sum(h.assigned for h in hosts)
    limit = budget(percent, total)
    for round_ in range(4 * (total + len(hosts)) + 10):
        step = plan_pooled(NEW, percent, slots, hosts)
        assert plan_pooled(NEW, percent, slots, hosts) == step  # same state, same plan
        in_flight = sum(h.starting for h in hosts)
        assert in_flight + step.moves <= max(limit, in_flight)
        old_left = [h for h in hosts if h.task_definition == OLD]
        if old_left and in_flight < limit:
            # progress: something happens, or a current-revision host is on its way
            coming = any(h.status is HostStatus.STARTING for h in hosts)
            assert not step.empty or coming
        hosts = _simulate_pass(hosts, step.start_hosts, list(step.move), step.stop)
        for host_id in step.drain:
            hosts = [
                replace(h, status=HostStatus.DRAINING) if h.host_id == host_id else h for h in hosts
            ]
        assert sum(h.assigned for h in hosts) == total  # nobody lost
        if slow and round_ % 2 == 0:
            # the budget is in use: the next pass moves nothing more than the room left
            step_again = plan_pooled(NEW, percent, slots, hosts)
            assert sum(h.starting for h in hosts) + step_again.moves <= max(
                limit, sum(h.starting for h in hosts)
            )
        else:
            hosts = _settle(hosts)
        if not any(h.task_definition == OLD for h in hosts):
            break
    assert not any(h.task_definition == OLD for h in hosts)
    assert plan_pooled(NEW, percent, slots, hosts).empty


def test_pooled_rollout_with_nothing_old_is_empty() -> None:
    hosts = [HostView("h1", "pool", NEW, HostStatus.RUNNING, 3, 5)]
    assert plan_pooled(NEW, 10, 5, hosts).empty


def test_pooled_rollout_first_starts_hosts_then_drains_the_emptiest() -> None:
    hosts = [
        HostView("a", "pool", OLD, HostStatus.RUNNING, 5, 5),
        HostView("b", "pool", OLD, HostStatus.RUNNING, 2, 5),
    ]
    first = plan_pooled(NEW, 50, 5, hosts)
    assert (first.start_hosts, first.move, first.drain) == (1, (), ())
    up = [*hosts, HostView("n", "pool", NEW, HostStatus.RUNNING, 0, 5)]
    second = plan_pooled(NEW, 50, 5, up)
    assert second.move == (("b", 2), ("a", 2)) and second.drain == ("b", "a")


# Rebalance ---------------------------------------------------------------------------------------


@given(
    st.lists(st.integers(min_value=0, max_value=10), min_size=1, max_size=15),
    st.integers(min_value=0, max_value=60),
)
def test_rebalance_evens_the_load_within_max_moves(loads: list[int], max_moves: int) -> None:
    hosts = [
        HostView(f"h{i:02d}", "pool", NEW, HostStatus.RUNNING, load, 10)
        for i, load in enumerate(loads)
    ]
    moves = plan_rebalance(hosts, max_moves)
    assert len(moves) <= max_moves
    after = {h.host_id: h.assigned for h in hosts}
    for source, target in moves:
        assert source != target
        after[source] -= 1
        after[target] += 1
    assert sum(after.values()) == sum(loads)
    assert all(0 <= n <= 10 for n in after.values())
    if len(moves) < max_moves:
        assert max(after.values()) - min(after.values()) <= 1
    assert plan_rebalance(hosts, max_moves) == moves


def test_rebalance_leaves_other_than_running_hosts_alone() -> None:
    hosts = [
        HostView("a", "pool", NEW, HostStatus.RUNNING, 6, 10),
        HostView("b", "pool", NEW, HostStatus.RUNNING, 0, 10),
        HostView("c", "pool", NEW, HostStatus.DRAINING, 0, 10),
    ]
    assert plan_rebalance(hosts, 10) == (("a", "b"), ("a", "b"), ("a", "b"))


def _naive_rebalance(hosts: list[HostView], max_moves: int) -> tuple[tuple[str, str], ...]:
    """The rule written plainly (O(moves * hosts)): the planner's heaps must give the same moves."""
    load = {h.host_id: h.assigned for h in hosts if h.status is HostStatus.RUNNING}
    slots = {h.host_id: h.slots for h in hosts if h.status is HostStatus.RUNNING}
    moves: list[tuple[str, str]] = []
    while len(moves) < max_moves and len(load) > 1:
        fullest = min(load, key=lambda h: (-load[h], h))
        open_hosts = [h for h in load if load[h] < slots[h]]
        if not open_hosts:
            break
        emptiest = min(open_hosts, key=lambda h: (load[h], h))
        if load[fullest] - load[emptiest] <= 1:
            break
        load[fullest] -= 1
        load[emptiest] += 1
        moves.append((fullest, emptiest))
    return tuple(moves)


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=6), st.integers(min_value=1, max_value=6)),
        min_size=1,
        max_size=12,
    ),
    st.integers(min_value=0, max_value=40),
    st.lists(st.sampled_from(list(HostStatus)), min_size=12, max_size=12),
)
def test_rebalance_matches_the_plain_rule(
    shapes: list[tuple[int, int]], max_moves: int, statuses: list[HostStatus]
) -> None:
    hosts = [
        HostView(f"h{i:02d}", "pool", NEW, statuses[i], min(load, slots), slots)
        for i, (load, slots) in enumerate(shapes)
    ]
    assert plan_rebalance(hosts, max_moves) == _naive_rebalance(hosts, max_moves)
