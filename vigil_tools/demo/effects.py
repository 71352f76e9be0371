"""The demo's effects act: a hung run's late write refused, and an email neither lost nor sent twice.

Both through the deployed example jobs, as on AWS. ``cleanup`` deletes idle sessions of the app's
``Sessions`` table through ``run.fenced`` and ends by writing its summary item: a run frozen after
its claim (the testing kit's :class:`~vigil_tools.testing.hold.Parked`) outlives its lease, the
next tick runs, and the frozen run's late write is refused. ``daily-report`` emails its report
through ``run.once``: the function is killed right after the email left and before its completion
was written (a fault injected on that very write), Lambda retries, and the retry finds the intent
without its completion: UNCERTAIN, no second email, until ``vigil jobs settle``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.client import BaseClient

from vigil.clock import iso_seconds
from vigil.contract.effects import FENCE_ATTRIBUTE
from vigil_tools.demo.control import run_cli
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.emulator.scheduler import Schedule, occurrences
from vigil_tools.emulator.template import logical_id_of
from vigil_tools.testing.hold import Parked

SUMMARY = "#cleanup"
"""The cleanup job's summary item (``jobs.cleanup.LAST_RUN``)."""
EMAIL = "report-email"
"""The daily report's effect (``jobs.daily_report.REPORT_EMAIL``)."""


class FunctionKilled(Exception):
    """The demo's fault: the function died between its email and the email's completion."""


@contextmanager
def killed_after_the_email() -> Iterator[None]:
    """Kills the function (once) as it writes the completion of :data:`EMAIL` to its journal:
    the email has gone out, the record does not say so. On every client (botocore gives each
    client its own copy of the session's event hooks, so a hook added now would miss the
    function's clients made at its cold start)."""
    made = BaseClient._make_api_call
    armed = [True]

    def request(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        names = set((params.get("ExpressionAttributeNames") or {}).values())
        values = (params.get("ExpressionAttributeValues") or {}).values()
        done = any(v.get("M", {}).get("state") == {"S": "DONE"} for v in values)
        if armed[0] and operation == "UpdateItem" and EMAIL in names and done:
            armed[0] = False
            raise FunctionKilled("killed after the email left, before its completion was written")
        return made(client, operation, params)

    BaseClient._make_api_call = request  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseClient._make_api_call = made  # type: ignore[method-assign]


def simulate_effects(
    account: LocalAccount,
    runtime: LocalLambda,
    schedules: list[Schedule],
    now: Callable[[], datetime],
    move_to: Callable[[datetime], object],
    log_dir: Path,
) -> dict[str, Any]:
    print("\n=== Effects ===")
    facts = {"fenced": _hung_run(account, runtime, schedules, now, move_to)}
    facts["uncertain"] = _killed_after_the_email(account, runtime, schedules, now, move_to, log_dir)
    return facts


def _hung_run(
    account: LocalAccount,
    runtime: LocalLambda,
    schedules: list[Schedule],
    now: Callable[[], datetime],
    move_to: Callable[[datetime], object],
) -> dict[str, Any]:
    dynamodb = account.session.client("dynamodb")
    stack = account.deployed.stack_name
    table = account.physical_id(
        logical_id_of(account.synth, "AWS::DynamoDB::Table", f"{stack}/Sessions/")
    )
    cleanup = next(s for s in schedules if s.name.startswith("Cleanup"))
    first, second = list(occurrences(cleanup, now(), now() + timedelta(minutes=10)))[:2]
    idle = int((first - timedelta(days=8)).timestamp())
    dynamodb.put_item(TableName=table, Item={"id": {"S": "s-idle"}, "last_seen": {"N": str(idle)}})

    def deliver(moment: datetime) -> Any:
        return runtime.invoke_async(cleanup.target_arn, json.loads(cleanup.render_input(moment)))

    move_to(first + timedelta(seconds=1))
    held = Parked(lambda: deliver(first))
    held.start()
    print(f"  {first:%H:%M} cleanup claims its tick, then hangs (a frozen container)")
    move_to(second + timedelta(seconds=1))
    successor = deliver(second).attempts[-1].payload
    print(
        f"  {second:%H:%M} cleanup: the hung run's lease is over; the next tick runs "
        f"(token {successor['fencing_token']}): {successor['outcome']}"
    )
    late = held.release().attempts[-1].payload
    print(
        f"  the hung run wakes and writes its summary: refused (Fenced); its tick ends "
        f"{late['outcome']}, superseded, not retried"
    )
    item = dynamodb.get_item(TableName=table, Key={"id": {"S": SUMMARY}})["Item"]
    print(
        f"  Sessions[{SUMMARY!r}] holds tick {item['tick']['S']}'s summary (deleted "
        f"{item['deleted']['N']} idle session, fence {item[FENCE_ATTRIBUTE]['S']})"
    )
    return {
        "successor": successor["outcome"],
        "late": late["outcome"],
        "summary_tick": item["tick"]["S"],
        "successor_tick": iso_seconds(second),
    }


def _killed_after_the_email(
    account: LocalAccount,
    runtime: LocalLambda,
    schedules: list[Schedule],
    now: Callable[[], datetime],
    move_to: Callable[[datetime], object],
    log_dir: Path,
) -> dict[str, Any]:
    report = next(s for s in schedules if s.name.startswith("DailyReport"))
    moment = next(iter(occurrences(report, now(), now() + timedelta(days=4))))
    tick = iso_seconds(moment)
    move_to(moment + timedelta(seconds=1))
    with killed_after_the_email():
        result = runtime.invoke_async(report.target_arn, json.loads(report.render_input(moment)))
    outcomes = [a.payload["outcome"] if a.ok else a.error_type for a in result.attempts]
    emails = _emails(log_dir, report.target_arn, tick)
    print(
        f"  {moment:%a %H:%M} daily-report emails its report and is killed before recording it; "
        f"deliveries: {' -> '.join(str(o) for o in outcomes)}; emails sent: {emails}"
    )
    history = run_cli(account, ["jobs", "history", "daily-report"], echo=False)
    line = next((row for row in history.splitlines() if tick in row), "")
    print(f"  {' '.join(line.split())}")
    settled = run_cli(
        account, ["jobs", "settle", "daily-report", tick, "--effect", EMAIL, "--done"]
    )
    return {"outcomes": outcomes, "emails": emails, "history": line, "settled": settled}


def _emails(log_dir: Path, function_arn: str, tick: str) -> int:
    """The report emails the function's log says it sent for the day before ``tick``."""
    log = log_dir / f"{function_arn.rsplit(':', 1)[-1]}.log"
    day = (datetime.fromisoformat(tick.replace("Z", "+00:00")) - timedelta(days=1)).date()
    lines = log.read_text().splitlines() if log.exists() else []
    sent = f'"day":"{day.isoformat()}"'
    return sum(1 for line in lines if '"report emailed"' in line and sent in line)
