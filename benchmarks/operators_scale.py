"""Operators at 200 jobs and 200 tasks (issue 29): how long ``vigil jobs list``, ``vigil tasks
summary`` and the jobs API's ``GET /jobs`` take, and how many AWS requests each sends, on the
emulator with the generated app of ``benchmarks.scale_app`` deployed.

The app is synthesized as ``app.py`` is and deployed on the in-process emulator (moto) as
``vigil_stack`` deploys it. Then the fleet is given a state through the runtime's own stores:
each job's last tick recorded (``RunStore.record_final``; 20 failed, 5 uncertain, 10 an hour
old, so late, 10 never run), 8 jobs paused (``ControlStore.pause``); 20 tasks with dead letters
and 50 with messages waiting (sent to their queues). Each command then runs ``REPEATS`` times
through ``vigil_tools.cli.main`` (the CLI as an operator runs it: the stack's outputs, its
catalogs, the reads) and each API request through the deployed jobs-control function's handler
(``LocalLambda``: a warm container, its catalog already read, as Lambda keeps it); the median
is reported, with the requests one run sends by service and operation. Target: under a second.

    python -m benchmarks.operators_scale [--kinds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.scale_app import Size, job_name, synthesize_scale, task_name
from vigil.jobs.control import pause_terms
from vigil.jobs.control_store import ControlStore
from vigil.jobs.events import tick_key
from vigil.jobs.model import RunStatus
from vigil.jobs.store import RunStore
from vigil_tools.api_client import rest_event
from vigil_tools.cli import main as vigil
from vigil_tools.emulator.account import LocalAccount, local_account
from vigil_tools.emulator.lambda_runtime import LocalLambda
from vigil_tools.jobs_cli import JobsCatalog
from vigil_tools.tasks_catalog import tasks_catalog

REPEATS = 5
TARGET_S = 1.0
OPERATOR = "arn:aws:iam::123456789012:user/operator"
CONTROL_HANDLER = "handlers.jobs_control.handler"


@dataclass(frozen=True)
class Measured:
    what: str
    seconds: float
    """Wall time: what an operator waits, on this machine under its load."""
    cpu: float
    """This process's CPU time (all its threads): what the wait would be on an idle core."""
    requests: Counter[str]
    note: str = ""
    commands: int = 1
    """Commands (or API requests) the line took: each is held to the target on its own."""


def seed(account: LocalAccount, now: datetime, size: Size) -> dict[str, int]:
    """The fleet's state, written as the guard, the pause and an application write it."""
    stack = account.deployed.stack_name
    jobs = JobsCatalog.from_stack(account.session, stack)
    dynamodb = account.session.client("dynamodb")
    runs = RunStore(dynamodb, jobs.runs_table)
    control = ControlStore(dynamodb, jobs.runs_table)
    counts: Counter[str] = Counter()
    for index in range(size.jobs):
        job = job_name(index)
        if index % 20 == 19:
            counts["never"] += 1
            continue
        late = index % 20 == 4  # a rate(5 minutes) job (`scale_app.SCHEDULES`)
        tick = now - timedelta(hours=1 if late else 0, minutes=1)
        status = RunStatus.SUCCEEDED
        if index % 10 == 1:
            status = RunStatus.FAILED
        elif index % 40 == 5:
            status = RunStatus.UNCERTAIN
        runs.record_final(
            job=job,
            tick=tick_key(tick),
            status=status,
            now=tick,
            expires_at=now + timedelta(days=1),
            detail="seeded by the benchmark",
        )
        counts[status.value] += 1
        counts["late (by the schedule)"] += late
        if index % 25 == 7:
            control.pause(job, pause_terms("benchmark", None, now), OPERATOR, timedelta(days=1))
            counts["paused"] += 1
    sqs = account.session.client("sqs")
    tasks = tasks_catalog(account.session, stack)
    for index in range(size.tasks):
        entry = tasks[task_name(index)]
        fifo = str(entry["queue_url"]).endswith(".fifo")
        extra = {"MessageGroupId": "g", "MessageDeduplicationId": str(index)} if fifo else {}
        if index % 10 == 4:
            sqs.send_message(QueueUrl=entry["dead_letter_url"], MessageBody="{}", **extra)
            counts["tasks with dead letters"] += 1
        if index % 4 == 1:
            sqs.send_message(QueueUrl=entry["queue_url"], MessageBody="{}", **extra)
            counts["tasks with messages waiting"] += 1
    return dict(counts)


