"""The console (issue 32): AWS requests and Lambda milliseconds per page view and per action, the
widget function's cold start, and what the console dashboard costs a month.

On the in-process emulator: the example app (``app.py``), then the generated app of 200 jobs and
200 tasks (``benchmarks.scale_app``) seeded as ``benchmarks.operators_scale`` seeds it, with
10,000 observers written into its registry. Each page view is an invocation of the deployed view
function's handler (``LocalLambda``: a warm container, as Lambda keeps one between views), the
median of ``REPEATS``; each action one invocation of the operate function. Requests are
botocore's own events (what the function sends); milliseconds are this machine's wall and CPU
time with moto in the process, an upper bound for Lambda's (moto's own work is counted).

    python -m benchmarks.console_requests [--quick]   (--quick: the example app only)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vigil.contract.observers import NAMED_KIND, NAMES_PARTITION
from vigil.dynamo import to_wire
from vigil.observers.model import Desired, Observer, Status, to_item
from vigil_tools.emulator.account import LocalAccount, local_account
from vigil_tools.emulator.lambda_runtime import LocalLambda

REPEATS = 3
OBSERVERS = 10_000
HANDLER = "handlers.console_widget.handler"
MEMORY_GB = 0.5
"""``infra.console.MEMORY_MB``."""
LAMBDA_REQUEST = 0.20 / 1_000_000
LAMBDA_GB_S_ARM = 0.0000133334
DASHBOARD_MONTH = 3.00
WIDGETS = 4
"""The custom widgets on the console dashboard (``infra.console.PAGES``): one view each."""
CONTEXT = {
    "dashboardName": "bench",
    "widgetId": "w",
    "accountId": "123456789012",
    "forms": {"all": {}},
}
PAGES = (
    ("what is wrong now", {"page": "now"}),
    ("jobs", {"page": "jobs"}),
    ("jobs, failing", {"page": "jobs", "status": "FAILING"}),
    ("tasks", {"page": "tasks"}),
    ("observers", {"page": "observers"}),
    ("observers, FAILED", {"page": "observers", "status": "FAILED"}),
)


@dataclass(frozen=True)
class Measured:
    what: str
    wall_ms: float
    cpu_ms: float
    requests: Counter[str]


def console_functions(account: LocalAccount) -> dict[str, str]:
    found = {}
    for placed in account.everywhere("AWS::Lambda::Function"):
        properties = placed.resource["Properties"]
        if properties.get("Handler") == HANDLER:
            role = properties["Environment"]["Variables"]["VIGIL_CONSOLE_ROLE"]
            found[role] = placed.physical_id
    return found


def invoke(runtime: LocalLambda, function: str, event: dict[str, Any]) -> str:
    with contextlib.redirect_stdout(io.StringIO()):  # the function's structured logs
        done = runtime.invoke(function, {**event, "widgetContext": {**CONTEXT, "params": event}})
    if not done.ok:
        raise RuntimeError(f"{event}: {done.error_type}: {done.error_message}")
    return str(done.payload)


def timed(
    account: LocalAccount, what: str, run: Callable[[], str], repeats: int = REPEATS
) -> Measured:
    walls, cpus = [], []
    for _ in range(repeats):
        account.requests.counts.clear()
        started, used = time.perf_counter(), time.process_time()
        run()
        walls.append((time.perf_counter() - started) * 1000)
        cpus.append((time.process_time() - used) * 1000)
    requests = Counter(account.requests.counts)
    requests.pop("lambda:GetFunctionConfiguration", None)  # the emulator's, not the function's
    return Measured(what, statistics.median(walls), statistics.median(cpus), requests)


def seed_observers(account: LocalAccount, count: int) -> None:
    """``count`` observers RUNNING in the registry (1 in 100 FAILED), written as the API writes
    them (the record and its name's claim), 24 items a BatchWriteItem."""
    registry = next(
        p.physical_id
        for p in account.everywhere("AWS::DynamoDB::Table")
        if p.logical_id.startswith("ObserversRegistry")
    )
    now = datetime.now(UTC)
    items: list[dict[str, Any]] = []
    for index in range(count):
        failed = index % 100 == 7
        observer = Observer(
            name=f"obs-{index:05d}",
            kind="kind-00",
            config={},
            desired=Desired.RUNNING,
            status=Status.FAILED if failed else Status.RUNNING,
            created_at=now,
            updated_at=now,
            generation=1,
            heartbeat_at=now,
            failure_reason="exit code 1" if failed else None,
        )
        claim = {"kind": NAMES_PARTITION, "name": observer.name, NAMED_KIND: observer.kind}
        items += [to_item(observer), claim]
    client = account.session.client("dynamodb")
    for start in range(0, len(items), 24):
        batch = [{"PutRequest": {"Item": to_wire(item)}} for item in items[start : start + 24]]
        client.batch_write_item(RequestItems={registry: batch})


def measure(account: LocalAccount, label: str) -> tuple[Measured, list[Measured], list[Measured]]:
    functions = console_functions(account)
    runtime = LocalLambda(account.session, now=lambda: datetime.now(UTC), advance=lambda _: None)
    cold = timed(
        account,
        f"{label}: first view of a new container",
        lambda: invoke(runtime, functions["view"], {"page": "now"}),
        repeats=1,
    )

    def view(event: dict[str, Any]) -> Callable[[], str]:
        return lambda: invoke(runtime, functions["view"], event)

    views = [timed(account, f"{label}: {what}", view(event)) for what, event in PAGES]
    job = sorted(console_functions_jobs(account))[0]
    reason = {**CONTEXT, "forms": {"all": {f"reason-{job}": "benchmark"}}}

    def act(event: dict[str, Any], context: dict[str, Any] = CONTEXT) -> str:
        with contextlib.redirect_stdout(io.StringIO()):
            done = runtime.invoke(functions["operate"], {**event, "widgetContext": context})
        assert done.ok and "Refused" not in str(done.payload), done
        return str(done.payload)

    actions = [
        timed(
            account,
            f"{label}: pause a job (and draw the jobs page)",
            lambda: act({"page": "jobs", "action": "jobs.pause", "job": job}, reason),
            1,
        ),
        timed(
            account,
            f"{label}: resume it (and draw the jobs page)",
            lambda: act({"page": "jobs", "action": "jobs.resume", "job": job}),
            1,
        ),
        timed(
            account,
            f"{label}: run a job now (and draw the jobs page)",
            lambda: act({"page": "jobs", "action": "jobs.run", "job": job}),
            1,
        ),
    ]
    return cold, views, actions


def console_functions_jobs(account: LocalAccount) -> list[str]:
    from vigil_tools.jobs_cli import JobsCatalog

    return list(JobsCatalog.from_stack(account.session, account.deployed.stack_name).jobs)


def import_ms() -> float:
    """The handler's imports in a fresh interpreter: most of Lambda's init (its cold start)."""
    functions = Path(__file__).resolve().parents[1] / "functions"
    code = (
        "import time; t = time.perf_counter(); import handlers.console_widget; "
        "print((time.perf_counter() - t) * 1000)"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code],
                cwd=functions,
                check=True,
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(functions)},
            ).stdout
        )
        for _ in range(REPEATS)
    ]
    return statistics.median(runs)


