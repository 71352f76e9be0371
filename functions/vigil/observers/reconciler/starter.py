"""RunTask for one generation, retried briefly within the pass; the record says when to retry
after that. A start never raises: the observer stays STARTING and a later pass tries again with
the same generation (so the same clientToken, and never a second task)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from vigil.clock import Clock, Sleeper, iso, system_clock
from vigil.contract.hosts import Capacity
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import EcsTasks, RunTaskFailed
from vigil.observers.fleet_store import Conflict, FleetStore
from vigil.observers.reconciler.report import MetricSink, no_metrics
from vigil.telemetry import ObserverMetric

MAX_DECISION_ROUNDS = 4
"""How often one observer is decided again after lost races before the pass moves on."""


@dataclass(frozen=True, kw_only=True)
class TaskStarter:
    store: FleetStore
    ecs: EcsTasks
    settings: d.Settings
    clock: Clock = system_clock
    sleeper: Sleeper = time.sleep
    metric: MetricSink = no_metrics
    attempts: int = 3
    pause: float = 0.5

    def start(
        self, record: d.Record, generation: int, written_version: int, *, on_demand: bool = False
    ) -> None:
        """``written_version``: the record's version as the decision's write left it;
        ``on_demand``: an earlier pass's fallback may have started this generation's task (its
        record says so), so a Spot kind asks on-demand only (see ``EcsTasks._launch``)."""
        observer = record.observer
        error: RunTaskFailed | None = None
        for attempt in range(self.attempts):
            try:
                launched = self.ecs.launch(
                    name=observer.name,
                    kind=observer.kind,
                    generation=generation,
                    incarnation=iso(observer.created_at),
                    on_demand=on_demand,
                )
            except RunTaskFailed as failed:
                error = failed
                on_demand = on_demand or failed.on_demand
                if not failed.transient or attempt + 1 == self.attempts:
                    break
                self.sleeper(self.pause * (2**attempt))
                continue
            recorded = self.store.record_task(
                observer.name,
                generation,
                launched.arn,
                self.clock(),
                written_version,
                task_definition=launched.task_definition,
                capacity=launched.capacity,
            )
            if not recorded:
                # The record moved on while the task started (stopped, or a newer generation).
                self.ecs.stop(launched.arn, "orphan: its generation was superseded while starting")
            return
        assert error is not None
        self.metric(ObserverMetric.RUN_TASK_FAILED, observer.kind, 1)
        self._note_failure(observer.name, generation, error, on_demand)

    def _note_failure(
        self, name: str, generation: int, error: RunTaskFailed, on_demand: bool
    ) -> None:
        for _ in range(MAX_DECISION_ROUNDS):
            current = self.store.get(name)
            if current is None or current.observer.generation != generation:
                return
            if current.observer.task_arn is not None:
                return
            attempts = current.tracking.start_attempts + 1
            now = self.clock()
            retry_at = now + d.run_task_retry_delay(attempts, self.settings)
            try:
                self.store.record_start_failure(
                    current,
                    error.reason,
                    retry_at,
                    now,
                    capacity=Capacity.ON_DEMAND if on_demand else None,
                )
                return
            except Conflict:
                continue
