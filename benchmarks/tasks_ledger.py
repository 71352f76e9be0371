"""The tasks soak's ledger and verdict (``benchmarks/tasks_soak.py``): what happened, kept apart
from Vigil's records, and how the records are judged against it.

The sink accepts a task's write only with a fencing token above the last it accepted; the ledger
keeps every body's run (start, end, token, whether its work was done and whether its outcome
landed), each ordered group's order of sends, the cancels, the redrive operations that moved each
task, and every completion event sent. :func:`the soak's report` (the soak's report) and :func:`table`
(the benchmarks page) read them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from vigil.contract.tasks import TaskStatus


@dataclass
class Invocation:
    function: str
    request_id: str
    deadline: datetime
    killed: bool = False
    faults: list[str] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)


@dataclass
class Run:
    """One body's run, as the ledger saw it."""

    key: str
    attempt: int
    token: int
    start: datetime
    invocation: Invocation
    redrives_before: int
    end: datetime | None = None
    completed: bool = False
    """Its work done: the sink accepted its write."""
    faults_after: list[str] = field(default_factory=list)
    """Faults its invocation met after the work was done (why a second body may be explained)."""
    landed: bool | None = None
    """Its outcome was recorded when its invocation ended (None: not known, a newer run had
    taken the record over by then)."""


@dataclass
class Ledger:
    sink_last: dict[str, int] = field(default_factory=dict)
    sink_accepted: Counter[str] = field(default_factory=Counter)
    sink_refused: Counter[str] = field(default_factory=Counter)
    runs: dict[str, list[Run]] = field(default_factory=lambda: defaultdict(list))
    events: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))
    """key -> (event_id, detail) of every completion event sent."""
    sent_order: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    """An ordered group's keys in the order their first message entered its queue."""
    group_of: dict[str, str] = field(default_factory=dict)
    cancelled_at: dict[str, datetime] = field(default_factory=dict)
    redrives: Counter[str] = field(default_factory=Counter)
    """How many redrive operations moved a dead letter of the key back."""
    sent: set[str] = field(default_factory=set)
    """Keys whose message was sent at least once (the task exists)."""

    def write(self, key: str, token: int) -> bool:
        if token <= self.sink_last.get(key, 0):
            self.sink_refused[key] += 1
            return False
        self.sink_last[key] = token
        self.sink_accepted[key] += 1
        return True


