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
from vigil.telemetry import ObserverMetric


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
    store: FleetStore
    settler: Settler

    def run(self, records: Iterable[d.Record]) -> PassReport:
        """Act on each changed record as it now stands (one consistent read each).

        A stream record is a picture of the record when it was written, and the event source
        mapping may deliver it again long after (``bisect_batch_on_error`` retries a batch with
        records up to an hour old). A picture the record has moved past (another version) is
        ignored and counted (``ObserverStaleEventIgnored``): acting on it would undo what came
        after, such as taking a later generation off its host. Each later change has a stream
        record of its own, and the minute resync looks at every record anyway.
        """
        report = PassReport()
        if self.settler.executor.placer is not None:
            self.settler.executor.placer.begin()  # this invocation's view of the hosts
        for picture in records:
            report.observers += 1
            current = self.store.get(picture.name)
            stale = _moved_past(picture, current)
            if stale is not None or current is None:
                report.note(picture.name, stale or d.Ignore("the record is gone"))
                if stale is not None:
                    self.settler.executor.metric(
                        ObserverMetric.STALE_EVENT_IGNORED, picture.observer.kind, 1
                    )
                continue
            self.settler.settle(current, None, report)
        return report


def _moved_past(picture: d.Record, current: d.Record | None) -> d.Ignore | None:
    """Why the stream's picture is not the record any more (None: it still is, or it is gone)."""
    if current is None or current.observer.version == picture.observer.version:
        return None
    was, now = picture.observer, current.observer
    return d.Ignore(
        f"stale change: version {was.version} (generation {was.generation}, {was.status.value}); "
        f"the record is at version {now.version} (generation {now.generation})",
        stale=True,
    )


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
