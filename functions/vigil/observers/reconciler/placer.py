"""Placing pooled observers on hosts: the pooled reading of a plan's StartTask, RetryStart and
StopTask, and starting hosts.

Placing one observer, in order (each write conditional):

1. pick the host (:func:`~vigil.observers.host_fleet.planning.choose_host` on this pass's view of the
   hosts; when every host is full, a new host: its STARTING item, then RunTask);
2. the observer's write (next generation, ``host``, STARTING, ``next_start_at``, in the waiting
   index): the commit point, as for a dedicated task;
3. ``assigned[name] = generation`` on the host (the host runs it from its next heartbeat);
4. the observer leaves the waiting index (``record_placed``);
5. when it moved, its old host (if still live: a DRAINING one) forgets it, so that host can finish
   its drain (STOPPED, not LOST) and the manager does not count it there as leaving a second time.

A crash or a refused host write between 2 and 4 leaves the observer in the waiting index: the next
pass places it again with the same generation. A host whose RunTask failed keeps its observers
(STARTING, :func:`waiting_for_host` on the observer, cleared once placed) and RunTask is retried
with the same clientToken after a backoff (``run_task_retry_delay``, as for a dedicated task).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from vigil.clock import Clock, system_clock
from vigil.contract.hosts import LIVE_HOST_STATUSES, host_id
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import RUN_TASK_FAILURES, EcsTasks, RunTaskFailed
from vigil.observers.fleet_store import Conflict, FleetStore
from vigil.observers.host_fleet.model import Host
from vigil.observers.host_fleet.planning import choose_host
from vigil.observers.host_fleet.store import HostConflict, HostStore
from vigil.observers.kind_options import KindOptionsMap
from vigil.observers.reconciler.report import MetricSink, no_metrics
from vigil.observers.reconciler.starter import MAX_DECISION_ROUNDS
from vigil.observers.registry.layout import Layout, RegistryRef
from vigil.telemetry import ObserverMetric


def legacy_host(host: Host, registry: RegistryRef) -> bool:
    """A host started before the registry was keyed by kind (its children write the name-keyed
    registry), seen by a reconciler of the registry keyed by kind."""
    return registry.by_kind and host.registry != Layout.BY_KIND.value


def random_host_id(kind: str) -> str:
    """The whole kind (its task role may write only its own kind's hosts), then 12 random hex."""
    return host_id(kind, uuid.uuid4().hex[:12])


class HostBook:
    """This pass's view of the hosts: loaded once (a scan), kept current by every write's answer."""

    def __init__(self) -> None:
        self.hosts: dict[str, Host] | None = None

    def reset(self, hosts: Iterable[Host] | None) -> None:
        self.hosts = None if hosts is None else {h.host_id: h for h in hosts}

    def put(self, host: Host) -> Host:
        if self.hosts is not None:
            self.hosts[host.host_id] = host
        return host


@dataclass(frozen=True, kw_only=True)
class Placer:
    hosts: HostStore
    store: FleetStore
    ecs: EcsTasks
    placements: KindOptionsMap
    settings: d.Settings
    clock: Clock = system_clock
    metric: MetricSink = no_metrics
    new_host_id: Callable[[str], str] = random_host_id
    book: HostBook = field(default_factory=HostBook)

    def pooled(self, kind: str | None) -> bool:
        placement = self.placements.get(kind or "")
        return placement is not None and placement.pooled

    # The pass's view ------------------------------------------------------------------------------

    def begin(self, hosts: Iterable[Host] | None = None) -> None:
        """A new pass: forget the last one's view (``hosts``: a scan the pass already made)."""
        self.book.reset(hosts)

    def all_hosts(self) -> dict[str, Host]:
        if self.book.hosts is None:
            self.book.reset(self.hosts.live((), self.clock())[0])  # O(live hosts)
        assert self.book.hosts is not None
        return self.book.hosts

    def host(self, host_id: str | None) -> Host | None:
        if host_id is None:
            return None
        if self.book.hosts is not None:
            return self.book.hosts.get(host_id)
        return self.hosts.get(host_id)

    # Placement ------------------------------------------------------------------------------------

    def choose(self, kind: str, prefer: str | None, name: str | None = None) -> Host:
        ours = (h for h in self.all_hosts().values() if self.ours(h))
        found = choose_host(ours, kind, prefer, name)
        return found if found is not None else self.start_host(kind)

    def ours(self, host: Host) -> bool:
        """Whether the host's children write the registry this reconciler keeps. One started
        before the registry was keyed by kind writes the old one: it takes no new observer (its
        own are handed over by the rollout, :func:`legacy_host`)."""
        return not legacy_host(host, self.store.ref)

    def start_host(self, kind: str) -> Host:
        """A new host: its item first (STARTING), then RunTask; a failed RunTask is kept on the
        item and retried by the next pass."""
        placement = self.placements[kind]
        definition = self.ecs.task_definition(kind) or ""
        host = self.hosts.create(
            self.new_host_id(kind),
            kind,
            placement.slots_per_host,
            definition,
            self.clock(),
            registry=Layout.BY_KIND.value if self.store.ref.by_kind else None,
        )
        return self.run_host(self.book.put(host))

    def run_host(self, host: Host) -> Host:
        try:
            arn = self.ecs.run_host(
                host_id=host.host_id, kind=host.kind, slots=host.slots, on_demand=host.on_demand
            )
        except RunTaskFailed as failed:
            self.metric(ObserverMetric.RUN_TASK_FAILED, host.kind, 1)
            delay = d.run_task_retry_delay(host.start_attempts + 1, self.settings)
            retry_at = self.clock() + delay
            try:
                failure = self.hosts.record_start_failure(
                    host, failed.reason, retry_at, on_demand=failed.on_demand
                )
                return self.book.put(failure)
            except HostConflict as conflict:
                return self.book.put(conflict.current) if conflict.current else host
        return self._record_task(host, arn)

    def _record_task(self, host: Host, arn: str) -> Host:
        """Record the task RunTask started; when the host has ended meanwhile, or another
        pass recorded another task first (the one the host item owns), stop this one."""
        current: Host | None = host
        for _ in range(MAX_DECISION_ROUNDS):
            if current is None or not current.accepting:
                self.ecs.stop(arn, "orphan: its host item was lost while starting")
                return self.book.put(current) if current is not None else host
            if current.task_arn not in (None, arn):
                self.ecs.stop(arn, f"orphan: host {host.host_id} runs {current.task_arn}")
                return self.book.put(current)
            try:
                return self.book.put(self.hosts.record_task(current, arn, self.clock()))
            except HostConflict as conflict:
                current = conflict.current
        return current or host  # still changing: the next pass (or the task's event) records it

    def place(self, record: d.Record, generation: int, written_version: int, host_id: str) -> None:
        """Steps 3 and 4 for a committed placement; never raises for a full or changed host."""
        name = record.name
        host = self.host(host_id)
        for _ in range(MAX_DECISION_ROUNDS):
            if host is None or not host.accepting:
                break
            if host.assigned.get(name) != generation:
                if name not in host.assigned and host.free == 0:
                    break
                try:
                    host = self.book.put(self.hosts.assign(host, name, generation))
                except HostConflict as conflict:
                    host = conflict.current
                    continue
            if host.status_reason and not host.task_arn:
                # It waits there, in the waiting index, with its host's backoff: one write per
                # RunTask retry, its attempts kept (never reset, then noted again, every pass).
                reason = waiting_for_host(host.status_reason)
                self._note_failure(name, generation, reason, host.retry_at)
            else:
                self.store.record_placed(
                    name, generation, host_id, host.task_arn, self.clock(), written_version
                )
            left = self.host(record.pooled.host)
            if left is not None and left.host_id != host_id and left.status in LIVE_HOST_STATUSES:
                self._unassign(left, name)  # a LOST or STOPPED host keeps its last map
            return
        self._note_failure(name, generation, f"host {host_id} no longer takes it")

    def retry(self, record: d.Record, generation: int) -> None:
        """A RetryStart: place the current generation again, on its host if it still takes it."""
        host = self.choose(record.observer.kind, record.pooled.host, record.name)
        version = record.observer.version
        if host.host_id != record.pooled.host:
            try:
                self.store.record_host(record, host.host_id, host.task_definition, self.clock())
            except Conflict:
                return  # the record moved on; the next pass decides again
            version += 1
        self.place(record, generation, version, host.host_id)

    def take_off(self, record: d.Record, *, handover: bool = False) -> None:
        """The host stops the observer's child at its next heartbeat (the child checkpoints).
        Without ``handover`` it leaves the host for good: an earlier hand-over of it is
        forgotten too (nothing then counts it as in flight). Only the record's generation (or
        an older one) leaves: a later generation the host holds is not the record's to stop."""
        host = self.host(record.pooled.host)
        self._unassign(
            host,
            record.name,
            handover=handover,
            forget=not handover,
            upto=record.observer.generation,
        )

    def _unassign(
        self,
        host: Host | None,
        name: str,
        *,
        handover: bool = False,
        forget: bool = False,
        upto: int | None = None,
    ) -> None:
        """``forget``: also when only ``handover`` still names it (else that entry stays, so
        the gauges see the next generation as the hand-over's until it runs). ``upto``: leave
        it alone where the host holds a later generation than that."""
        for _ in range(MAX_DECISION_ROUNDS):
            if host is None or (
                name not in host.assigned and not (forget and name in host.handover)
            ):
                return
            held = max(host.assigned.get(name, 0), host.handover.get(name, 0))
            if upto is not None and held > upto:
                return
            try:
                self.book.put(self.hosts.unassign(host, name, handover=handover))
                return
            except HostConflict as conflict:
                host = conflict.current

    def _note_failure(
        self, name: str, generation: int, reason: str, host_retry_at: datetime | None = None
    ) -> None:
        """Keep it STARTING, in the waiting index, with the reason and a retry time: its own
        backoff, or its host's next RunTask (``host_retry_at``: the pass that retries the host
        then places it, so it is confirmed in the pass its host starts)."""
        for _ in range(MAX_DECISION_ROUNDS):
            current = self.store.get(name)
            if current is None or current.observer.generation != generation:
                return
            now = self.clock()
            retry_at = now + d.run_task_retry_delay(
                current.tracking.start_attempts + 1, self.settings
            )
            if host_retry_at is not None:
                retry_at = max(host_retry_at, now + self.settings.run_task_retry_base)
            try:
                self.store.record_start_failure(current, reason, retry_at, now)
                return
            except Conflict:
                continue


def waiting_for_host(reason: str) -> str:
    """A waiting observer's reason (its ``STATUS_REASON``) while its host's RunTask fails."""
    return f"waiting for a host: RunTask failed: {reason.removeprefix(RUN_TASK_FAILURES)}; retrying"


def start_write(placer: Placer, record: d.Record, write: d.StartTask) -> d.StartTask:
    """The decided StartTask with its host chosen (sticky: the current host if it takes it)."""
    host = placer.choose(record.observer.kind, record.pooled.host, record.name)
    return replace(write, host=host.host_id, task_definition=host.task_definition)
