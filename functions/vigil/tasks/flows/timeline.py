"""A flow's steps as an operator reads them (``vigil tasks get``, ``GET /tasks/{task}/{id}``,
the console): one row per step, sleep, wait or map, in the order the body first reached them.

A row's status is read against the time of the read and the flow's record, so a sleep, wait or
map that is over does not keep showing what it was while it lasted:

    sleep  until in the future: SLEEPING; passed: SLEPT (finished at its end, ``until``)
    wait   SIGNALLED or TIMED_OUT (finished when decided); otherwise WAITING
    map    DONE once every child has ended (finished at the last child's end); otherwise WAITING
    any of them unfinished in a flow that has ended (cancelled, failed): STOPPED, finished when
           the flow did (a map whose children a cancel ended: STOPPED when it cancelled them,
           though its count is full)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vigil.contract.flows import StepField, StepKind, StepState
from vigil.contract.tasks import FINAL_STATUSES, TaskStatus
from vigil.dynamo import Item

F = StepField
STOPPED = "STOPPED"
"""A sleep, wait or map the flow left unfinished when it ended (a cancel, a failure)."""


def timeline(
    items: dict[str, Item],
    *,
    now: datetime | None = None,
    status: TaskStatus | None = None,
    finished_at: str | None = None,
) -> list[dict[str, Any]]:
    """The rows, as of ``now``, of a flow whose record says ``status`` and ``finished_at``."""
    ended = finished_at if status in FINAL_STATUSES else None
    rows = [_row(item, now, ended) for item in items.values()]
    return sorted(rows, key=lambda row: (row["seq"] is None, row["seq"] or 0, row["name"]))


def _row(item: Item, now: datetime | None, ended: str | None) -> dict[str, Any]:
    kind = str(item.get(F.KIND) or StepKind.WAIT.value)
    status, finished = _status(kind, item, now)
    if status in (TaskStatus.SLEEPING.value, TaskStatus.WAITING.value) and ended is not None:
        status, finished = STOPPED, ended
    row: dict[str, Any] = {
        "name": str(item.get(F.NAME) or item["sk"]),
        "kind": kind,
        "seq": int(item[F.SEQ]) if F.SEQ in item else None,
        "status": status,
        "attempts": int(item.get(F.ATTEMPTS, 0)) or None,
        "started_at": item.get(F.STARTED_AT),
        "finished_at": finished,
        "result_bytes": len(str(item[F.RESULT]).encode()) if F.RESULT in item else None,
        "until": item.get(F.UNTIL),
        "error": item.get(F.ERROR),
        "compensation": item.get(F.COMPENSATION),
        "compensation_order": int(item[F.COMPENSATION_ORDER])
        if F.COMPENSATION_ORDER in item
        else None,
        "children": _children(item) if kind == StepKind.MAP else None,
    }
    return {key: value for key, value in row.items() if value is not None or key == "seq"}


def _children(item: Item) -> dict[str, int]:
    """A map's children: how many, and how many ended by final status."""
    prefix = f"{F.ENDED.value}_"
    counts = {"total": int(item.get(F.CHILDREN, 0))}
    for attribute, value in sorted(item.items()):
        if attribute.startswith(prefix) and attribute not in (F.ENDED_SET, F.ENDED_AT):
            counts[attribute.removeprefix(prefix)] = int(value)
    if F.CHILDREN_CANCELLED_AT in item:  # its flow was cancelled: running ones asked to stop
        counts["stop_asked"] = int(item.get(F.CHILDREN_STOP_ASKED, 0))
    return counts


def _status(kind: str, item: Item, now: datetime | None) -> tuple[str, Any]:
    """The row's status and when it finished (None: it has not)."""
    if kind == StepKind.MAP:
        if F.CHILDREN_CANCELLED_AT in item:  # its flow's cancel ended the rest: never collected
            return STOPPED, item.get(F.CHILDREN_CANCELLED_AT)
        if int(item.get(F.ENDED, 0)) >= int(item.get(F.CHILDREN, 0)):
            return StepState.DONE.value, item.get(F.ENDED_AT)
        return TaskStatus.WAITING.value, None
    if kind == StepKind.STEP:
        return str(item.get(F.STATE) or StepState.STARTED.value), item.get(F.FINISHED_AT)
    if kind == StepKind.SLEEP:
        until = item.get(F.UNTIL)
        if now is not None and until is not None and datetime.fromisoformat(str(until)) <= now:
            return "SLEPT", until
        return TaskStatus.SLEEPING.value, None
    if F.SIGNAL_KEY in item:
        return "SIGNALLED", item.get(F.SIGNALLED_AT)
    if F.TIMED_OUT_AT in item:
        return "TIMED_OUT", item.get(F.TIMED_OUT_AT)
    return (TaskStatus.WAITING.value if F.UNTIL in item else "SIGNAL_PENDING"), None
