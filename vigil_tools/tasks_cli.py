"""``vigil tasks``: enqueue, read, cancel and redrive a deployed (or local) stack's tasks.

    vigil tasks enqueue TASK [--payload JSON|@file.json] [--key K] [--delay S | --at ISO] [--group G]
        [--priority LEVEL]
    vigil tasks enqueue-many TASK FILE.jsonl [--group G] [--priority LEVEL]
        (one {"payload", "key"} a line)
    vigil tasks get TASK ID
    vigil tasks list TASK [--status FAILED] [--limit 50] [--next TOKEN]
    vigil tasks summary [--status FAILING,BUSY,IDLE] [--prefix P] [--limit 50] [--next TOKEN]
    vigil tasks stuck [TASK]            (not ended past max_duration: the task-stuck alarm's)
    vigil tasks cancel TASK ID          (QUEUED: CANCELLED now; RUNNING: asked to stop)
    vigil tasks redrive TASK [--limit 100]
    vigil tasks settle TASK ID --effect NAME --done|--done-rerun|--not-done

Like ``vigil jobs``, these talk to AWS directly with the usual credential chain: the stack's
tasks catalog (``vigil.catalog``) says where each task's queue and records are, and ``vigil.tasks`` does the
rest exactly as an application would (``enqueue`` is the same call, with the same checks).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from vigil.contract.tasks import TaskStatus
from vigil.listing import InvalidListing
from vigil.settle import NotSettleable
from vigil.tasks.audit import AuditIncomplete, stuck
from vigil.tasks.bulk import ItemStatus
from vigil.tasks.catalog import Catalog
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.flows.settle import NO_RESULT
from vigil.tasks.queues import TaskQueue
from vigil.tasks.redrive import redrive
from vigil.tasks.store import TaskRecord
from vigil_tools import tasks_summary
from vigil_tools.direct_cli import add_group, add_redrive, positive
from vigil_tools.settle_cli import add_settle, verdict_of
from vigil_tools.stacks import StackNotFound, stack_of
from vigil_tools.tables import render_table
from vigil_tools.tasks_catalog import tasks_catalog


class TasksError(Exception):
    """A problem the operator can fix (no such stack, a stack without tasks); exit code 1."""


def catalog_of(session: Any, stack: str) -> Catalog:
    """The deployed stack's tasks, from its tasks catalog."""
    try:
        entries = tasks_catalog(session, stack)
    except StackNotFound as missing:
        raise TasksError(str(missing)) from None
    if not entries:
        raise TasksError(f"stack {stack!r} declares no tasks (its tasks catalog is empty)")
    return Catalog.parse(json.dumps(entries))


def add_parser(groups: Any) -> None:
    commands = add_group(groups, "tasks", help="tasks: enqueue, read back, cancel, redrive")
    enqueue = commands.add_parser("enqueue", help="enqueue a task; prints its id")
    enqueue.add_argument("task", help="the task's name")
    enqueue.add_argument("--payload", default="{}", help="a JSON object, or @file.json")
    enqueue.add_argument("--key", help="the task's id: the same key never runs twice")
    when = enqueue.add_mutually_exclusive_group()
    when.add_argument("--delay", type=float, help="seconds to wait before it runs")
    when.add_argument("--at", type=_moment, help="when to run it (ISO 8601 with a zone)")
    # Not ``dest="group"``: that is the top-level parser's command group.
    enqueue.add_argument(
        "--group", dest="task_group", help="an ordered task's group (run in order within it)"
    )
    many = commands.add_parser(
        "enqueue-many",
        help="enqueue many tasks from a JSON-lines file (batches); prints each item's outcome",
    )
    many.add_argument("task", help="the task's name")
    many.add_argument(
        "file", help='JSON lines, one task each: {"payload": {...}, "key": "..."} (- for stdin)'
    )
    many.add_argument("--group", dest="task_group", help="an ordered task's group (for every item)")
    for parser in (enqueue, many):
        parser.add_argument(
            "--priority", help="one of the task's declared priority levels (default: normal)"
        )
    get = commands.add_parser("get", help="one task's record")
    get.add_argument("task", help="the task's name")
    get.add_argument("id", help="the task's id (its key)")
    listing = commands.add_parser("list", help="a task's records")
    listing.add_argument("task", help="the task's name")
    listing.add_argument(
        "--status",
        type=str.upper,
        choices=[s.value for s in TaskStatus],
        help="only records in this status",
    )
    listing.add_argument("--limit", type=positive, default=50, help="records per page")
    listing.add_argument("--next", help="the page token a previous list printed")
    tasks_summary.add_parser(commands)
    stuck_tasks = commands.add_parser(
        "stuck",
        help="tasks (flows) not ended past their max_duration: what the task-stuck alarm counts",
    )
    stuck_tasks.add_argument(
        "task", nargs="?", help="one task (default: every task that declares max_duration)"
    )
    signal = commands.add_parser(
        "signal", help="signal a flow's run.wait_for(name): kept until it waits, woken if it does"
    )
    signal.add_argument("task", help="the flow's task name")
    signal.add_argument("id", help="the flow's id (its key)")
    signal.add_argument("name", help="the wait's name")
    signal.add_argument("--payload", default="null", help="JSON, or @file.json")
    signal.add_argument(
        "--key", help="the signal's idempotency key (default: the payload's digest)"
    )
    cancel = commands.add_parser(
        "cancel", help="cancel a task: QUEUED ends now, RUNNING is asked to stop"
    )
    cancel.add_argument("task", help="the task's name")
    cancel.add_argument("id", help="the task's id (its key)")
    add_redrive(
        commands,
        "task",
        help="send a task's dead letters back to its queue",
        limit="the most dead letters sent back",
    )
    add_settle(
        commands,
        "task",
        "id",
        done="it happened: the task SUCCEEDED (the rest of the body does not run)",
        done_rerun="it happened, and the rest must run: FAILED, for `vigil tasks redrive` to "
        "run the body again, skipping the effect",
        not_done="it did not: FAILED, for `vigil tasks redrive` to run it again, effect and all",
    )
    commands.choices["settle"].add_argument(
        "--result",
        help="a flow's step:<name> settled done: the step's result (JSON, or @file.json); "
        "for a step, --done is --done-rerun (the flow resumes after the redrive)",
    )