def timed(account: LocalAccount, what: str, run: Callable[[], str], note: str = "") -> Measured:
    """The median of ``REPEATS`` runs; the requests of the last one."""
    times, cpu = [], []
    for _ in range(REPEATS):
        account.requests.counts.clear()
        started, used = time.perf_counter(), time.process_time()
        check = run()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    requests = Counter(account.requests.counts)
    requests.pop("lambda:GetFunctionConfiguration", None)  # the emulator's, not the function's
    pages = re.match(r"\d+ in (\d+) pages", check)
    return Measured(
        what,
        statistics.median(times),
        statistics.median(cpu),
        requests,
        note or check,
        int(pages.group(1)) if pages else 1,
    )


Read = Callable[[str | None], dict[str, Any]]
"""One page of a listing, given the previous page's ``next`` (None: the first)."""


def cli(account: LocalAccount, *argv: str) -> Read:
    """``vigil --json ARGV [--next TOKEN]`` as an operator types it."""

    def read(token: str | None) -> dict[str, Any]:
        out, err = io.StringIO(), io.StringIO()
        again = ["--next", token] if token else []
        code = vigil(["--json", *argv, *again], session=account.session, stdout=out, stderr=err)
        if code != 0:
            raise RuntimeError(f"vigil {' '.join(argv)}: {err.getvalue()}")
        return dict(json.loads(out.getvalue()))

    return read


def api(runtime: LocalLambda, function: str, **query: str) -> Read:
    """``GET /jobs?QUERY[&next=TOKEN]`` through the deployed function's handler."""

    def read(token: str | None) -> dict[str, Any]:
        sent = {**query, **({"next": token} if token else {})}
        with contextlib.redirect_stdout(io.StringIO()):  # the function's structured logs
            answer = runtime.invoke(function, rest_event("GET", "/jobs", query=sent or None))
        body = answer.payload
        if not answer.ok or body["statusCode"] != 200:
            raise RuntimeError(f"GET /jobs {sent}: {answer}")
        return dict(json.loads(body["body"]))

    return read


def first_page(read: Read) -> Callable[[], str]:
    def run() -> str:
        page = read(None)
        entries = page.get("jobs", page.get("tasks", []))
        return f"{len(entries)} of {page['matching']}"

    return run


def every_page(read: Read) -> Callable[[], str]:
    """Every page, following ``next``: how many entries, and that none came twice."""

    def run() -> str:
        seen: list[str] = []
        token, pages = None, 0
        while True:
            pages += 1
            page = read(token)
            entries = page.get("jobs", page.get("tasks", []))
            seen += [entry.get("job", entry.get("task")) for entry in entries]
            token = page["next"]
            if not token:
                break
        assert len(seen) == len(set(seen)), "an entry was listed twice"
        return f"{len(seen)} in {pages} pages, each once"

    return run


def control_function(account: LocalAccount) -> str:
    found = [
        placed.physical_id
        for placed in account.everywhere("AWS::Lambda::Function")
        if placed.resource["Properties"].get("Handler") == CONTROL_HANDLER
    ]
    if len(found) != 1:
        raise RuntimeError(f"expected one jobs-control function, found {found}")
    return found[0]


def measure(account: LocalAccount, size: Size) -> tuple[dict[str, int], list[Measured]]:
    now = datetime.now(UTC).replace(microsecond=0)
    started = time.perf_counter()
    seeded = seed(account, now, size)
    print(f"seeded in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    runtime = LocalLambda(
        account.session, now=lambda: datetime.now(UTC), advance=lambda delta: None
    )
    function = control_function(account)
    results: list[Measured] = []
    for command, prefix in ((("jobs", "list"), "job-1"), (("tasks", "summary"), "task-1")):
        label = f"vigil {' '.join(command)}"
        results += [
            timed(account, f"{label} (first page, 50)", first_page(cli(account, *command))),
            timed(
                account,
                f"{label} --status failing",
                first_page(cli(account, *command, "--status", "failing")),
            ),
            timed(
                account,
                f"{label} --prefix {prefix}",
                first_page(cli(account, *command, "--prefix", prefix)),
            ),
            timed(account, f"{label}, every page", every_page(cli(account, *command))),
        ]
    account.requests.counts.clear()
    started, used = time.perf_counter(), time.process_time()
    api(runtime, function)(None)
    results.append(
        Measured(
            "GET /jobs, the container's first request (reads the catalog)",
            time.perf_counter() - started,
            time.process_time() - used,
            Counter({k: n for k, n in account.requests.counts.items() if "lambda:" not in k}),
            "once",
        )
    )
    results += [
        timed(account, "GET /jobs (first page, 50)", first_page(api(runtime, function))),
        timed(
            account,
            "GET /jobs?status=failing",
            first_page(api(runtime, function, status="failing")),
        ),
        timed(
            account,
            "GET /jobs?prefix=job-1&status=late",
            first_page(api(runtime, function, prefix="job-1", status="late")),
        ),
        timed(account, "GET /jobs, every page", every_page(api(runtime, function))),
    ]
    return seeded, results


