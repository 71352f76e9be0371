"""What a host does with the ``assigned`` map its heartbeat returned: a pure decision.

Rules, each for a reason:

- a child whose name is no longer assigned, or assigned at another generation, is told to stop
  (it was moved, handed over or stopped; the reconciler has already bumped or dropped it);
- a new generation of a name starts only once the old child has exited, so the new one resumes
  from the old one's last checkpoint rather than from an older one;
- a (name, generation) whose child already exited on this host is not started again: restarts
  (backoff, FAILED) are the reconciler's, which assigns a new generation;
- a stopping child still holds its slot (its memory), so at most ``slots`` children exist at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ChildView:
    generation: int
    stopping: bool


@dataclass(frozen=True)
class Plan:
    start: tuple[tuple[str, int], ...] = ()
    """(name, generation) to start, in name order."""
    stop: tuple[str, ...] = ()
    """Children to tell to stop."""
    forget: tuple[str, ...] = ()
    """Exited generations no longer assigned: nothing to remember about them."""
    no_slot: tuple[str, ...] = ()
    """Assigned names left waiting because every slot is taken (the reconciler overfilled)."""


def plan(
    assigned: Mapping[str, int],
    children: Mapping[str, ChildView],
    finished: Mapping[str, int],
    *,
    slots: int,
    accepting: bool = True,
) -> Plan:
    """``accepting`` False (shutting down, fenced): stop everything, start nothing."""
    stop = tuple(
        sorted(
            name
            for name, child in children.items()
            if not child.stopping and (not accepting or assigned.get(name) != child.generation)
        )
    )
    forget = tuple(sorted(name for name, gen in finished.items() if assigned.get(name) != gen))
    if not accepting:
        return Plan(stop=stop, forget=forget)
    wanted = [
        (name, generation)
        for name, generation in sorted(assigned.items())
        if name not in children and finished.get(name) != generation
    ]
    free = max(0, slots - len(children))
    return Plan(
        start=tuple(wanted[:free]),
        stop=stop,
        forget=forget,
        no_slot=tuple(name for name, _ in wanted[free:]),
    )
