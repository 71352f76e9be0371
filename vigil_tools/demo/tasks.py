"""The demo's tasks act: the example app's ``send-receipt`` and ordered ``provision-tenant``.

Tasks are enqueued as an application enqueues them (``vigil.tasks``' enqueue) and delivered by
the deployed SQS event source mappings (the emulator's poller) on the demo's stepped clock, so
retries, delays and visibility timeouts take simulated time only. The operator's side is the
``vigil`` CLI, in-process (``tasks redrive``, ``get``, ``list``). What is printed is read back: the
records, the dead letters from their queue, and each delivery's outcome from the functions' own
log lines (one CLI run builds its clients afresh: the application's side keeps one client).
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vigil.contract.tasks import CatalogField
from vigil.tasks.enqueue import TaskClient
from vigil_tools.demo.control import run_cli
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.clients import own_client
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.emulator.queue_mappings import BatchResult, QueueMapping, deliver_together
from vigil_tools.tasks_catalog import tasks_catalog
from vigil_tools.tasks_cli import catalog_of
from vigil_tools.testing.stack import task_dead_letters

RECEIPT = "send-receipt"
TENANT = "provision-tenant"
DELAY = timedelta(minutes=2)
STALL = timedelta(seconds=35)
"""How long the answer to one finish write takes in the timeout act: past send-receipt's 30 s."""
COLUMN = 50


@dataclass
class Poller:
    """The deployed SQS event source mappings, delivered on the demo's stepped clock: each
    queue is polled at the instant its next message can be received (delay, visibility,
    backoff), as Lambda's poller would find it."""

    runtime: LocalLambda
    now: Callable[[], datetime]
    move_to: Callable[[datetime], object]
    mappings: list[QueueMapping]
    batches: list[BatchResult] = field(default_factory=list)

    def run_until(self, end: datetime) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="No application metrics to publish")
            while True:
                due = [(m.next_due(self.now()), m) for m in self.mappings]
                ready = sorted(((d, m) for d, m in due if d is not None and d <= end), key=_first)
                if not ready:
                    break
                moment, mapping = ready[0]
                if moment > self.now():
                    self.move_to(moment)
                # The function's other queues due then (its priority levels) take turns.
                siblings = [m for d, m in ready if m.function == mapping.function and d <= moment]
                self.batches += deliver_together(siblings, self.runtime.invoke, self.now)
        if end > self.now():
            self.move_to(end)


def _first(pair: tuple[datetime, QueueMapping]) -> datetime:
    return pair[0]