def run(args: argparse.Namespace, session: Any, out: TextIO, *, as_json: bool = False) -> int:
    catalog = catalog_of(session, stack_of(args))
    if args.command == "summary":
        try:
            tasks_summary.run(args, catalog, session.client("sqs"), out, as_json=as_json)
        except InvalidListing as problem:
            raise TasksError(f"tasks summary: --{problem}") from None
        return 0
    client = TaskClient(
        catalog,
        sqs=session.client("sqs"),
        dynamodb=session.client("dynamodb"),
        scheduler=session.client("scheduler"),
        s3=session.client("s3"),
    )
    if args.command == "enqueue":
        task_id = client.enqueue(
            args.task,
            _payload(args.payload),
            key=args.key,
            delay=args.delay,
            at=args.at,
            group=args.task_group,
            priority=args.priority,
        )
        out.write(f"{task_id}\n")
        return 0
    if args.command == "enqueue-many":
        outcomes = client.enqueue_many(
            args.task, _lines(args.file, sys.stdin), group=args.task_group, priority=args.priority
        )
        if as_json:
            out.write(json.dumps([o.to_json() for o in outcomes], indent=2) + "\n")
        else:
            rows = [[str(o.index), o.id, o.status.value, o.reason] for o in outcomes]
            out.write(render_table(["ITEM", "ID", "OUTCOME", "REASON"], rows) + "\n")
        # Refused items were not enqueued: a script must see it.
        return 1 if any(o.status is ItemStatus.REFUSED for o in outcomes) else 0
    if args.command == "get":
        record = client.get(args.task, args.id)
        out.write((json.dumps(record.to_json(), indent=2) if as_json else _details(record)) + "\n")
        return 0
    if args.command == "list":
        records, page = client.list(args.task, args.status, limit=args.limit, page=args.next)
        if as_json:
            listed = {"tasks": [r.to_json() for r in records], "next": page}
            out.write(json.dumps(listed, indent=2) + "\n")
            return 0
        out.write(_table(records) + "\n")
        if page:
            out.write(f"more: vigil tasks list {args.task} --next {page}\n")
        return 0
    if args.command == "stuck":
        _stuck(catalog, client, args.task, out, as_json=as_json)
        return 0
    if args.command == "signal":
        sent = client.signal(args.task, args.id, args.name, _payload(args.payload), key=args.key)
        woke = "woke it" if sent.woke else "kept until it waits"
        out.write(
            (
                json.dumps(sent.to_json())
                if as_json
                else f"{sent.task} {sent.id}: {sent.name} {woke}"
            )
            + "\n"
        )
        return 0
    if args.command == "cancel":
        record = client.cancel(args.task, args.id, by=_caller(session))
        asked = " (asked to stop: it ends at its next check)" if record.cancel_requested_at else ""
        out.write(f"{record.task} {record.id}: {record.status.value}{asked}\n")
        return 0
    spec = catalog.spec(args.task)
    if args.command == "settle":
        try:
            settled = client.settle(
                spec.name,
                args.id,
                args.effect,
                verdict=verdict_of(args),
                result=NO_RESULT if args.result is None else _payload(args.result, "--result"),
            )
        except NotSettleable as refused:
            raise TasksError(str(refused)) from None
        note = settled.error_message or ""
        out.write(f"{settled.task} {settled.id}: {settled.status.value} {note}".rstrip() + "\n")
        return 0
    sqs = session.client("sqs")
    done = redrive(
        sqs,
        TaskQueue(sqs, spec.queue_url, spec.dead_letter_url, spec.priority_queues),
        task=spec.name,
        limit=args.limit,
    )
    out.write(f"redrove {len(done.moved)} task(s) of {spec.name} to its queue\n")
    for message_id, why in done.kept:
        out.write(f"kept {message_id} in the dead-letter queue: not a task ({why})\n")
    return 0


