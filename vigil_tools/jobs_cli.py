"""``vigil jobs``: the scheduled jobs of a deployed stack, read from its outputs and table.

    vigil [--stage NAME] jobs list [--stack Vigil]
    vigil jobs history JOB [--limit 20]
    vigil jobs redrive JOB [--limit 100]
    vigil jobs next JOB [-n 5]
    vigil jobs settle JOB TICK --effect NAME --done|--not-done
    vigil jobs run | pause | resume | backfill ...   (through the API: tools/jobs_control_cli.py)

These talk to AWS directly with the usual credential chain (read the runs table, read and delete
dead-lettered messages, invoke the job's function asynchronously).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from vigil.jobs.model import JobHead, RunRecord
from vigil.jobs.store import RunStore
from vigil.settle import NotSettleable
from vigil_tools import jobs_control_cli
from vigil_tools.redrive import redrive
from vigil_tools.settle_cli import add_settle
from vigil_tools.stacks import StackNotFound, stack_of, stack_outputs
from vigil_tools.tables import render_table

Invoke = Callable[[str, Any], Any]


class JobsError(Exception):
    """A problem the operator can fix (unknown job, stack not deployed); exit code 1."""


@dataclass(frozen=True)
class JobsCatalog:
    runs_table: str
    jobs: dict[str, dict[str, str]]

    @classmethod
    def from_stack(cls, cloudformation: Any, stack: str) -> JobsCatalog:
        try:
            outputs = stack_outputs(cloudformation, stack)
        except StackNotFound as missing:
            raise JobsError(str(missing)) from None
        if "JobRunsTableName" not in outputs or "JobsCatalog" not in outputs:
            raise JobsError(f"stack {stack!r} has no Vigil job outputs: is it a Vigil stack?")
        return cls(outputs["JobRunsTableName"], json.loads(outputs["JobsCatalog"]))

    def job(self, name: str) -> dict[str, str]:
        if name not in self.jobs:
            raise JobsError(f"no job {name!r} in this stack; jobs: {', '.join(sorted(self.jobs))}")
        return self.jobs[name]


def add_parser(groups: Any) -> None:
    jobs = groups.add_parser("jobs", help="scheduled jobs: state, history, redrive")
    jobs.add_argument("--stack", help="the deployed stack's name (default: the --stage's)")
    commands = jobs.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every job's latest state")
    history = commands.add_parser("history", help="a job's ticks, newest first")
    history.add_argument("job", help="the job's name")
    history.add_argument("--limit", type=_positive, default=20, help="how many ticks")
    again = commands.add_parser("redrive", help="hand dead-lettered events back to the job")
    again.add_argument("job", help="the job's name")
    again.add_argument(
        "--limit", type=_positive, default=100, help="the most dead letters handed back"
    )
    add_settle(
        commands,
        "job",
        "tick",
        done="it happened: the tick SUCCEEDED",
        not_done="it did not: the tick is FAILED, to run again",
    )
    jobs_control_cli.add_commands(commands, _positive)


def run(
    args: argparse.Namespace,
    session: Any,
    out: TextIO,
    invoke: Invoke | None = None,
) -> int:
    catalog = JobsCatalog.from_stack(session.client("cloudformation"), stack_of(args))
    store = RunStore(session.client("dynamodb"), catalog.runs_table)
    if args.command == "list":
        heads = {head.job: head for head in store.heads()}
        now_ms = int(time.time() * 1000)
        rows = [
            [
                name,
                head.last_tick if head else "-",
                head.last_status.value if head and head.last_status else "-",
                f"tick {head.lease_tick} until {head.lease_until}"
                if head and head.lease_tick
                else "-",
                _pause(head, now_ms),
            ]
            for name in sorted(catalog.jobs)
            for head in [heads.get(name)]
        ]
        header = ["JOB", "LAST TICK", "LAST STATUS", "LEASE", "PAUSED"]
        out.write(render_table(header, rows) + "\n")
        return 0
    job = catalog.job(args.job)
    if args.command == "next":
        last = [r.tick for r in store.history(args.job, limit=20)]
        return jobs_control_cli.print_next(args.job, job, last, args.n, out)
    if args.command == "settle":
        try:
            settled = store.settle(
                args.job, args.tick, args.effect, done=args.done, now=datetime.now(UTC)
            )
        except NotSettleable as refused:
            raise JobsError(str(refused)) from None
        note = settled.detail or settled.error_message or ""
        out.write(f"{args.job} tick {args.tick}: {settled.status.value}: {note}\n")
        return 0
    if args.command == "history":
        rows = [
            [
                r.tick,
                r.status.value,
                str(r.attempts),
                str(r.fencing_token or "-"),
                str(r.duration_ms if r.duration_ms is not None else "-"),
                _detail(r),
            ]
            for r in store.history(args.job, limit=args.limit)
        ]
        header = ["TICK", "STATUS", "ATTEMPTS", "TOKEN", "MS", "DETAIL"]
        out.write(render_table(header, rows) + "\n")
        return 0
    lambda_client = session.client("lambda")
    send = invoke or (
        lambda function, event: lambda_client.invoke(
            FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode()
        )
    )
    done = redrive(
        session.client("sqs"),
        job["failed_runs"],
        lambda event: send(job["function"], event),
        limit=args.limit,
    )
    out.write(f"redrove {len(done)} event(s) of {args.job} to {job['function']}\n")
    return 0


def _detail(record: RunRecord) -> str:
    if record.uncertain_effect:
        return f"effect {record.uncertain_effect!r} begun, never recorded done: settle it"
    if record.detail:
        return record.detail
    return f"{record.error_type}: {record.error_message}" if record.error_type else ""


def _pause(head: JobHead | None, now_ms: int) -> str:
    """Who paused, why, since and until when; "-" when not paused."""
    if head is None or not head.paused_at(now_ms):
        return "-"
    until = head.paused_until or "resumed"
    return f"by {head.paused_by} since {head.paused_since} until {until}: {head.pause_reason}"


def _positive(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