@dataclass
class Stall:
    """Botocore hooks on the functions' clients: the answer to the finish write of task
    ``task_id`` (when set) arrives ``by`` late. The write itself is done: a network stall."""

    tick: Callable[[timedelta], object]
    by: timedelta
    task_id: str | None = None
    armed: bool = False
    hits: int = 0

    def before(self, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or b""
        text = body.decode() if isinstance(body, bytes) else str(body)
        self.armed = self.task_id is not None and f'"{self.task_id}"' in text
        self.armed = self.armed and '"SUCCEEDED"' in text

    def after(self, **_: Any) -> None:
        if self.armed:
            self.armed = False
            self.hits += 1
            self.tick(self.by)


@contextmanager
def _hooked(account: LocalAccount, stall: Stall) -> Iterator[Stall]:
    """A client copies its session's hooks when it is made: these are in place before the task
    functions make theirs (at their first run), and idle until ``task_id`` is set."""
    events = account.session.events
    events.register("before-call.dynamodb.UpdateItem", stall.before)
    events.register("after-call.dynamodb.UpdateItem", stall.after)
    try:
        yield stall
    finally:
        stall.task_id = None
        events.unregister("before-call.dynamodb.UpdateItem", stall.before)
        events.unregister("after-call.dynamodb.UpdateItem", stall.after)


def simulate_tasks(
    account: LocalAccount,
    runtime: LocalLambda,
    now: Callable[[], datetime],
    move_to: Callable[[datetime], object],
    *,
    log_dir: Path,
) -> dict[str, Any]:
    """Play the tasks' story, print it, and return what was read back."""
    with _hooked(account, Stall(lambda by: move_to(now() + by), STALL)) as stall:
        return _story(account, runtime, now, move_to, stall, log_dir)


def _story(
    account: LocalAccount,
    runtime: LocalLambda,
    now: Callable[[], datetime],
    move_to: Callable[[datetime], object],
    stall: Stall,
    log_dir: Path,
) -> dict[str, Any]:
    catalog = tasks_catalog(account.session, account.deployed.stack_name)
    poller = Poller(
        runtime,
        now,
        move_to,
        QueueMapping.all_of(account.session, own_client(account.session, "sqs")),
    )
    facts: dict[str, Any] = {}
    # The application's side: vigil.tasks' enqueue, as any Python application calls it.
    client = app_client(account)
    enqueue = client.enqueue
    seen: dict[str, int] = {}

    def cli(*argv: str, echo: bool = True) -> str:
        return run_cli(account, argv, echo=echo)

    def record(task: str, task_id: str) -> dict[str, Any]:
        return dict(client.get(task, task_id).to_json())

    def outcomes(task: str) -> list[tuple[str, str]]:
        """The deliveries since the last look: (id, outcome) from the function's log lines."""
        lines = _deliveries(log_dir / f"{catalog[task][CatalogField.FUNCTION]}.log")
        new = lines[seen.get(task, 0) :]
        seen[task] = len(lines)
        return new

    def say(what: str, answer: str) -> None:
        print(f"  {what:<{COLUMN - 1}} {answer}")  # a long label still gets its space

    print(
        f"\n=== Tasks ===\nThe deployed tasks: {', '.join(sorted(catalog))}, each an SQS queue, "
        "a dead-letter queue and a function."
    )
    start = now()

    # Once per key: a double-clicked checkout enqueues the same order three times (the second
    # and third read the key's record and send nothing).
    order = {"order": "o-1", "email": "ann@example.com", "total": 12}
    ids = [enqueue(RECEIPT, order, key="o-1") for _ in range(3)]
    poller.run_until(now())
    delivered = outcomes(RECEIPT)
    got = record(RECEIPT, "o-1")
    say(
        f"{RECEIPT} o-1 enqueued 3 times ({len(set(ids))} id)",
        f"{got['status']} attempts {got['attempts']}; deliveries: {_tally(delivered)}",
    )
    facts["once"] = {"ids": ids, "status": got["status"], "attempts": got["attempts"]}
    facts["once"]["deliveries"] = [outcome for _, outcome in delivered]

    # A poison payload: InvalidOrder is not worth a retry (no_retry_on): FAILED at once, in the
    # dead-letter queue with its reason.
    poison = enqueue(RECEIPT, {"order": "o-2"})
    queue = catalog[RECEIPT][CatalogField.QUEUE_URL]
    account.session.client("sqs").send_message(QueueUrl=queue, MessageBody="not json {")
    poller.run_until(now() + timedelta(minutes=10))
    got = record(RECEIPT, poison)
    letters = task_dead_letters(account.session, catalog[RECEIPT][CatalogField.DEAD_LETTER_URL])
    say(
        f"{RECEIPT} without an email ({poison[:8]}...)",
        f"{got['status']} after {got['attempts']} attempts ({_tally(outcomes(RECEIPT))})",
    )
    print("  dead-letter queue:")
    for letter in letters:
        print(f"    {letter.id or 'not a task'}: {letter.reason}")
    facts["poison"] = {
        "status": got["status"],
        "attempts": got["attempts"],
        "dead_letters": sorted((d.id or "", d.reason or "") for d in letters),
    }
    first, again = cli("tasks", "redrive", RECEIPT), cli("tasks", "redrive", RECEIPT)
    poller.run_until(now() + timedelta(minutes=10))
    letters = task_dead_letters(account.session, catalog[RECEIPT][CatalogField.DEAD_LETTER_URL])
    got = record(RECEIPT, poison)
    say(
        "redriven, still poison",
        f"{got['status']}, attempts {got['attempts']}; dead letters {len(letters)}",
    )
    facts["redrive"] = {"first": first, "again": again, "dead_letters": len(letters)}

    # A delayed task: not before its time.
    delayed = enqueue(RECEIPT, {**order, "order": "o-3"}, delay=DELAY)
    enqueued_at = now()
    poller.run_until(enqueued_at + DELAY - timedelta(seconds=1))
    before = record(RECEIPT, delayed)["status"]
    poller.run_until(enqueued_at + DELAY + timedelta(seconds=1))
    after = record(RECEIPT, delayed)
    say(
        f"{RECEIPT} o-3 with a delay of {DELAY.total_seconds():g} s",
        f"at +{_mmss(DELAY - timedelta(seconds=1))} {before}, "
        f"at +{_mmss(DELAY + timedelta(seconds=1))} {after['status']} "
        f"(started {after['started_at'][11:19]})",
    )
    outcomes(RECEIPT)
    facts["delayed"] = {"before": before, "after": after["status"]}

    # An ordered group: one tenant's steps, in enqueue order, one at a time.
    actions = ("create", "resize", "delete")
    steps = [
        enqueue(TENANT, {"tenant": "t-1", "action": a}, group="t-1", key=f"t-1-{a}")
        for a in actions
    ]
    poller.run_until(now())
    ran = [task_id for task_id, outcome in outcomes(TENANT) if outcome == "SUCCEEDED"]
    order_ran = [actions[steps.index(task_id)] for task_id in ran if task_id in steps]
    say(f"{TENANT} t-1: {' -> '.join(actions)}", f"ran {' -> '.join(order_ran)}")
    facts["ordered"] = order_ran

    # A Lambda timeout mid-batch: the whole batch comes back, what had finished is DUPLICATE.
    batch = [f"o-{n}" for n in range(11, 15)]
    for task_id in batch:
        enqueue(RECEIPT, {**order, "order": task_id}, key=task_id)
    stall.task_id = batch[1]
    poller.run_until(now())
    stall.task_id = None
    timed_out = [b for b in poller.batches if b.reason and "Timedout" in b.reason]
    first_pass = outcomes(RECEIPT)
    say(
        f"batch {batch[0]}..{batch[-1]}: {batch[1]}'s write answers {STALL.total_seconds():g} s late",
        f"{_tally(first_pass)}; "
        + (f"{timed_out[-1].invocation.error_type}: answer lost" if timed_out else "no timeout"),
    )
    poller.run_until(now() + timedelta(minutes=5))  # the visibility timeout: 6x the timeout
    second_pass = outcomes(RECEIPT)
    say(
        "back: the deferred at once, the finished after the visibility timeout",
        ", ".join(f"{task_id} {outcome}" for task_id, outcome in second_pass),
    )
    facts["timeout"] = {
        "stalled": stall.hits,
        "timed_out": len(timed_out),
        "first": first_pass,
        "second": second_pass,
        "records": {i: (r["status"], r["attempts"]) for i in batch for r in [record(RECEIPT, i)]},
    }

    # Results read back, as an operator or the application would.
    cli("tasks", "get", RECEIPT, "o-1")
    cli("tasks", "list", TENANT)
    facts["summary"] = _summary(account, client, catalog, log_dir)
    facts["seconds_simulated"] = (now() - start).total_seconds()
    return facts


def app_client(account: LocalAccount) -> TaskClient:
    """``vigil.tasks``' client as an application holds it, on the deployed stack."""
    return TaskClient(
        catalog_of(account.session, account.deployed.stack_name),
        sqs=account.session.client("sqs"),
        dynamodb=account.session.client("dynamodb"),
        scheduler=account.session.client("scheduler"),
        s3=account.session.client("s3"),
    )


def _summary(
    account: LocalAccount, client: TaskClient, catalog: dict[str, dict[str, Any]], log_dir: Path
) -> dict[str, Any]:
    """The section's closing lines, counted from the tasks' records and the functions' logs."""
    print("Tasks (from the records and the functions' logs):")
    summary: dict[str, Any] = {}
    for task in sorted(catalog):
        records, _ = client.list(task, limit=1000)
        statuses = Counter(r.status.value for r in records)
        deliveries = Counter(
            o for _, o in _deliveries(log_dir / f"{catalog[task][CatalogField.FUNCTION]}.log")
        )
        letters = task_dead_letters(account.session, catalog[task][CatalogField.DEAD_LETTER_URL])
        ran_twice = sum(1 for r in records if r.status.value == "SUCCEEDED" and r.attempts > 1)
        summary[task] = {
            "statuses": dict(statuses),
            "deliveries": dict(deliveries),
            "dead_letters": len(letters),
            "succeeded_twice": ran_twice,
        }
        print(
            f"  {task}: {len(records)} tasks ({_tally(statuses.items())}); "
            f"deliveries {_tally(deliveries.items())}; {len(letters)} dead letter(s)"
        )
    return summary


def _deliveries(log: Path) -> list[tuple[str, str]]:
    """Every delivery a task function logged, in order: (task id, outcome)."""
    found = []
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if isinstance(message, str) and message.startswith("task ") and "id" in entry:
            found.append((str(entry["id"]), message.removeprefix("task ").upper()))
    return found


def _tally(items: Any) -> str:
    """``[(id, outcome)...]`` or ``Counter.items()`` as ``OUTCOME n, ...``."""
    pairs = list(items)
    counts = (
        Counter(dict(pairs))
        if pairs and isinstance(pairs[0][1], int)
        else Counter(outcome for _, outcome in pairs)
    )
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def _mmss(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 60}:{seconds % 60:02d}"
