"""The demo's job-control act: pause, run now, a tick that never arrived, a backfill.

Everything goes through the ``vigil`` CLI and the deployed jobs-control function (in-process), and
each manual tick through the deployed job function and its guard, as on AWS.
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from vigil.clock import iso_seconds
from vigil_tools.api_client import InProcessTransport, Transport
from vigil_tools.cli import main as vigil
from vigil_tools.emulator.account import LocalAccount
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.emulator.scheduler import Schedule
from vigil_tools.lambda_context import LambdaContext


def simulate_control(
    account: LocalAccount,
    runtime: LocalLambda,
    schedules: list[Schedule],
    move_to: Callable[[datetime], object],
    start: datetime,
) -> dict[str, Any]:
    cleanup = next(s for s in schedules if s.name.startswith("Cleanup"))
    audit = next(s for s in schedules if s.name.startswith("JobsControlAudit"))
    facts: dict[str, Any] = {}

    def fire(schedule: Schedule, moment: datetime) -> Any:
        move_to(moment + timedelta(seconds=1))
        result = runtime.invoke_async(
            schedule.target_arn, json.loads(schedule.render_input(moment))
        )
        return result.attempts[-1].payload

    def cli(*argv: str) -> str:
        return run_cli(account, argv, transport)

    def api(event: dict[str, Any], _context: LambdaContext) -> dict[str, Any]:
        answer = runtime.invoke(audit.target_arn, event).payload
        runtime.run_pending()  # Lambda delivers the manual tick the API just queued
        return dict(answer)

    transport = InProcessTransport(api)
    print("\n=== Job control ===")
    t0 = start
    fire(audit, t0)  # the audit's first sight of the jobs: it counts their ticks from now on
    until = iso_seconds(t0 + timedelta(minutes=7))
    cli("jobs", "pause", "cleanup", "--reason", "database migration", "--until", until)
    cli("jobs", "list")
    paused = fire(cleanup, t0 + timedelta(minutes=5))
    print(f"  {paused['tick']} delivered while paused: {paused['outcome']} ({paused['reason']})")
    facts["paused"] = paused["outcome"]
    move_to(t0 + timedelta(minutes=8))
    facts["run_now"] = cli("jobs", "run", "cleanup", "--wait")
    print("  The schedule stops firing (disabled by mistake); 20 minutes pass.")
    found = fire(audit, t0 + timedelta(minutes=30))
    print(f"  audit: never delivered {found['never_delivered']} -> recorded MISSED, alarm")
    facts["never_delivered"] = found["never_delivered"]
    first = iso_seconds(t0 + timedelta(minutes=5))
    last = iso_seconds(t0 + timedelta(minutes=25))
    cli("jobs", "backfill", "cleanup", "--from", first, "--to", last, "--dry-run")
    facts["backfill"] = cli("jobs", "backfill", "cleanup", "--from", first, "--to", last)
    cli("jobs", "next", "daily-report", "-n", "3")
    return facts


def run_cli(
    account: LocalAccount,
    argv: Sequence[str],
    transport: Transport | None = None,
    *,
    echo: bool = True,
) -> str:
    """``vigil ARGV`` in-process against the emulator, printed as typed (with its exit code and
    indented output) unless ``echo`` is off; its output."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        code = vigil(
            list(argv), transport=transport, session=account.session, stdout=out, stderr=err
        )
    text = (out.getvalue() + err.getvalue()).rstrip()
    if echo:
        print(
            f"$ vigil {' '.join(argv)}   (exit {code})\n"
            + "\n".join(f"  {line}" for line in text.splitlines())
        )
    return text
