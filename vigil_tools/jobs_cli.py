"""``vigil jobs``: the scheduled jobs of a deployed stack, read from its outputs and table.

    vigil [--stage NAME] [--json] jobs list [--stack Vigil] [--status FAILING,LATE] [--prefix P]
                                            [--limit 50] [--next TOKEN]
    vigil jobs history JOB [--limit 20]
    vigil jobs redrive JOB [--limit 100]
    vigil jobs next JOB [-n 5]
    vigil jobs settle JOB TICK --effect NAME --done|--done-rerun|--not-done
    vigil jobs run | pause | resume | backfill ...   (through the API: tools/jobs_control_cli.py)

These talk to AWS directly with the usual credential chain (read the runs table, read and delete
dead-lettered messages, invoke the job's function). A redrive of a ``skip`` job waits for each
tick's invocation before the next (``vigil/jobs/redrive.py`` says why); of an ``allow`` job, it
invokes asynchronously.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from vigil.catalog import read_catalog
from vigil.clock import Clock, system_clock
from vigil.contract.layout import Catalogued
from vigil.contract.schedule import InvalidSchedule
from vigil.jobs.control import JobSpec
from vigil.jobs.listing import FILTERS, jobs_query, list_jobs, row_json
from vigil.jobs.model import JobHead, RunRecord
from vigil.jobs.redrive import Answer, Answered, Redriven, one_at_a_time, redrive_job
from vigil.jobs.store import RunStore
from vigil.listing import InvalidListing
from vigil.settle import NotSettleable
from vigil_tools import jobs_control_cli, listing
from vigil_tools.direct_cli import add_group, add_redrive, positive
from vigil_tools.settle_cli import add_settle, verdict_of
from vigil_tools.stacks import StackNotFound, stack_of, stack_outputs
from vigil_tools.tables import render_table

Invoke = Callable[[str, Any], Any]
"""Invokes a function asynchronously (Lambda answers 202)."""
Call = Callable[[str, Any], Answer]
"""Invokes a function and waits for its answer."""


LAMBDA_MAX_TIMEOUT_S = 900
READ_MARGIN_S = 30
"""How much longer than the function's timeout a synchronous redrive waits for its answer."""


class JobsError(Exception):
    """A problem the operator can fix (unknown job, stack not deployed); exit code 1."""


@dataclass(frozen=True)
class JobsCatalog:
    """The stack's runs table (an output) and its jobs (its jobs catalog, ``vigil.catalog``; a
    stack deployed before the catalogs had a ``JobsCatalog`` output: read when there)."""

    runs_table: str
    jobs: dict[str, dict[str, Any]]

    @classmethod
    def from_stack(cls, session: Any, stack: str) -> JobsCatalog:
        try:
            outputs = stack_outputs(session.client("cloudformation"), stack)
        except StackNotFound as missing:
            raise JobsError(str(missing)) from None
        if "JobRunsTableName" not in outputs:
            raise JobsError(f"stack {stack!r} has no Vigil job outputs: is it a Vigil stack?")
        if "JobsCatalog" in outputs:
            return cls(outputs["JobRunsTableName"], json.loads(outputs["JobsCatalog"]))
        jobs = read_catalog(session.client("ssm"), stack, Catalogued.JOBS).entries
        return cls(outputs["JobRunsTableName"], jobs)

    def job(self, name: str) -> dict[str, str]:
        if name not in self.jobs:
            raise JobsError(f"no job {name!r} in this stack; jobs: {', '.join(sorted(self.jobs))}")
        return self.jobs[name]


def add_parser(groups: Any) -> None:
    commands = add_group(groups, "jobs", help="scheduled jobs: state, history, redrive")
    listing.add_list_arguments(
        commands.add_parser("list", help="every job's latest state, failing first"),
        FILTERS,
    )
    history = commands.add_parser("history", help="a job's ticks, newest first")
    history.add_argument("job", help="the job's name")
    history.add_argument("--limit", type=positive, default=20, help="how many ticks")
    add_redrive(
        commands,
        "job",
        help="hand dead-lettered events back to the job",
        limit="the most dead letters handed back",
    )
    add_settle(
        commands,
        "job",
        "tick",
        done="it happened: the tick SUCCEEDED (the rest of the body does not run)",
        done_rerun="it happened, and the rest must run: the tick is FAILED, for `vigil jobs "
        "run JOB --at TICK` to run the body again, skipping the effect",
        not_done="it did not: the tick is FAILED, for `vigil jobs run JOB --at TICK` to run "
        "it again, effect and all",
    )
    jobs_control_cli.add_commands(commands, positive)


