"""The live terminal view: jobs with their last ticks, observers with status and generation,
tasks with their records by status (flows' SLEEPING, WAITING and COMPENSATED too), those stuck
past their ``max_duration``, and their queues' depth."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vigil.contract.tasks import TaskStatus
from vigil.dynamo import from_wire
from vigil.jobs.store import RunStore
from vigil.observers.host_fleet.store import HostStore
from vigil.observers.model import from_item, is_observer_item
from vigil.observers.vouched import as_seen
from vigil.tasks.audit import stuck
from vigil.tasks.catalog import Catalog, TaskSpec
from vigil.tasks.queues import TaskQueue
from vigil.tasks.store import TaskStore
from vigil_tools.tables import render_table

CLEAR = "\x1b[H\x1b[2J"


TASK_COLUMNS = [
    "TASK",
    *TaskStatus,
    "STUCK",
    "IN-QUEUE",
    "DELAYED",
    "IN-FLIGHT",
    "DEAD-LETTERS",
]
"""The records by status (flows' SLEEPING, WAITING and COMPENSATED too), those not ended past
the task's ``max_duration`` (``-``: it declares none), then the queue: its messages ready
(``IN-QUEUE``: SQS's visible ones), delayed, in flight, and its dead letters."""


def render_tasks(sqs: Any, dynamodb: Any, catalog: Catalog, now: datetime) -> str:
    """One row per task: its records by status, the stuck ones (the tasks audit's finding at
    ``now``, read from the ``deadlines`` index), then its queue (SQS's approximate counts)."""
    rows = []
    for name in sorted(catalog):
        spec = catalog.spec(name)
        store = TaskStore(dynamodb, spec.table)
        counts = store.count_by_status(name)
        late = _stuck_count(store, spec, now)
        depth = TaskQueue(sqs, spec.queue_url, spec.dead_letter_url).depth()
        rows.append(
            [
                name,
                *(counts[status] for status in TaskStatus),
                late,
                depth.waiting,
                depth.delayed,
                depth.in_flight,
                depth.dead_letters,
            ]
        )
    return render_table(TASK_COLUMNS, rows) if rows else "(no tasks)"


def _stuck_count(store: TaskStore, spec: TaskSpec, now: datetime) -> int | str:
    if spec.max_duration is None:
        return "-"
    return len(stuck({spec.name: spec}, lambda _: store, now, clear_ended=False))


def render(
    session: Any,
    jobs_catalog: Any,
    registry_table: str,
    now: datetime,
    header: str,
    tasks: Catalog | None = None,
    hosts_table: str = "",
) -> str:
    heads = {
        h.job: h for h in RunStore(session.client("dynamodb"), jobs_catalog.runs_table).heads()
    }
    jobs = [
        [name, head.last_tick or "-", head.last_status.value if head.last_status else "-"]
        if head
        else [name, "-", "-"]
        for name in sorted(jobs_catalog.jobs)
        for head in [heads.get(name)]
    ]
    items = session.client("dynamodb").scan(TableName=registry_table, ConsistentRead=True)
    records = (from_wire(i) or {} for i in items.get("Items", []))
    hosts = HostStore(session.client("dynamodb"), hosts_table) if hosts_table else None
    observers = as_seen(
        sorted(
            # the registry holds its counter, lease and names' claims too
            (from_item(r) for r in records if is_observer_item(r)),
            key=lambda o: o.name,
        ),
        # a pooled observer's heartbeat: when its host last vouched for it
        lambda host_id: hosts.get(host_id) if hosts is not None else None,
    )
    rows = [
        [
            o.name,
            o.kind,
            o.status.value,
            str(o.generation),
            str(o.restarts),
            f"{o.heartbeat_at:%H:%M:%S}" if o.heartbeat_at else "-",
        ]
        for o in observers
    ]
    return "\n".join(
        [
            header,
            f"schedule clock {now:%Y-%m-%d %H:%M:%S} UTC",
            "",
            render_table(["JOB", "LAST TICK", "STATUS"], jobs) if jobs else "(no jobs)",
            "",
            render_table(["OBSERVER", "KIND", "STATUS", "GEN", "RESTARTS", "HEARTBEAT"], rows)
            if rows
            else "(no observers)",
            "",
            render_tasks(
                session.client("sqs"), session.client("dynamodb"), tasks or Catalog({}), now
            ),
            "",
            "Ctrl-C stops everything.",
        ]
    )
