"""A flow's steps as an operator reads them (``vigil tasks get``, ``GET /tasks/{task}/{id}``,
the console): one row per step, sleep or wait, in the order the body first reached them."""

from __future__ import annotations

from typing import Any

from vigil.contract.flows import StepField, StepKind, StepState
from vigil.dynamo import Item

F = StepField


def timeline(items: dict[str, Item]) -> list[dict[str, Any]]:
    rows = [_row(item) for item in items.values()]
    return sorted(rows, key=lambda row: (row["seq"] is None, row["seq"] or 0, row["name"]))


def _row(item: Item) -> dict[str, Any]:
    kind = str(item.get(F.KIND) or StepKind.WAIT.value)
    row: dict[str, Any] = {
        "name": str(item.get(F.NAME) or item["sk"]),
        "kind": kind,
        "seq": int(item[F.SEQ]) if F.SEQ in item else None,
        "status": _status(kind, item),
        "attempts": int(item.get(F.ATTEMPTS, 0)) or None,
        "started_at": item.get(F.STARTED_AT),
        "finished_at": item.get(F.FINISHED_AT)
        or item.get(F.SIGNALLED_AT if F.SIGNAL_KEY in item else F.TIMED_OUT_AT),
        "result_bytes": len(str(item[F.RESULT]).encode()) if F.RESULT in item else None,
        "until": item.get(F.UNTIL),
        "error": item.get(F.ERROR),
        "compensation": item.get(F.COMPENSATION),
        "children": _children(item) if kind == StepKind.MAP else None,
    }
    return {key: value for key, value in row.items() if value is not None or key == "seq"}


def _children(item: Item) -> dict[str, int]:
    """A map's children: how many, and how many ended by final status."""
    prefix = f"{F.ENDED.value}_"
    counts = {"total": int(item.get(F.CHILDREN, 0))}
    for attribute, value in sorted(item.items()):
        if attribute.startswith(prefix) and attribute != F.ENDED_SET:
            counts[attribute.removeprefix(prefix)] = int(value)
    if F.CHILDREN_CANCELLED_AT in item:  # its flow was cancelled: running ones asked to stop
        counts["stop_asked"] = int(item.get(F.CHILDREN_STOP_ASKED, 0))
    return counts


def _status(kind: str, item: Item) -> str:
    if kind == StepKind.MAP:
        ended = int(item.get(F.ENDED, 0)) >= int(item.get(F.CHILDREN, 0))
        return "DONE" if ended else "WAITING"
    if kind == StepKind.STEP:
        return str(item.get(F.STATE) or StepState.STARTED.value)
    if kind == StepKind.SLEEP:
        return "SLEEPING"  # its end is ``until``: past it, the flow went on
    if F.SIGNAL_KEY in item:
        return "SIGNALLED"
    if F.TIMED_OUT_AT in item:
        return "TIMED_OUT"
    return "WAITING" if F.UNTIL in item else "SIGNAL_PENDING"
