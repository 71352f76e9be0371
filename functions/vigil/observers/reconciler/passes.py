"""The event and stream passes: the fast paths, one observer at a time.

* the event pass handles one ECS Task State Change event (the fast path of a restart);
* the stream pass handles registry changes (a create or a stop acts within seconds); the stream
  carries heartbeats too, and :func:`changed_records` keeps only the changes that call for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vigil.clock import Clock, system_clock
from vigil.contract.hosts import HOST_EXIT
from vigil.dynamo import from_wire
from vigil.observers import decisions as d
from vigil.observers.fleet_store import Conflict, FleetStore, record_from_item
from vigil.observers.model import is_observer_item
from vigil.observers.reconciler.executor import Executor, Settler
from vigil.observers.reconciler.hosts import HostManager
from vigil.observers.reconciler.report import PassReport
from vigil.observers.reconciler.starter import MAX_DECISION_ROUNDS


@dataclass(frozen=True, kw_only=True)
class EventPass:
    store: FleetStore
    executor: Executor
    settings: d.Settings
    clock: Clock = system_clock
    hosts: HostManager | None = None

    def run(self, task: d.TaskState) -> PassReport:
        if task.host is not None and self.hosts is not None:
            report = PassReport()
            self.hosts.on_task_event(task, report)
            return report
        report = PassReport(observers=1)
        if task.observer is None:
            report.note("?", d.Ignore(f"task {task.arn} carries no observer marks"))
            return report
        record = self.store.get(task.observer)
        for _ in range(MAX_DECISION_ROUNDS):
            plan = d.decide_event(record, task, self.clock(), self.settings)
            try:
                self.executor.carry_out(task.observer, record, plan, seen=task, report=report)
                return report
            except Conflict as conflict:
                report.conflicts += 1
                record = conflict.current
        raise RuntimeError(f"{task.observer}: record kept changing; the event will be redelivered")


@dataclass(frozen=True, kw_only=True)
class StreamPass:
    settler: Settler

    def run(self, records: Iterable[d.Record]) -> PassReport:
        """Act on each changed record as it now stands."""
        report = PassReport()
        if self.settler.executor.placer is not None:
            self.settler.executor.placer.begin()  # this invocation's view of the hosts
        for record in records:
            report.observers += 1
            self.settler.settle(record, None, report)
        return report


def changed_records(stream_records: Iterable[Mapping[str, Any]]) -> list[d.Record]:
    """Stream records that call for the reconciler (creates, stops, restarts), not heartbeats.

    The event source mapping filters the same way; this check keeps the handler correct without it.
    """
    wanted: list[d.Record] = []
    for stream_record in stream_records:
        change = stream_record.get("dynamodb") or {}
        new = from_wire(change.get("NewImage"))
        if not new or not is_observer_item(new):
            continue
        old = from_wire(change.get("OldImage"))
        if needs_attention(new, old):
            wanted.append(record_from_item(new))
    return wanted


def needs_attention(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    if old is None:
        return True
    if new.get(HOST_EXIT) is not None and new.get(HOST_EXIT) != old.get(HOST_EXIT):
        return True  # a pooled observer's child exited: its host's report
    status, desired = new.get("status"), new.get("desired")
    if desired != old.get("desired"):
        return True
    if new.get("restart_generation") != old.get("restart_generation"):
        return True
    if status == "PENDING" and old.get("status") != "PENDING":
        return True
    return (
        desired == "STOPPED"
        and status in ("STARTING", "RUNNING", "STOPPING")
        and (status != old.get("status"))
    )
