"""``vigil jobs run | pause | resume | backfill | next``: steering scheduled jobs.

    vigil jobs run JOB [--at TIME] [--overlap allow] [--wait]
    vigil jobs pause JOB --reason TEXT [--until TIME]
    vigil jobs resume JOB
    vigil jobs backfill JOB --from T1 --to T2 [--concurrency N] [--overlap allow] [--dry-run]
    vigil jobs next JOB [-n 5]

The first four go through the management API (SigV4, like ``vigil observers``), so the caller's
identity is recorded and the checks run server-side; ``next`` is computed here, from the deployed
schedule, with the same evaluator the audit uses. TIME is ISO 8601 with a zone
(``2026-11-22T12:00:00Z``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from vigil.clock import iso_seconds
from vigil.contract.schedule import Schedule
from vigil.jobs.control import scheduled_anchor
from vigil.jobs.events import tick_key
from vigil.jobs.model import FINAL_STATUSES, RunStatus
from vigil.jobs.model import STANDING_STATUSES as STANDING
from vigil_tools.api_client import ApiError
from vigil_tools.tables import render_table

API_COMMANDS = frozenset({"run", "pause", "resume", "backfill"})
FINAL = FINAL_STATUSES | {RunStatus.FAILED}
"""What ``--wait`` stops at: the model's final statuses, and FAILED once no retry is to come."""
Call = Callable[..., Any]
"""``call(method, path, query=..., body=...)``: one API request; raises on a refusal."""


class RunNotFinished(Exception):
    pass


def add_commands(commands: Any, positive: Callable[[str], int]) -> None:
    run = commands.add_parser("run", help="run a job now, or one of its ticks again")
    run.add_argument("job", help="the job's name")
    run.add_argument("--at", help="a scheduled tick to run (e.g. one recorded MISSED or FAILED)")
    run.add_argument("--overlap", choices=["allow"], help="ignore the job's skip policy")
    run.add_argument("--wait", action="store_true", help="wait until the tick is final")
    run.add_argument("--timeout", type=positive, default=900, help="seconds --wait waits")
    run.add_argument("--idempotency-key", help="retrying with the same key starts no second run")
    pause = commands.add_parser("pause", help="pause a job: deliveries are recorded PAUSED")
    pause.add_argument("job", help="the job's name")
    pause.add_argument("--reason", required=True, help="why: recorded with the pause")
    pause.add_argument("--until", help="when the pause ends by itself")
    commands.add_parser("resume", help="end a job's pause").add_argument(
        "job", help="the job's name"
    )
    backfill = commands.add_parser("backfill", help="run past ticks that never succeeded")
    backfill.add_argument("job", help="the job's name")
    backfill.add_argument(
        "--from", dest="start", required=True, help="the earliest tick (ISO 8601)"
    )
    backfill.add_argument("--to", dest="end", required=True, help="the latest tick (ISO 8601)")
    backfill.add_argument("--concurrency", type=positive, default=1, help="ticks run at once")
    backfill.add_argument("--overlap", choices=["allow"], help="ignore the job's skip policy")
    backfill.add_argument("--dry-run", action="store_true", help="list the ticks, run nothing")
    backfill.add_argument("--timeout", type=positive, default=900, help="seconds per tick")
    upcoming = commands.add_parser("next", help="a job's next fire times")
    upcoming.add_argument("job", help="the job's name")
    upcoming.add_argument("-n", type=positive, default=5, help="how many fire times")