def _stuck(
    catalog: Catalog, client: TaskClient, task: str | None, out: TextIO, *, as_json: bool
) -> None:
    """The tasks audit's own finding, read now (the ended records it would tidy are left)."""
    specs = {task: catalog.spec(task)} if task else dict(catalog)
    if task and specs[task].max_duration is None:
        raise TasksError(f"task {task} declares no max_duration: it is never stuck")
    try:
        found = stuck(specs, client.store, datetime.now(UTC), clear_ended=False)
    except AuditIncomplete as incomplete:
        raise TasksError(str(incomplete)) from None
    if as_json:
        out.write(json.dumps([asdict(late) for late in found], indent=2) + "\n")
        return
    rows = [
        [s.task, s.id, s.status, s.deadline, s.started_at or "-", s.wake_at or "-"] for s in found
    ]
    headers = ["TASK", "ID", "STATUS", "DEADLINE", "LAST STARTED", "WAKES"]
    out.write((render_table(headers, rows) if rows else "no task is stuck") + "\n")


def _caller(session: Any) -> str:
    """Who cancels, for the record's audit: the credentials' ARN (STS), or ``vigil-cli``."""
    try:
        return str(session.client("sts").get_caller_identity()["Arn"])
    except Exception:
        return "vigil-cli"


def _table(records: list[TaskRecord]) -> str:
    rows = [
        [
            r.id,
            r.status.value,
            str(r.attempts),
            r.enqueued_at or "-",
            r.finished_at or "-",
            f"{r.error_type}: {r.error_message}" if r.error_type else _short(r.result),
        ]
        for r in records
    ]
    return render_table(["ID", "STATUS", "ATTEMPTS", "ENQUEUED", "FINISHED", "RESULT"], rows)


def _details(record: TaskRecord) -> str:
    fields = {k: v for k, v in record.to_json().items() if v not in (None, "") and k != "steps"}
    width = max(len(k) for k in fields)
    text = "\n".join(f"{k.ljust(width)}  {_short(v, 200)}" for k, v in fields.items())
    if not record.steps:
        return text
    rows = [
        [
            str(step.get("seq") or "-"),
            step["name"],
            step["kind"],
            step["status"],
            str(step.get("attempts") or "-"),
            step.get("started_at") or "-",
            step.get("finished_at") or "-",
            step.get("until") or "-",
            str(step.get("result_bytes") if "result_bytes" in step else "-"),
            step.get("compensation") or step.get("error") or "",
        ]
        for step in record.steps
    ]
    headers = ["#", "STEP", "KIND", "STATUS", "ATTEMPTS", "STARTED", "FINISHED", "UNTIL", "BYTES"]
    return text + "\n\n" + render_table([*headers, "NOTE"], rows)


def _short(value: Any, limit: int = 60) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _payload(raw: str, flag: str = "--payload") -> Any:
    try:
        text = Path(raw[1:]).read_text(encoding="utf-8") if raw.startswith("@") else raw
    except (OSError, UnicodeDecodeError) as error:
        raise TasksError(f"{flag} {raw}: cannot read it: {error}") from None
    try:
        return json.loads(text)
    except ValueError as error:
        raise TasksError(f"{flag} is not JSON: {error}") from None


def _lines(path: str, stdin: TextIO) -> list[tuple[Any, str | None]]:
    """``(payload, key)`` per line of a JSON-lines file; a bad line is refused by its number,
    before anything is sent."""
    try:
        text = stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TasksError(f"{path}: cannot read it: {error}") from None
    items: list[tuple[Any, str | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as error:
            raise TasksError(f"{path} line {number}: not JSON: {error}") from None
        if not isinstance(entry, dict) or "payload" not in entry or set(entry) - {"payload", "key"}:
            raise TasksError(
                f'{path} line {number}: expected {{"payload": {{...}}, "key": "..."}} (key optional)'
            )
        items.append((entry["payload"], entry.get("key")))
    return items


def _moment(raw: str) -> datetime:
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {raw!r}") from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{raw!r} has no time zone (add Z or +01:00)")
    return moment
