"""Which dedicated observers the resync hands over to their kind's current task definition.

Decided on the records the resync already read from the fleet index (which projects each record's
``task_definition``), so a pass with nothing to roll makes no extra call. See
:mod:`vigil.observers.rollout` for the budget and :func:`vigil.observers.decisions.hand_over` for
one move.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from vigil.contract.hosts import DEFAULT_MAX_UNAVAILABLE
from vigil.observers import decisions as d
from vigil.observers.rollout import LEGACY_REVISION, Member, plan_dedicated


@dataclass(frozen=True)
class Rollouts:
    revisions: Mapping[str, str] = field(default_factory=dict)
    """Kind -> its current task definition ARN (the reconciler's ``VIGIL_TASK_DEFINITIONS``)."""
    max_unavailable: Mapping[str, int] = field(default_factory=dict)
    """Kind -> percent; a kind not named gets the default."""

    def due(self, records: Iterable[d.Record]) -> dict[str, str]:
        """Observer name -> the task definition to hand it over to, within each kind's budget."""
        by_kind: dict[str, list[Member]] = defaultdict(list)
        outdated: set[str] = set()
        for record in records:
            observer, started_on = record.observer, record.observer.task_definition
            if record.tracking.legacy:
                started_on = LEGACY_REVISION  # it writes the old registry: hand it over
            current = self.revisions.get(observer.kind)
            if current is None:
                continue
            by_kind[observer.kind].append(
                Member(observer.name, observer.status, observer.desired, started_on)
            )
            if started_on is not None and started_on != current:
                outdated.add(observer.kind)
        due: dict[str, str] = {}
        for kind in sorted(outdated):
            percent = self.max_unavailable.get(kind, DEFAULT_MAX_UNAVAILABLE)
            for name in plan_dedicated(self.revisions[kind], percent, by_kind[kind]):
                due[name] = self.revisions[kind]
        return due

    def replace(self, record: d.Record, plan: d.Plan, due: Mapping[str, str]) -> d.Plan:
        """The hand-over instead of ``plan`` when the observer is due and otherwise healthy."""
        revision = due.get(record.name)
        healthy = plan.write is None and all(isinstance(e, d.Ignore) for e in plan.effects)
        if revision is None or not healthy:
            return plan
        return d.hand_over(record, revision)