def run(
    args: argparse.Namespace,
    session: Any,
    out: TextIO,
    invoke: Invoke | None = None,
    call: Call | None = None,
    clock: Clock = system_clock,
) -> int:
    catalog = JobsCatalog.from_stack(session, stack_of(args))
    store = RunStore(session.client("dynamodb"), catalog.runs_table)
    if args.command == "list":
        return list_command(args, catalog, store, out, clock())
    job = catalog.job(args.job)
    if args.command == "next":
        last = [r.tick for r in store.history(args.job, limit=20)]
        return jobs_control_cli.print_next(args.job, job, last, args.n, out)
    if args.command == "settle":
        try:
            settled = store.settle(
                args.job, args.tick, args.effect, verdict=verdict_of(args), now=datetime.now(UTC)
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
    send = invoke or _asynchronous(session)
    wait = call or _synchronous(session, int(job.get("timeout_seconds", LAMBDA_MAX_TIMEOUT_S)))
    done = redrive_job(
        session.client("sqs"),
        job,
        send=lambda event: send(job["function"], event),
        call=lambda event: wait(job["function"], event),
        limit=args.limit,
    )
    out.write(_redrive_report(args.job, job, done))
    return 0


def list_command(
    args: argparse.Namespace, catalog: JobsCatalog, store: RunStore, out: TextIO, now: datetime
) -> int:
    """One page of the jobs (``vigil.jobs.listing``): a table, or the API's JSON with ``--json``."""
    try:
        specs = {name: JobSpec.from_json(name, entry) for name, entry in catalog.jobs.items()}
    except (ValueError, KeyError, TypeError, InvalidSchedule) as problem:
        raise JobsError(f"the stack's jobs catalog is not valid: {problem}") from None
    try:
        query = jobs_query(args.status, args.prefix, args.limit, args.next)
        page = list_jobs(
            specs, store.heads_of(n for n in specs if n.startswith(query.prefix)), query, now
        )
    except InvalidListing as problem:
        raise JobsError(f"jobs list: --{problem}") from None
    now_ms = int(now.timestamp() * 1000)
    if getattr(args, "json", False):
        jobs = [row_json(job, now_ms) for job in page.entries]
        listed = {"jobs": jobs, "next": page.next, "matching": page.matching}
        out.write(json.dumps(listed, indent=2) + "\n")
        return 0
    rows = [
        [
            job.spec.name,
            job.state,
            job.head.last_tick if job.head and job.head.last_tick else "-",
            f"tick {job.head.lease_tick} until {job.head.lease_until}"
            if job.head and job.head.lease_tick
            else "-",
            _pause(job.head, now_ms),
        ]
        for job in page.entries
    ]
    out.write(render_table(["JOB", "STATE", "LAST TICK", "LEASE", "PAUSED"], rows) + "\n")
    out.write(listing.footer("jobs list", args, page) + "\n")
    return 0


def _redrive_report(name: str, job: dict[str, str], done: list[Redriven]) -> str:
    if not one_at_a_time(job):
        return f"redrove {len(done)} event(s) of {name} to {job['function']}\n"
    kept = [item for item in done if item.kept]
    lines = [
        f"redrove {len(done)} event(s) of {name} to {job['function']}, one at a time, oldest "
        f"tick first (overlap: {job.get('overlap', 'skip')}): {len(done) - len(kept)} ran, "
        f"{len(kept)} failed again and stay in the dead-letter queue"
    ]
    for item in kept:
        tick = item.event.get("requestPayload", {})
        lines.append(
            f"  {json.dumps(tick)[:120]}: {item.result.error_type}: {item.result.error_message}"
        )
    if kept:
        lines.append(
            f"see `vigil jobs history {name}`; run the redrive again once the cause is fixed"
        )
    return "\n".join(lines) + "\n"


def _asynchronous(session: Any) -> Invoke:
    client = session.client("lambda")
    return lambda function, event: client.invoke(
        FunctionName=function, InvocationType="Event", Payload=json.dumps(event).encode()
    )


def _synchronous(session: Any, timeout_s: int) -> Call:
    """A RequestResponse invoke that waits as long as the function may run, and is never sent
    twice by botocore (a retried invoke after a read timeout would be a second delivery)."""
    client = session.client(
        "lambda",
        config=Config(
            read_timeout=timeout_s + READ_MARGIN_S,
            retries={"total_max_attempts": 1},
        ),
    )

    def call(function: str, event: Any) -> Answer:
        try:
            response = client.invoke(
                FunctionName=function,
                InvocationType="RequestResponse",
                Payload=json.dumps(event).encode(),
            )
        except (BotoCoreError, ClientError) as error:
            return Answered(False, type(error).__name__, str(error))
        return Answered.of(response)

    return call


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
