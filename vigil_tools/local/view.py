"""The live terminal view: jobs with their last ticks, observers with status and generation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vigil.dynamo import from_wire
from vigil.jobs.store import RunStore
from vigil.observers.model import from_item
from vigil_tools.tables import render_table

CLEAR = "\x1b[H\x1b[2J"


def render(session: Any, jobs_catalog: Any, registry_table: str, now: datetime, header: str) -> str:
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
    observers = sorted(
        # the registry holds the fleet's counter too: observers are the items with a kind
        (from_item(r) for r in records if "kind" in r),
        key=lambda o: o.name,
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
            "Ctrl-C stops everything.",
        ]
    )