def month(view_ms: float, views: int) -> float:
    """The view function's cost of ``views`` dashboard views a month (4 invocations each)."""
    invocations = views * WIDGETS
    return invocations * (LAMBDA_REQUEST + LAMBDA_GB_S_ARM * MEMORY_GB * view_ms / 1000)


def render(rows: list[Measured], colds: list[Measured], imports: float, sizes: list[str]) -> str:
    lines = [
        "Each page view is one invocation of the console's view function (a widget), each "
        "action one of its operate function; measured through the deployed handler on the "
        f"in-process emulator ({', '.join(sizes)}). Milliseconds are this machine's, moto's "
        "own work included (an upper bound for Lambda's); requests are what the function sent "
        f"(median of {REPEATS} views; an action once).",
        "",
        "| what | wall | CPU | requests |",
        "|---|---:|---:|---|",
    ]
    for m in [*colds, *rows]:
        requests = ", ".join(f"{op} {n}" for op, n in sorted(m.requests.items()))
        lines.append(
            f"| {m.what} | {m.wall_ms:.0f} ms | {m.cpu_ms:.0f} ms | "
            f"{sum(m.requests.values())}: {requests} |"
        )
    shown = [m for m in rows if not m.what.endswith("(and draw the jobs page)")]
    slowest = max(shown, key=lambda m: m.wall_ms)
    typical = statistics.median(m.wall_ms for m in shown)
    lines += [
        "",
        f"Cold start: the handler's imports take {imports:.0f} ms in a fresh interpreter "
        "(most of Lambda's init); the first view of a new container adds the catalogs' reads "
        "(the first lines above).",
        "",
        "The console dashboard's price a month (Lambda arm64 at "
        f"{MEMORY_GB * 1024:.0f} MB: $0.20 per million requests, $0.0000133334 per GB-s; a "
        f"dashboard ${DASHBOARD_MONTH:.2f} a month beyond the account's first three; prices "
        "as AWS's pages gave them in 2025, approximate). A dashboard view draws "
        f"{WIDGETS} widgets; the view function bills each at its duration, taken here as the "
        f"median page view above ({typical:.0f} ms) and as the slowest ({slowest.wall_ms:.0f} ms, "
        f"{slowest.what}); the buttons' invocations are too few to count:",
        "",
        "| use | views a month | Lambda (median) | Lambda (slowest) | with the dashboard |",
        "|---|---:|---:|---:|---:|",
    ]
    for use, views in (
        ("nobody looks", 0),
        ("5 operators, 20 looks a working day each", 5 * 20 * 22),
        ("a wall screen refreshing every minute, all month", 60 * 24 * 30),
    ):
        low, high = month(typical, views), month(slowest.wall_ms, views)
        lines.append(
            f"| {use} | {views:,} | ${low:.2f} | ${high:.2f} | ${high + DASHBOARD_MONTH:.2f} |"
        )
    return "\n".join(lines) + "\n"


def run(quick: bool = False) -> str:
    rows: list[Measured] = []
    colds: list[Measured] = []
    sizes = ["the example app: 2 jobs, 2 tasks, no observer running"]
    with local_account() as account:
        cold, views, actions = measure(account, "example")
        colds.append(cold)
        rows += views + actions
    if not quick:
        from benchmarks.operators_scale import deployed_scale, seed
        from benchmarks.scale_app import Size

        size = Size()
        with deployed_scale(size, {}) as account:
            seed(account, datetime.now(UTC).replace(microsecond=0), size)
            seed_observers(account, OBSERVERS)
            cold, views, actions = measure(account, "200/200/10,000")
            colds.append(cold)
            rows += views + actions
        sizes.append(f"{size.jobs} jobs, {size.tasks} tasks and {OBSERVERS:,} observers")
    return render(rows, colds, import_ms(), sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the example app only")
    print(run(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
