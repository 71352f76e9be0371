"""The manager of pooled hosts: a host's ECS event, and the hosts' share of the resync.

Why the healthy resync costs O(hosts), not O(observers): the pass scans the hosts table (one page
per ~200 hosts of K = 50), lists the cluster's tasks (one page per 100), and queries the sparse
waiting index per pooled kind (observers that want a slot: new, backing off, or placed but not
confirmed; usually empty). Observer records are read (GetItem, consistent) only where a decision
needs them: the observers of a host found dead or drained, and the waiting ones. A healthy pooled
observer is never read: its host's heartbeat stands for it, and its exit reaches the reconciler
through the registry stream (``HOST_EXIT``). The fleet index is read only when the fleet also has
dedicated kinds (as today) or every ``sweep_minutes`` (a safety net for a lost stream record or a
placement interrupted between its writes); pooled records found there are checked against the
hosts already scanned, and read only when they look wrong.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime

from vigil.clock import Clock, epoch_ms, system_clock
from vigil.contract.hosts import LIVE_HOST_STATUSES, HostStatus
from vigil.contract.observers import Desired, Status
from vigil.observers import decisions as d
from vigil.observers.ecs_tasks import EcsTasks
from vigil.observers.fleet_gauges import PooledCounts, pooled_counts
from vigil.observers.fleet_store import FleetStore
from vigil.observers.host_fleet.model import Host
from vigil.observers.host_fleet.planning import (
    HostPlan,
    handovers,
    leaving_hosts,
    not_running,
    not_started_on_draining,
    plan_hosts,
    stuck_starting,
    task_ended,
)
from vigil.observers.host_fleet.store import HostConflict, HostStore
from vigil.observers.rebalance_requests import RebalanceRequest
from vigil.observers.reconciler.executor import Settler
from vigil.observers.reconciler.placer import Placer
from vigil.observers.reconciler.report import PassReport, isolated
from vigil.observers.reconciler.starter import MAX_DECISION_ROUNDS
from vigil.observers.rollout import LEGACY_REVISION, HostView, plan_pooled, plan_rebalance
from vigil.telemetry import ObserverMetric

SWEEP_MINUTES = 10


def sweep_due(now: datetime, minutes: int = SWEEP_MINUTES) -> bool:
    """Whether this minute's resync sweeps (every ``minutes``): reads what a healthy pass
    skips (the pooled fleet's records, the stopped index)."""
    return (epoch_ms(now) // 60_000) % minutes == 0


@dataclass(frozen=True)
class HostsPass:
    task_arns: set[str]
    """Tasks that are hosts' (the orphan sweep leaves them alone)."""
    running: set[str]
    """The cluster's running tasks, listed after the hosts were read."""
    counts: PooledCounts
    """The pooled share of the fleet gauges."""


@dataclass(frozen=True, kw_only=True)
class HostManager:
    placer: Placer
    hosts: HostStore
    store: FleetStore
    ecs: EcsTasks
    settler: Settler
    settings: d.Settings
    clock: Clock = system_clock
    sweep_minutes: int = SWEEP_MINUTES

    @property
    def pooled_kinds(self) -> list[str]:
        return sorted(k for k, p in self.placer.placements.items() if p.pooled)

    def sweep_due(self, now: datetime) -> bool:
        return sweep_due(now, self.sweep_minutes)

    # A host task's ECS event ----------------------------------------------------------------------

    def on_task_event(self, task: d.TaskState, report: PassReport) -> None:
        """STOPPED: the host is lost at once and its observers move (a DRAINING host that handed
        every observer over is STOPPED instead: it drained); else record its task."""
        assert task.host is not None
        self.placer.begin()
        host = self.hosts.get(task.host)
        if host is None or host.task_arn not in (None, task.arn):
            if not task.stopped:
                self.ecs.stop(task.arn, f"orphan host task: {task.host} does not own it")
                report.orphans_stopped += 1
            return
        if task.stopped and host.status is HostStatus.DRAINING and not host.assigned:
            self._finish(host, report, running=set())  # drained itself: a clean end, not a loss
        elif task.stopped:
            self.lose(host, f"its task stopped: {task.stopped_reason or task.stop_code}", report)
        elif host.task_arn is None and host.accepting:
            self.placer.run_host(host)  # adopts the ARN (same clientToken)

    # The resync's share ---------------------------------------------------------------------------

    def resync(self, list_tasks: Callable[[], Iterable[str]], report: PassReport) -> HostsPass:
        """One pass over the hosts: the task ARNs that are hosts (not orphans), and the pooled
        observers wanted and running as the pass leaves them (the fleet gauges' pooled share).

        The hosts are read *before* the cluster's tasks are listed: a host's task ARN is
        recorded after its RunTask succeeded, so every task a host read here names is already
        running when the listing starts, and "not listed" means gone. Listed first, a host
        whose task a concurrent pass started and recorded in between would be declared LOST
        seconds after its start. A live host whose task is not listed is judged by ECS's own
        word on that task (:meth:`_still_stopping`), never by the listing alone."""
        hosts, requests = self.hosts.live(self.pooled_kinds, self.clock())
        running = set(list_tasks())
        stopping = self._still_stopping(hosts, running, report)
        self.placer.begin(hosts)
        now = self.clock()
        wanting = {kind: self.store.waiting(kind) for kind in self.pooled_kinds}
        waiting = {
            kind: [name for name, due in names.items() if due <= now]
            for kind, names in wanting.items()
        }
        # A waiting observer already assigned to an accepting host (its placement unconfirmed, or
        # its host's RunTask failing) has its slot: counting it again would start a spare host.
        # One still on a draining host is counted there, as leaving it.
        placed = {n for h in hosts if h.accepting for n in h.assigned} | leaving_hosts(hosts)
        plan = plan_hosts(
            hosts,
            running | stopping,
            {k: sum(1 for n in v if n not in placed) for k, v in waiting.items()},
            self.placer.placements,
            now,
            self.settings,
        )
        dead = {host_id for host_id, _ in plan.lost}
        alive = [h for h in hosts if h.host_id not in dead]
        stranded = not_started_on_draining(alive)
        settle = [name for names in waiting.values() for name in names]
        self._carry_out(plan, [*settle, *stranded, *not_running(alive)], running, report)
        self._end_handovers(report)
        for kind, stuck in stuck_starting(hosts, self.pooled_kinds, now, self.settings).items():
            self.placer.metric(ObserverMetric.HOSTS_STUCK_STARTING, kind, stuck)
        for kind in self.pooled_kinds:
            with isolated(f"rollout {kind}", report):
                self._roll(kind, report)
        for request in requests:
            with isolated(f"rebalance {request.kind}", report):
                self._rebalance(request)
        book = self.placer.all_hosts().values()
        return HostsPass(
            task_arns={h.task_arn for h in hosts if h.task_arn},
            running=running,
            counts=pooled_counts(
                book,
                wanting,
                {k: p.max_unavailable for k, p in self.placer.placements.items()},
            ),
        )

    def _still_stopping(self, hosts: list[Host], running: set[str], report: PassReport) -> set[str]:
        """Tasks of accepting hosts that ListTasks no longer lists but whose container ECS says
        still runs (``planning.task_ended``): ECS was told to stop them a moment ago (a Spot
        interruption, StopTask, a deploy) and their host, sent SIGTERM, is about to heartbeat
        DRAINING and hand its children over. Judged by the listing alone, a pass in that window
        would declare it LOST and fence its children mid-checkpoint. A host whose task really
        ended (its container exited, or STOPPED) is still LOST by this very pass.

        Costs nothing on a healthy pass (every host's task is listed): one DescribeTasks per 100
        unlisted hosts otherwise. When it fails, the hosts are left unjudged by the listing for
        this pass (counted as the pass's error); their STOPPED event or silence still ends them."""
        unlisted = [
            h.task_arn for h in hosts if h.accepting and h.task_arn and h.task_arn not in running
        ]
        if not unlisted:
            return set()
        stopping = set(unlisted)
        with isolated("hosts' unlisted tasks", report):
            described = self.ecs.describe(unlisted)
            report.described += len(unlisted)
            stopping = {arn for arn, task in described.items() if not task_ended(task)}
        return stopping

    # Moving observers on purpose: rollouts and rebalances -----------------------------------------

    def _roll(self, kind: str, report: PassReport) -> None:
        """Hosts of an older task definition are drained onto current ones, within the kind's
        ``max_unavailable`` (``vigil.observers.rollout.plan_pooled``): each move is a hand-over
        (the old child checkpoints and exits; its exit report places the next generation)."""
        current = self.ecs.task_definition(kind)
        if current is None:
            return
        options = self.placer.placements[kind]
        hosts = [h for h in self.placer.all_hosts().values() if h.kind == kind]
        views = _views(hosts, current, ours=self.placer.ours)
        step = plan_pooled(current, options.max_unavailable, options.slots_per_host, views)
        if step.empty:
            return
        for _ in range(step.start_hosts):
            self.placer.start_host(kind)
        for host_id, count in step.move:
            self._hand_over(host_id, count, "rollout to a new task definition")
        for host_id in step.stop:
            host = self.placer.host(host_id)
            # As a drain's end: nothing assigned and nothing running (a handed-over child still
            # checkpointing would be killed by StopTask, its checkpoint lost).
            if host is not None and not host.assigned and not host.running:
                self._finish(host, report)

    def _rebalance(self, request: RebalanceRequest) -> None:
        """An operator's ``vigil observers rebalance``: hand observers over from the fullest hosts;
        each lands on the least-loaded one (placement's own rule). The marker is then cleared."""
        if request.kind in self.pooled_kinds:
            current = self.ecs.task_definition(request.kind) or ""
            hosts = [h for h in self.placer.all_hosts().values() if h.kind == request.kind]
            moves = plan_rebalance(_views(hosts, current), request.max_moves)
            for source, count in Counter(source for source, _ in moves).items():
                self._hand_over(source, count, None)
        self.hosts.clear_request(request)

    def _hand_over(self, host_id: str, count: int, drain_reason: str | None) -> None:
        """Take ``count`` observers off a host (its heartbeat answer no longer names them);
        with a ``drain_reason`` the host is DRAINING first, so none comes back to it."""
        host = self.placer.host(host_id)
        if host is None:
            return
        if drain_reason and host.status is not HostStatus.DRAINING:
            host = self._mark(host, HostStatus.DRAINING, drain_reason)
            if host is None or host.status is not HostStatus.DRAINING:
                return
        for name in sorted(host.assigned)[:count]:
            current = self.placer.host(host_id) or host
            if name not in current.assigned:
                continue
            try:
                self.placer.book.put(self.hosts.unassign(current, name, handover=True))
            except HostConflict:
                continue  # the next pass decides again on what it reads

    def _end_handovers(self, report: PassReport) -> None:
        """Clear hand-overs that are over (``planning.handovers``). One whose child is gone and
        that no host holds yet is read: still at that generation on this host, its exit report
        was lost (or it ended), and deciding moves it (or takes it off); moved on, its record
        carries it from here."""
        finished, unplaced = handovers(self.placer.all_hosts().values())
        for host_id, names in unplaced.items():
            for name in names:
                with isolated(name, report):
                    record = self.store.get(name)
                    report.observers += 1
                    host = self.placer.host(host_id)
                    if host is None or name not in host.handover:
                        continue
                    if (
                        record is not None
                        and record.pooled.host == host_id
                        and record.observer.generation == host.handover[name]
                    ):
                        self.settler.settle(record, None, report)
                    else:
                        finished.setdefault(host_id, []).append(name)
        for host_id, names in finished.items():
            host = self.placer.host(host_id)
            with isolated(host_id, report):
                if host is not None and host.handover.keys() & set(names):
                    with suppress(HostConflict):  # changed meanwhile: the next pass looks again
                        self.placer.book.put(self.hosts.forget_handovers(host, names))

    def check(self, records: Iterable[d.Record], report: PassReport) -> None:
        """Pooled records from a fleet-index read: read and settle only those that look wrong."""
        hosts = self.placer.all_hosts().values()
        placed = {(n, g) for h in hosts if h.accepting for n, g in h.assigned.items()}
        now = self.clock()
        for record in records:
            if _looks_wrong(record, placed, now):
                with isolated(record.name, report):
                    self._settle_fresh(record.name, report)

    def _carry_out(
        self,
        plan: HostPlan,
        settle: list[str],
        running: set[str],
        report: PassReport,
    ) -> None:
        book = self.placer.all_hosts()
        for host_id, why in plan.lost:
            with isolated(host_id, report):
                self.lose(book[host_id], why, report)
        for host_id in plan.evacuate:
            with isolated(host_id, report):
                self._evacuate(book[host_id], "host lost", report, running)
        for host_id in plan.promote:
            with isolated(host_id, report):
                self._mark(book[host_id], HostStatus.RUNNING, None)
        for host_id in plan.witness:
            with isolated(host_id, report), suppress(HostConflict):  # it beat meanwhile: alive
                current = self.placer.host(host_id) or book[host_id]
                self.placer.book.put(self.hosts.note_beat(current, self.clock()))
        for host_id in plan.retry_run:
            with isolated(host_id, report):
                self.placer.run_host(book[host_id])
        for name in dict.fromkeys(settle):
            with isolated(name, report):
                self._settle_fresh(name, report)
        for kind, count in plan.start.items():
            for _ in range(count):
                with isolated(kind, report):
                    self.placer.start_host(kind)
        for host_id in plan.drain:
            with isolated(host_id, report):
                self.drain(book[host_id])
        for host_id in plan.finish:
            with isolated(host_id, report):
                self._finish(book[host_id], report, running)

    def lose(self, host: Host, why: str, report: PassReport) -> None:
        """Mark LOST (its heartbeat is refused from now on), stop its task, move its observers.

        Only once: a repeated STOPPED event for a host already LOST (and evacuated) or STOPPED
        does nothing; one whose loss an error interrupted is finished. Counted (HostLost) and
        evacuated by the pass whose write marked it: one that finds another pass got there
        first leaves it to that one (``host_unfinished`` finishes it if that one fails)."""
        if host.status is HostStatus.LOST and not host.evacuated:
            self._evacuate(host, f"host lost: {why}", report)
        current: Host | None = host
        for _ in range(MAX_DECISION_ROUNDS):
            if current is None or current.status in (HostStatus.LOST, HostStatus.STOPPED):
                return
            try:
                lost = self.placer.book.put(
                    self.hosts.mark(current, HostStatus.LOST, why, now=self.clock())
                )
            except HostConflict as conflict:
                current = conflict.current
                continue
            self.placer.metric(ObserverMetric.HOST_LOST, lost.kind, 1)
            self._evacuate(lost, f"host lost: {why}", report)
            return

    def _evacuate(
        self, host: Host, why: str, report: PassReport, running: set[str] | None = None
    ) -> None:
        """Stop its task (when ``running`` lists it, or always without a list) and move every
        observer that still names it; ``evacuated`` only once all that succeeded, so an error
        leaves the host for the next pass (``planning.host_unfinished``) to finish."""
        errors = report.errors
        if host.task_arn and (running is None or host.task_arn in running):
            with isolated(host.host_id, report):
                self.ecs.stop(host.task_arn, why)
        self._move_all(host, report)
        if report.errors == errors and not host.evacuated:
            try:
                current = self.placer.host(host.host_id) or host
                self.placer.book.put(self.hosts.mark_evacuated(current))
            except HostConflict:
                pass  # changed meanwhile: the next pass looks again

    def drain(self, host: Host) -> None:
        """DRAINING: takes nothing new; each observer is handed over (its child checkpoints and
        exits, its exit report places the next generation elsewhere)."""
        drained = self._mark(host, HostStatus.DRAINING, "surplus: scale-in")
        if drained is None or drained.status is not HostStatus.DRAINING:
            return
        for name in sorted(drained.assigned):
            current = self.placer.host(drained.host_id) or drained
            if name in current.assigned:
                try:
                    self.placer.book.put(self.hosts.unassign(current, name, handover=True))
                except HostConflict:
                    continue  # the next pass sees it still assigned and finishes the hand-over

    def _finish(self, host: Host, report: PassReport, running: set[str] | None = None) -> None:
        """StopTask (unless ``running`` says it is gone already), STOPPED, evacuated."""
        if host.task_arn and (running is None or host.task_arn in running):
            self.ecs.stop(host.task_arn, "drained")
        stopped = self._mark(host, HostStatus.STOPPED, "drained")
        if stopped is not None and stopped.status is HostStatus.STOPPED:
            self._evacuate(stopped, "drained", report, running=set())

    def _move_all(self, host: Host, report: PassReport) -> None:
        """Every observer the host had (assigned or handed over) that still names it."""
        for name in sorted({*host.assigned, *host.handover}):
            with isolated(name, report):
                record = self.store.get(name)
                if record is not None and record.pooled.host == host.host_id:
                    report.observers += 1
                    self.settler.settle(record, None, report)

    def _settle_fresh(self, name: str, report: PassReport) -> None:
        record = self.store.get(name)
        if record is not None:
            report.observers += 1
            self.settler.settle(record, None, report)

    def _mark(self, host: Host, status: HostStatus, why: str | None) -> Host | None:
        current: Host | None = host
        for _ in range(MAX_DECISION_ROUNDS):
            if current is None or current.status in (HostStatus.LOST, HostStatus.STOPPED):
                return current
            if status is HostStatus.RUNNING and current.status is not HostStatus.STARTING:
                return current  # a promotion is for a STARTING host only (never over DRAINING)
            try:
                return self.placer.book.put(self.hosts.mark(current, status, why, now=self.clock()))
            except HostConflict as conflict:
                current = conflict.current
        return None


def _views(
    hosts: list[Host], current: str, ours: Callable[[Host], bool] | None = None
) -> list[HostView]:
    """The kind's hosts as the pure rollout and rebalance planners see them. A host whose task
    definition is not recorded yet is starting on the current one (RunTask uses the kind's
    current revision); one whose children write the registry of before it was keyed by kind
    (not ``ours``: :meth:`Placer.ours`) is outdated whatever it runs, so the rollout drains it.
    In flight on a host: what it holds but does not run yet (``starting``),
    and what it handed over that no live host holds yet (``leaving``: its child still stopping,
    or its exit report not yet acted on); one placed again counts on its new host until it
    runs there, so no observer is counted twice or missed while it moves."""
    held = {name for h in hosts if h.status in LIVE_HOST_STATUSES for name in h.assigned}
    return [
        HostView(
            host_id=h.host_id,
            kind=h.kind,
            task_definition=LEGACY_REVISION
            if ours is not None and not ours(h)
            else h.task_definition or current,
            status=h.status,
            assigned=len(h.assigned),
            slots=h.slots,
            starting=sum(1 for name, g in h.assigned.items() if not h.runs(name, g)),
            leaving=sum(1 for name in h.handover if name not in held),
        )
        for h in hosts
    ]


def _looks_wrong(record: d.Record, placed: set[tuple[str, int]], now: datetime) -> bool:
    """From the index's small projection: should this pooled record be read and decided?"""
    observer = record.observer
    if observer.status in (Status.FAILED, Status.STOPPED):
        return False
    if observer.desired is Desired.STOPPED:
        return True
    if observer.status is Status.PENDING:
        return observer.next_start_at is None or observer.next_start_at <= now
    if observer.next_start_at is not None:
        return observer.next_start_at <= now
    return (observer.name, observer.generation) not in placed