def render(
    size: Size, seeded: dict[str, int], results: list[Measured], setup: dict[str, float]
) -> str:
    lines = [
        f"The generated app of {size.jobs} jobs, {size.tasks} tasks and {size.kinds} observer "
        f"kinds (`benchmarks/scale_app.py`) deployed on the in-process emulator ("
        + (f"synthesized in {setup['synth']:.0f} s, " if "synth" in setup else "")
        + f"deployed in {setup['deploy']:.0f} s). Seeded: "
        + ", ".join(f"{what} {n}" for what, n in sorted(seeded.items()))
        + ". Each line is the median of "
        f"{REPEATS} runs (the CLI through `vigil_tools.cli.main --json`, the API through the "
        "deployed jobs-control function's handler in a warm container); target under "
        f"{TARGET_S:.0f} s. Wall time is what an operator waited on this machine, shared with "
        f"other work (load average {setup['load']:.1f} on {os.cpu_count()} cores during the "
        "run); CPU is this process's own time (its threads too), what the wait is on an idle "
        "core: the emulator (moto) runs in the process, so it is counted in both. Requests are "
        "those one run sends (botocore's own events).",
        "",
        "| what | answer | wall | CPU | under 1 s (CPU, a command) | requests |",
        "|---|---|---:|---:|---|---|",
    ]
    for m in results:
        requests = ", ".join(f"{op} {n}" for op, n in sorted(m.requests.items()))
        total = sum(m.requests.values())
        ok = "yes" if m.cpu / m.commands < TARGET_S else "**no**"
        ok += f" ({m.cpu / m.commands * 1000:.0f} ms each)" if m.commands > 1 else ""
        lines.append(
            f"| {m.what} | {m.note} | {m.seconds * 1000:.0f} ms | {m.cpu * 1000:.0f} ms | {ok} "
            f"| {total}: {requests} |"
        )
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def deployed_scale(
    size: Size, timings: dict[str, float], cdk_out: Path | None = None
) -> Iterator[LocalAccount]:
    """``cdk_out``: an assembly of ``size`` synthesized before (kept there), else a fresh one."""
    with tempfile.TemporaryDirectory(prefix="vigil-operators-") as scratch:
        out = cdk_out or Path(scratch)
        started = time.perf_counter()
        if cdk_out is None or not (cdk_out / "manifest.json").exists():
            synthesize_scale(out, size)
            timings["synth"] = time.perf_counter() - started
        started = time.perf_counter()
        with local_account(out) as account:
            timings["deploy"] = time.perf_counter() - started
            print(f"deployed in {timings['deploy']:.0f} s", file=sys.stderr)
            yield account


def run(size: Size | None = None, cdk_out: Path | None = None) -> str:
    size = size or Size()
    timings: dict[str, float] = {}
    with deployed_scale(size, timings, cdk_out) as account:
        before = os.getloadavg()[0]
        seeded, results = measure(account, size)
        timings["load"] = (before + os.getloadavg()[0]) / 2
    return render(size, seeded, results, timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kinds", type=int, default=Size().kinds)
    parser.add_argument("--pooled", type=int, default=Size().pooled)
    parser.add_argument("--cdk-out", type=Path, help="synthesize there once, reuse after")
    args = parser.parse_args()
    print(run(Size(kinds=args.kinds, pooled=args.pooled), args.cdk_out))


if __name__ == "__main__":
    main()