@dataclass
class Report:
    tasks: int
    seed: int
    faults: tuple[str, ...]
    broken_guard: bool
    fifo_fixed: bool
    lost: int
    second_bodies: Counter[str]
    beyond_budget: int
    events_missing: int
    events_conflicting: int
    overlaps: int
    out_of_order: int
    after_cancel: int
    mismatches: int
    stranded: int
    failed_unexpectedly: int
    outcomes: Counter[str]
    requests: Counter[str]
    invocations: int
    redriven: int
    seconds: float
    peak_rss_mb: float
    examples: dict[str, list[str]]

    @property
    def unexplained(self) -> int:
        return self.second_bodies.get(UNEXPLAINED, 0)

    @property
    def held(self) -> bool:
        """Every target met."""
        return not (
            self.lost
            or self.unexplained
            or self.beyond_budget
            or self.events_missing
            or self.events_conflicting
            or self.overlaps
            or self.out_of_order
            or self.after_cancel
            or self.mismatches
            or self.stranded
        )

    @property
    def caught(self) -> bool:
        """The broken guard's failures were seen."""
        return bool(self.unexplained or self.overlaps or self.beyond_budget or self.mismatches)

    def per_task(self, prefix: str) -> float:
        return sum(v for k, v in self.requests.items() if k.startswith(prefix)) / self.tasks

    def lines(self) -> list[str]:
        causes = ", ".join(f"{c}: {n}" for c, n in sorted(self.second_bodies.items())) or "none"
        ends = ", ".join(f"{s}: {n}" for s, n in sorted(self.outcomes.items()))
        return [
            f"tasks {self.tasks}, seed {self.seed}, faults {','.join(self.faults) or 'none'}"
            + (", BROKEN GUARD" if self.broken_guard else "")
            + ("" if self.fifo_fixed else ", moto's FIFO as it is"),
            f"records at the end: {ends}",
            f"tasks lost: {self.lost}",
            f"second bodies by cause: {causes}",
            f"runs beyond (retries + 1) x (1 + redrives): {self.beyond_budget}",
            f"completion events missing: {self.events_missing}; "
            f"sent twice with different content: {self.events_conflicting}",
            f"group overlaps: {self.overlaps}; out-of-order runs: {self.out_of_order}",
            f"runs after a cancel: {self.after_cancel}",
            f"records that disagree with the ledger: {self.mismatches}",
            f"stranded (the audit): {self.stranded}",
            f"FAILED though their fate allowed success (kills spent the budget): "
            f"{self.failed_unexpectedly}",
            f"dead letters redriven: {self.redriven}",
            f"requests per task: DynamoDB {self.per_task('function dynamodb'):.2f} "
            f"(+ enqueue {self.per_task('application dynamodb'):.2f}), "
            f"SQS {self.per_task('function sqs'):.2f} (+ event source "
            f"{self.per_task('event source sqs'):.2f}, enqueue "
            f"{self.per_task('application sqs'):.2f}), EventBridge "
            f"{self.per_task('function events'):.2f}, S3 {self.per_task('function s3'):.3f}; "
            f"invocations per task {self.invocations / max(self.tasks, 1):.2f}",
            f"tasks per second: {self.tasks / max(self.seconds, 1e-9):.1f}; "
            f"{self.seconds:.0f} s; peak RSS {self.peak_rss_mb:.0f} MB",
        ]


UNEXPLAINED = "unexplained (a finished task ran again)"
CAUSES = {
    "killed": "killed after its work, before its finish landed",
    "throttle": "its finish throttled past the invocation's time",
}


def cause(run: Run) -> str:
    """Why a run's work was done again after it: it was killed before its outcome landed, or its
    outcome did not land before its invocation's time ran out; else nothing explains it."""
    if run.landed:
        return UNEXPLAINED
    if run.invocation.killed:
        return CAUSES["killed"]
    if run.landed is False:
        return CAUSES["throttle"]
    return UNEXPLAINED


def disagrees(record: dict[str, Any], ledger: Ledger, key: str) -> bool:
    """The record's outcome is not what the sink saw: SUCCEEDED is the run whose write the sink
    kept last; FAILED and CANCELLED did no work."""
    status = record.get("status")
    if status == TaskStatus.SUCCEEDED.value:
        return ledger.sink_last.get(key) != int(record.get("token", -1))
    if status in (TaskStatus.FAILED.value, TaskStatus.CANCELLED.value):
        return ledger.sink_accepted[key] > 0
    return False


def events_of(record: dict[str, Any], sent: list[tuple[str, str]]) -> tuple[int, int]:
    """(missing, conflicting): the final outcome's event was not sent; one event id sent with
    two contents."""
    by_id: dict[str, set[str]] = defaultdict(set)
    for event_id, detail in sent:
        by_id[event_id].add(detail)
    conflicting = sum(1 for details in by_id.values() if len(details) > 1)
    status = record.get("status")
    announced = status in (TaskStatus.SUCCEEDED.value, TaskStatus.FAILED.value)
    missing = int(announced and record.get("event_id") not in by_id)
    return missing, conflicting