def run_api_command(
    args: argparse.Namespace,
    call: Call,
    out: TextIO,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    job = args.job
    if args.command == "pause":
        # An empty --until reaches the API, which refuses it: it must not mean "no end".
        end = {"until": args.until} if args.until is not None else {}
        body = {"reason": args.reason, **end}
        state = call("POST", f"/jobs/{job}/pause", body=body)
        pause = state["pause"] or {}
        until = pause.get("until") or "resumed"
        out.write(f"paused {job} until {until} by {pause.get('by')}: {pause.get('reason')}\n")
        return 0
    if args.command == "resume":
        call("POST", f"/jobs/{job}/resume", body={})
        out.write(f"resumed {job}\n")
        return 0
    if args.command == "run":
        body = {k: v for k, v in (("at", args.at), ("overlap", args.overlap)) if v}
        before = _record_or_none(call, job, _key(args.at)) if args.at else None
        key = args.idempotency_key
        headers = {"Idempotency-Key": key} if key else None
        accepted = call("POST", f"/jobs/{job}/runs", body=body, headers=headers)
        out.write(f"accepted: {job} tick {accepted['tick']} ({accepted['trigger']})\n")
        if not args.wait:
            return 0
        record = wait_for(call, job, accepted["tick"], args.timeout, sleep, before)
        out.write(f"{job} {record['tick']}: {_outcome(record)}\n")
        return 0 if record["status"] == "SUCCEEDED" else 1
    return _backfill(args, call, out, sleep)


def wait_for(
    call: Call,
    job: str,
    tick: str,
    timeout: float,
    sleep: Callable[[float], None],
    before: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Poll the tick's record until it is final (a FAILED attempt Lambda will retry is not) and,
    for a tick run again, until it is no longer the record it was before the request (a
    standing one, SUCCEEDED, UNCERTAIN or FENCED, is the answer either way: a rerun leaves it)."""
    waited = 0.0
    while True:
        record = _record_or_none(call, job, tick)
        final = (
            record is not None
            and record["status"] in FINAL
            and not record.get("retries_left")  # absent from an older API: final as before
        )
        if final and record is not None and (record != before or record["status"] in STANDING):
            return record
        if waited >= timeout:
            raise RunNotFinished(f"{job} tick {tick} not final after {timeout:.0f} s")
        sleep(2.0)
        waited += 2.0


def _record_or_none(call: Call, job: str, tick: str) -> dict[str, Any] | None:
    try:
        return dict(call("GET", f"/jobs/{job}/runs/{tick}"))
    except ApiError as error:
        if error.code == "tick_not_found":
            return None
        raise


def _backfill(
    args: argparse.Namespace, call: Call, out: TextIO, sleep: Callable[[float], None]
) -> int:
    job = args.job
    plan = call("GET", f"/jobs/{job}/backfill", query={"from": args.start, "to": args.end})
    ticks = [t["tick"] for t in plan["ticks"]]
    out.write(
        f"{job}: {plan['expected']} expected tick(s) from {plan['from']} to {plan['to']}, "
        f"{len(ticks)} to run (none SUCCEEDED, UNCERTAIN or FENCED)\n"
    )
    if args.dry_run or not ticks:
        for entry in plan["ticks"]:
            out.write(f"  would run {entry['tick']} (now {entry['status'] or 'no record'})\n")
        return 0
    done: list[dict[str, Any]] = []

    def one(tick: str) -> dict[str, Any]:
        body = {"at": tick, "backfill": True, **({"overlap": args.overlap} if args.overlap else {})}
        before = _record_or_none(call, job, tick)
        call("POST", f"/jobs/{job}/runs", body=body)
        return wait_for(call, job, tick, args.timeout, sleep, before)

    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for record in pool.map(one, ticks):
            done.append(record)
            out.write(f"  [{len(done)}/{len(ticks)}] {record['tick']} {_outcome(record)}\n")
    succeeded = sum(1 for r in done if r["status"] == "SUCCEEDED")
    out.write(f"backfill of {job}: {succeeded}/{len(ticks)} succeeded\n")
    return 0 if succeeded == len(ticks) else 1


def _key(at: str) -> str:
    """The tick key the API will use for ``--at`` (whole seconds, UTC)."""
    try:
        return tick_key(datetime.fromisoformat(at).astimezone(UTC))
    except (ValueError, OverflowError):
        return at  # the API refuses it, naming the field


def _outcome(record: dict[str, Any]) -> str:
    extra = record.get("error") or record.get("detail") or ""
    flag = f" [{record['duration_flag']}]" if record.get("duration_flag") else ""
    return f"{record['status']}{flag}" + (f" ({extra})" if extra else "")


def print_next(
    job: str, spec: dict[str, str], last_ticks: list[str], count: int, out: TextIO
) -> int:
    """The next ``count`` fire times, in the job's zone (DST included) and in UTC."""
    schedule = Schedule(spec["schedule"], spec.get("time_zone", "UTC"))
    now = datetime.now(UTC)
    anchor = scheduled_anchor(last_ticks) if schedule.needs_anchor else None
    if schedule.needs_anchor and anchor is None:
        out.write(f"{job}: {schedule.expression} counts from its first tick; none recorded yet\n")
        return 0
    zone = ZoneInfo(schedule.time_zone)
    rows = [
        [t.astimezone(zone).strftime("%a %Y-%m-%d %H:%M %Z"), iso_seconds(t)]
        for t in schedule.next_after(now, count, anchor)
    ]
    out.write(f"{job}: {schedule.expression} in {schedule.time_zone}\n")
    out.write(render_table([f"LOCAL ({schedule.time_zone})", "UTC"], rows) + "\n")
    return 0
