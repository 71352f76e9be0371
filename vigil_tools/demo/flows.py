"""The demo's flows act: the example app's ``onboard-tenant`` flow (``functions/tasks/
onboard_tenant.py``) on the deployed stack, on the demo's stepped clock.

A crash right after its first step resumes at the next step (the account is not created twice);
its three-day sleep passes on the clock with no invocation (one-time schedule), and one
invocation wakes it; a signal wakes its wait; a tenant that cannot be activated is aborted and
its two finished steps compensated in reverse order (the order each compensation ran in is on its
step's journal item). Every figure printed is read back: the records, their step timelines, the
invocations' outcomes, the function's log lines.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from vigil.contract.tasks import CatalogField
from vigil_tools.demo.tasks import COLUMN, Poller, app_client
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.clients import own_client
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.emulator.queue_mappings import QueueMapping
from vigil_tools.emulator.scheduler import deployed_schedules, fire_one_time, one_time_schedules
from vigil_tools.tasks_catalog import tasks_catalog
from vigil_tools.testing.kill import KillAt, killing

FLOW = "onboard-tenant"
SLEEP = timedelta(days=3)


def _done(step: str) -> Callable[[dict[str, Any]], bool]:
    """The journal write that records ``step`` DONE."""

    def write(params: dict[str, Any]) -> bool:
        item = json.dumps(params.get("Item") or {})
        return f'"{step}"' in item and '"DONE"' in item

    return write


def simulate_flows(
    account: LocalAccount,
    runtime: LocalLambda,
    now: Callable[[], datetime],
    move_to: Callable[[datetime], object],
    *,
    log_dir: Path,
) -> dict[str, Any]:
    """Play the flow's story, print it, and return what was read back."""
    session = account.session
    sqs, scheduler = own_client(session, "sqs"), own_client(session, "scheduler")
    recurring = deployed_schedules(session)
    poller = Poller(runtime, now, move_to, QueueMapping.all_of(session, sqs))
    function = tasks_catalog(session, account.deployed.stack_name)[FLOW][CatalogField.FUNCTION]
    client = app_client(account)

    def run_until(end: datetime) -> None:
        """The queue's deliveries and the one-time schedules (a sleep beyond 15 minutes)."""
        while True:
            due = [o for o in one_time_schedules(scheduler, recurring=recurring) if o.due_at <= end]
            if not due:
                break
            first = min(due, key=lambda o: o.due_at)
            poller.run_until(max(first.due_at, now()))
            fire_one_time(sqs, scheduler, first)
        poller.run_until(end)

    def steps(task_id: str) -> list[dict[str, Any]]:
        return list(client.get(FLOW, task_id).steps or [])

    def say(what: str, answer: str) -> None:
        print(f"  {what:<{COLUMN - 1}} {answer}")

    print(
        f"\n=== Flows ===\n{FLOW}: create the account, provision its workspace, activate, "
        "welcome email, sleep 3 days, wait"
    )
    facts: dict[str, Any] = {}

    # A crash right after the first step was recorded: the retry resumes at the next step.
    with killing(KillAt("PutItem", applied=True, where=_done("create-account"))) as kill:
        acme = client.enqueue(FLOW, {"tenant": "acme"}, key="acme")
        run_until(now())
    run_until(now() + timedelta(minutes=10))  # the message back after its visibility timeout
    record = client.get(FLOW, acme)
    created = _logged(log_dir / f"{function}.log", "account created", "acme")
    attempts = {r["name"]: r.get("attempts") for r in steps(acme) if r["kind"] == "step"}
    say(
        "acme: killed after create-account was recorded",
        f"{record.status} after {record.attempts} attempts; account created {created}x; "
        f"step attempts {attempts}",
    )
    facts["crash"] = {
        "killed": kill.fired,
        "status": record.status.value,
        "attempts": record.attempts,
        "accounts_created": created,
        "step_attempts": attempts,
    }

    # Three days asleep: no invocation until its one-time schedule delivers the wake-up.
    before = len(poller.batches)
    run_until(now() + SLEEP - timedelta(minutes=11))
    asleep = (client.get(FLOW, acme).status.value, len(poller.batches) - before)
    run_until(now() + timedelta(minutes=12))
    awake = (client.get(FLOW, acme).status.value, len(poller.batches) - before)
    # What each invocation since did with its message: deleted (ran), or left for later (BUSY).
    woken = [b for b in poller.batches[before:] if b.function == function]
    outcomes = Counter("left on the queue" if b.failed else "ran" for b in woken)
    say(
        "three days later",
        f"just before: {asleep[0]} ({asleep[1]} invocations); after: {awake[0]} "
        f"({awake[1]} invocation(s) for the wake-up: "
        + ", ".join(f"{n} {what}" for what, n in sorted(outcomes.items()))
        + ")",
    )
    facts["sleep"] = {"before": asleep, "after": awake, "outcomes": dict(outcomes)}

    # A signal wakes the wait.
    sent = client.signal(FLOW, acme, "verified", {"by": "ann"})
    run_until(now())
    done = client.get(FLOW, acme)
    say("signal verified", f"woke={sent.woke}; {done.status.value}: {done.result}")
    facts["signal"] = {"woke": sent.woke, "status": done.status.value, "result": done.result}

    # A tenant that cannot be activated: aborted, its finished steps undone in reverse order.
    blocked = client.enqueue(FLOW, {"tenant": "blocked-co", "plan": "blocked"}, key="blocked-co")
    run_until(now())
    ended = client.get(FLOW, blocked)
    rows = steps(blocked)
    ran = [r["name"] for r in rows if r.get("compensation")]  # in the order the steps ran
    undone = [
        r["name"]
        for r in sorted(rows, key=lambda r: r.get("compensation_order") or 0)
        if r.get("compensation")
    ]
    reverse = len(undone) > 1 and undone == ran[::-1]
    say(
        "blocked-co: activate aborts",
        f"{ended.status.value}; steps done: {', '.join(ran)}; compensated in this order: "
        f"{', '.join(undone)} ({'the reverse' if reverse else 'NOT the reverse'})",
    )
    facts["compensation"] = {
        "status": ended.status.value,
        "steps": ran,
        "compensated": undone,
        "reverse": reverse,
    }

    print("  the timeline of acme, as `vigil tasks get` shows it:")
    for row in steps(acme):
        finished = row.get("finished_at") or ""
        print(f"    {row['name']:<20} {row['kind']:<6} {row['status']:<10} {finished}")
    records, _ = client.list(FLOW, limit=100)
    statuses = Counter(r.status.value for r in records)
    facts["summary"] = dict(statuses)
    print(
        "Flows (from the records): "
        + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
        + f"; steps of acme run more than once: "
        f"{sum(1 for a in attempts.values() if (a or 0) > 1)}"
    )
    return facts


def _logged(log: Path, message: str, tenant: str) -> int:
    """How often the function logged ``message`` for ``tenant`` (every invocation's lines)."""
    count = 0
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("message") == message:
            count += entry.get("tenant") == tenant
    return count