def group_checks(ledger: Ledger) -> tuple[list[str], list[str]]:
    """Overlapping runs in a group, and runs that started before an earlier task of their group
    had run (runs after a redrive of the key are out of the group's order by design)."""
    overlaps: list[str] = []
    disorder: list[str] = []
    by_group: dict[str, list[Run]] = defaultdict(list)
    for key, runs in ledger.runs.items():
        group = ledger.group_of.get(key)
        if group is not None:
            by_group[group] += runs
    for group, runs in by_group.items():
        runs.sort(key=lambda r: r.start)
        busy_until: Run | None = None
        for run in runs:
            if busy_until is not None and busy_until.end and run.start < busy_until.end:
                overlaps.append(f"{group}: {busy_until.key} and {run.key} at {run.start:%H:%M:%S}")
            if busy_until is None or (run.end or run.start) > (busy_until.end or busy_until.start):
                busy_until = run
        order = {key: i for i, key in enumerate(ledger.sent_order.get(group, []))}
        first_runs = [r for r in runs if r.redrives_before == 0]
        for later in first_runs:
            for earlier in first_runs:
                if (
                    order.get(earlier.key, -1) < order.get(later.key, -1)
                    and earlier.key in order
                    and earlier.start > later.start
                ):
                    disorder.append(f"{group}: {later.key} ran before {earlier.key}")
                    break
    return overlaps, disorder


R = TypeVar("R")


def grid(
    reports: Sequence[R], label: Callable[[R], str]
) -> tuple[list[str], Callable[[str, Callable[[R], Any]], None]]:
    """A soak's table, one column per report: its rows so far, and ``row(name, value)`` adding
    one (``value`` read from each report)."""
    rows = [
        "| | " + " | ".join(label(r) for r in reports) + " |",
        "|---|" + "---:|" * len(reports),
    ]

    def row(name: str, value: Callable[[R], Any]) -> None:
        rows.append(f"| {name} | " + " | ".join(str(value(r)) for r in reports) + " |")

    return rows, row


def table(reports: Sequence[Report]) -> str:
    def label(r: Report) -> str:
        if r.broken_guard:
            return "broken guard"
        return f"seed {r.seed}" + ("" if r.fifo_fixed else ", moto's FIFO as it is")

    rows, row = grid(reports, label)
    row("tasks", lambda r: f"{r.tasks:,}")
    for status in sorted({s for r in reports for s in r.outcomes}):
        row(f"records {status} at the end", lambda r, s=status: r.outcomes.get(s, 0))
    row("**tasks lost** (target 0)", lambda r: r.lost)
    for cause in sorted({c for r in reports for c in r.second_bodies}):
        target = " (target 0)" if cause == UNEXPLAINED else ""
        row(f"second bodies: {cause}{target}", lambda r, c=cause: r.second_bodies.get(c, 0))
    row("**runs beyond (retries + 1) x (1 + redrives)** (target 0)", lambda r: r.beyond_budget)
    row("**completion events missing** (target 0)", lambda r: r.events_missing)
    row("**events sent twice with different content** (target 0)", lambda r: r.events_conflicting)
    row("**group overlaps** (target 0)", lambda r: r.overlaps)
    row("**out-of-order runs** (target 0)", lambda r: r.out_of_order)
    row("**runs after a cancel** (target 0)", lambda r: r.after_cancel)
    row("**records that disagree with the ledger** (target 0)", lambda r: r.mismatches)
    row("**stranded, found by the audit** (target 0)", lambda r: r.stranded)
    row("FAILED though their fate allowed success", lambda r: r.failed_unexpectedly)
    row("dead letters redriven (2 redrives)", lambda r: r.redriven)
    row("DynamoDB requests per task (function)", lambda r: f"{r.per_task('function dynamodb'):.2f}")
    row("SQS requests per task (function)", lambda r: f"{r.per_task('function sqs'):.2f}")
    row("SQS requests per task (event source)", lambda r: f"{r.per_task('event source sqs'):.2f}")
    row("enqueue requests per task", lambda r: f"{r.per_task('application'):.2f}")
    row("PutEvents per task", lambda r: f"{r.per_task('function events'):.2f}")
    row("invocations per task", lambda r: f"{r.invocations / max(r.tasks, 1):.2f}")
    row("tasks per second", lambda r: f"{r.tasks / max(r.seconds, 1e-9):.1f}")
    row("peak RSS (MB)", lambda r: f"{r.peak_rss_mb:.0f}")
    return "\n".join(rows)
