"""The observers page: the fleet's counts first, then a page of observers (state, generation,
heartbeat age, host, restarts, last exit), a status filter, and the pooled kinds' hosts (slots
used and free).

Buttons: restart, stop, settle an UNCERTAIN observer's effect. Reads per view: the fleet counter
(one GetItem), one page of the registry (the index Query and one BatchGetItem per 100), and the
hosts (one Scan of the hosts table, a few hundred items at most: one host holds many observers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from vigil.console.controls import Control, Controls, settle_controls
from vigil.console.frame import ago, counts, more, state
from vigil.console.markup import Safe, short, table, tag
from vigil.console.services import ConsoleServices
from vigil.observers.model import Desired, Observer, Status

PAGE = 50
HOSTS_SHOWN = 50


@dataclass(frozen=True)
class ObserverLine:
    name: str
    kind: str
    status: str
    desired: str
    generation: int
    heartbeat: str
    host: str | None
    restarts: int
    last_exit: str | None
    reason: str | None
    uncertain_effect: str | None


@dataclass(frozen=True)
class HostLine:
    id: str
    kind: str
    status: str
    used: int
    free: int
    heartbeat: str


@dataclass(frozen=True)
class ObserversView:
    counts: list[tuple[str, int]]
    lines: list[ObserverLine]
    status: str | None
    next: str | None
    hosts: list[HostLine]
    hosts_total: int = 0


def read(services: ConsoleServices, params: Mapping[str, Any]) -> ObserversView:
    registry = services.observers
    if registry is None:
        return ObserversView([("observers", 0)], [], None, None, [])
    now = services.clock()
    raw = str(params.get("status") or "").upper()
    status = Status(raw) if raw in Status.__members__ else None
    page = registry.list_page(status=status, limit=PAGE, cursor=params.get("next") or None)
    lines = [line_of(o, now) for o in page.observers]
    hosts = []
    if services.hosts is not None:
        hosts = [
            HostLine(
                id=h.host_id,
                kind=h.kind,
                status=str(h.status),
                used=len(h.assigned),
                free=max(0, h.slots - len(h.assigned)),
                heartbeat=ago(h.heartbeat_at, now),
            )
            for h in services.hosts.scan(now)
        ]
    tally = [("active (desired running)", registry.active_count()), ("hosts", len(hosts))]
    return ObserversView(
        tally,
        lines,
        status.value if status else None,
        page.cursor,
        sorted(hosts, key=lambda h: h.id)[:HOSTS_SHOWN],
        len(hosts),
    )


def line_of(observer: Observer, now: datetime) -> ObserverLine:
    exit_ = observer.last_exit
    last_exit = None
    if exit_ is not None:
        last_exit = f"{exit_.stop_code or '-'} exit {exit_.exit_code} {exit_.reason or ''}".strip()
    return ObserverLine(
        name=observer.name,
        kind=observer.kind,
        status=observer.status.value,
        desired=observer.desired.value,
        generation=observer.generation,
        heartbeat=ago(observer.heartbeat_at, now),
        host=observer.host,
        restarts=observer.restarts,
        last_exit=last_exit,
        reason=observer.failure_reason or observer.status_reason,
        uncertain_effect=observer.uncertain_effect,
    )


# -- rendering (pure) --------------------------------------------------------------------------


def render(view: ObserversView, controls: Controls) -> Safe:
    filters = [
        controls.render(
            Control(s.value.lower(), {"page": "observers", "status": s.value}, view=True)
        )
        for s in Status
    ]
    filters.append(controls.render(Control("all", {"page": "observers"}, view=True)))
    following = (
        {"page": "observers", "status": view.status, "next": view.next} if view.next else None
    )
    return tag(
        "div",
        counts(view.counts),
        tag("div", *filters),
        observers_table(view.lines, controls, "observers")
        if view.lines
        else tag("p", "no observer matches", class_="muted"),
        more(controls, "next page", following),
        _hosts(view) if view.hosts else None,
    )


def observers_table(lines: list[ObserverLine], controls: Controls, page: str) -> Safe:
    """Observers with their buttons (this page's and what-is-wrong-now's)."""
    header = ["observer", "kind", "status", "gen", "heartbeat", "host", "restarts", "last exit"]
    return table([*header, "reason", ""], [row(line, controls, page) for line in lines])


def row(line: ObserverLine, controls: Controls, page: str) -> list[Any]:
    return [
        tag("b", line.name),
        line.kind,
        state(line.status),
        str(line.generation),
        line.heartbeat,
        line.host or "-",
        str(line.restarts),
        short(line.last_exit) or "-",
        short(line.reason) or "-",
        tag("span", *buttons(line, controls, page)),
    ]


def buttons(line: ObserverLine, controls: Controls, page: str) -> list[Safe]:
    shown = [
        controls.render(
            Control(
                "restart",
                {
                    "action": "observers.restart",
                    "name": line.name,
                    "seen": line.generation,
                    "desired": line.desired,
                    "page": page,
                },
                confirm=f"Restart {line.name}? Its task is replaced by a new generation.",
            )
        )
    ]
    if line.desired == Desired.RUNNING.value:
        shown.append(
            controls.render(
                Control(
                    "stop",
                    {
                        "action": "observers.stop",
                        "name": line.name,
                        "seen": line.generation,
                        "page": page,
                    },
                    confirm=f"Stop {line.name}?",
                )
            )
        )
    if line.uncertain_effect:
        shown += settle_controls(
            controls,
            line.name,
            line.uncertain_effect,
            {"action": "observers.settle", "name": line.name, "page": page},
            rerun=False,
        )
    return shown


def _hosts(view: ObserversView) -> Safe:
    rows = [
        [h.id, h.kind, state(h.status), str(h.used), str(h.free), h.heartbeat] for h in view.hosts
    ]
    title = f"hosts ({view.hosts_total}" + (
        f", first {len(view.hosts)})" if view.hosts_total > len(view.hosts) else ")"
    )
    return tag(
        "div",
        tag("h4", title),
        table(["host", "kind", "status", "used", "free", "heartbeat"], rows),
    )
