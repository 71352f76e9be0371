"""``make demo``: the whole app on a local emulator.

It synthesizes app.py and deploys the template on an in-process AWS emulator (moto). Jobs: the
emulated EventBridge Scheduler fires the deployed schedules for 45 simulated minutes with the faults
AWS really produces (duplicate deliveries, a late delivery, a throttled database, a malformed
event), then the dead-letter queues are redriven. Observers: the CLI creates observers through the
deployed API, the reconciler starts them on ECS, their containers heartbeat and checkpoint, one
crashes and is replaced (its zombie fenced), one is stopped. Pooled observers: packed on host tasks
(the real host process), a host killed and its observers resumed elsewhere from their checkpoints,
a zombie host fenced. Tasks: a receipt enqueued three times runs once, a poison payload is
dead-lettered with its reason, a delayed task, an ordered group, a Lambda timeout mid-batch whose
finished messages come back DUPLICATE, read back with ``vigil tasks``. Effects: a hung cleanup
run's late write refused (``Fenced``), a report email neither sent twice nor lost (UNCERTAIN,
settled). Flows: a crash after a step resumes at the next one, a three-day sleep passes with no
invocation, a signal wakes a wait, an aborted flow compensates. Everything printed is read back from the deployed resources.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from freezegun import freeze_time

from vigil.jobs.redrive import redrive_job
from vigil.jobs.store import RunStore
from vigil_tools.demo.control import simulate_control
from vigil_tools.demo.effects import simulate_effects
from vigil_tools.demo.flows import simulate_flows
from vigil_tools.demo.observers import simulate as simulate_observers
from vigil_tools.demo.pooled import simulate as simulate_pooled
from vigil_tools.demo.tasks import simulate_tasks
from vigil_tools.emulator.account import LocalAccount, local_account
from vigil_tools.emulator.lambda_runtime import AsyncInvocation, LocalLambda
from vigil_tools.emulator.scheduler import Schedule, deployed_schedules, occurrences
from vigil_tools.jobs_cli import JobsCatalog
from vigil_tools.project import PROJECT_ENV, Project, ProjectNotFound, find_project

START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)  # a Monday, 07:00 in Prague
WINDOW = timedelta(minutes=45)
DUPLICATES = 2
LATE_TICK = START + timedelta(minutes=20)
LATE_BY = timedelta(minutes=3)
LOG_DIR = Path(".demo/logs")
"""Under the project's root."""


@dataclass
class Fault:
    """A DynamoDB outage, injected through botocore's own events (as a throttling storm)."""

    active: bool = False
    hits: int = 0

    def __call__(self, **_: Any) -> Any:
        if not self.active:
            return None
        self.hits += 1
        return _ThrottledResponse(), {
            "Error": {
                "Code": "ProvisionedThroughputExceededException",
                "Message": "injected by the demo: the table is throttling",
            },
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }


class _ThrottledResponse:
    status_code = 400
    headers: dict[str, str] = {}
    content = b""
    text = ""


@dataclass
class Journal:
    outcomes: Counter[str] = field(default_factory=Counter)
    lines: list[str] = field(default_factory=list)

    def deliveries(self, label: str, result: AsyncInvocation) -> None:
        for attempt in result.attempts:
            outcome = attempt.payload["outcome"] if attempt.ok else f"ERROR {attempt.error_type}"
            self.outcomes[outcome] += 1
        last = result.attempts[-1]
        summary = (
            last.payload["outcome"]
            if last.ok
            else f"failed {len(result.attempts)}x ({last.error_type}) -> dead-letter queue"
        )
        self.lines.append(f"  {label:<48} {summary}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vigil_tools.demo", description=__doc__)
    parser.add_argument(
        "--project", help=f"the Vigil checkout (default: ${PROJECT_ENV}, or found from here)"
    )
    args = parser.parse_args(argv)
    try:
        project = find_project(args.project)
    except ProjectNotFound as missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    simulate(project)
    return 0


def simulate(project: Project | None = None, cdk_out: Path | None = None) -> dict[str, Any]:
    """Run the scenario, print it, and return the facts read back from the emulator. ``cdk_out``:
    the project's app already synthesized there (the suite's shared synth), else synthesized here."""
    project = project or find_project()
    log_dir = project.root / LOG_DIR
    shutil.rmtree(log_dir, ignore_errors=True)
    with freeze_time(START) as frozen, local_account(cdk_out, project=project) as account:
        now = lambda: datetime.now(UTC)  # noqa: E731 - the frozen clock
        runtime = LocalLambda(
            account.session,
            now=now,
            advance=frozen.tick,
            log_dir=log_dir,
            functions_dir=project.functions,
        )
        fault = Fault()
        account.session.events.register_first("before-call.dynamodb.TransactWriteItems", fault)
        journal = Journal()
        schedules = deployed_schedules(account.session)
        print(
            f"Deployed stack {account.deployed.stack_name}: {account.deployed.resource_count} "
            f"resources, plus {account.created} created from the template where moto skips them."
        )
        print(
            f"Schedules: {', '.join(f'{s.name} [{s.expression} {s.time_zone}]' for s in schedules)}\n"
        )

        jobs = [s for s in schedules if "scheduled-time" in s.input_template]
        timeline = sorted(
            (
                (moment, schedule)
                for schedule in jobs
                for moment in occurrences(schedule, START, START + WINDOW)
            ),
            key=lambda pair: (pair[0], pair[1].name),
        )
        print(f"Simulating {WINDOW} from {START:%a %Y-%m-%d %H:%M} UTC:")
        for moment, schedule in timeline:
            _fire(schedule, moment, runtime, fault, frozen, journal)

        print("\n".join(journal.lines))
        frozen.move_to(START + WINDOW + timedelta(minutes=5))
        _malformed(account, runtime, schedules, journal)
        _redrive_all(account, runtime, journal)
        facts = _summary(account, journal, fault, log_dir)
        facts["control"] = simulate_control(
            account, runtime, schedules, frozen.move_to, START + WINDOW + timedelta(minutes=10)
        )
        facts["observers"] = simulate_observers(account, runtime, frozen, log_dir=log_dir)
        facts["pooled"] = simulate_pooled(account, now, frozen.move_to, log_dir=log_dir)
        facts["tasks"] = simulate_tasks(account, runtime, now, frozen.move_to, log_dir=log_dir)
        facts["effects"] = simulate_effects(
            account, runtime, schedules, now, frozen.move_to, log_dir
        )
        facts["flows"] = simulate_flows(account, runtime, now, frozen.move_to, log_dir=log_dir)
        return facts


def _fire(
    schedule: Schedule,
    moment: datetime,
    runtime: LocalLambda,
    fault: Fault,
    frozen: Any,
    journal: Journal,
) -> None:
    function = schedule.target_arn
    label = f"{moment:%H:%M} {schedule.name.split('Schedule')[0]}"
    late = moment == LATE_TICK
    frozen.move_to(moment + (LATE_BY if late else timedelta(seconds=1)))
    # DynamoDB throttles throughout the report's deliveries: every attempt fails, so the tick can
    # only run when the dead-letter queue is redriven.
    fault.active = schedule.name.startswith("DailyReport")
    event = json.loads(schedule.render_input(moment))
    journal.deliveries(
        label + (" (3 min late)" if late else ""), runtime.invoke_async(function, event)
    )
    for copy in range(DUPLICATES):
        frozen.tick(timedelta(seconds=2))
        duplicate = json.loads(schedule.render_input(moment, attempt=copy + 2))
        journal.deliveries(
            f"{label}   duplicate #{copy + 1}", runtime.invoke_async(function, duplicate)
        )
    fault.active = False


def _malformed(
    account: LocalAccount, runtime: LocalLambda, schedules: list[Schedule], journal: Journal
) -> None:
    cleanup = next(s for s in schedules if s.name.startswith("Cleanup"))
    result = runtime.invoke_async(cleanup.target_arn, {"detail": "no scheduled time here"})
    journal.lines.append("")
    journal.deliveries("malformed event to cleanup", result)
    print(journal.lines[-1])


def _redrive_all(account: LocalAccount, runtime: LocalLambda, journal: Journal) -> None:
    """What ``vigil jobs redrive`` does, for every job the stack's outputs list."""
    sqs = account.session.client("sqs")
    catalog = JobsCatalog.from_stack(account.session, account.deployed.stack_name)
    print("\nRedriving the dead-letter queues (each event twice: a redrive is safe to repeat):")
    for name, job in sorted(catalog.jobs.items()):
        function = job["function"]
        for item in redrive_job(
            sqs,
            job,
            send=functools.partial(runtime.invoke_async, function),
            call=functools.partial(runtime.invoke, function),
        ):
            result = item.result
            if not isinstance(result, AsyncInvocation):  # one at a time: answered, not retried
                result = AsyncInvocation.answered(function, result)
            journal.deliveries(f"redrive {name}", result)
            print(journal.lines[-1])
            journal.deliveries(
                f"same event again {name}", runtime.invoke_async(function, item.event)
            )
            print(journal.lines[-1])


def _summary(
    account: LocalAccount, journal: Journal, fault: Fault, log_dir: Path
) -> dict[str, Any]:
    dynamodb = account.session.client("dynamodb")
    sqs = account.session.client("sqs")
    table = next(account.physical_id(t) for t in account.synth.resources("AWS::DynamoDB::Table"))
    store = RunStore(dynamodb, table)
    facts: dict[str, Any] = {"outcomes": dict(journal.outcomes), "jobs": {}, "queues": {}}
    print("\n=== Summary ===")
    print(
        "Deliveries by outcome: "
        + ", ".join(f"{k}={v}" for k, v in sorted(journal.outcomes.items()))
    )
    for head in store.heads():
        history = store.history(head.job, limit=100)
        statuses = Counter(r.status.value for r in history)
        facts["jobs"][head.job] = [(r.tick, r.status.value, r.attempts) for r in history]
        print(
            f"\nJob {head.job}: {len(history)} ticks recorded "
            f"({', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))})"
        )
        print(f"  {'tick':<22}{'status':<11}{'attempts':>9}  {'fencing token':<18}detail")
        for record in reversed(history):
            detail = record.detail or (
                f"{record.error_type}: {record.error_message}" if record.error_type else ""
            )
            print(
                f"  {record.tick:<22}{record.status.value:<11}{record.attempts:>9}  "
                f"{record.fencing_token or '':<18}{detail[:70]}"
            )
    print("\nDead-letter queues after the redrive:")
    for queue in sorted(account.everywhere("AWS::SQS::Queue"), key=lambda q: q.logical_id):
        attributes = sqs.get_queue_attributes(
            QueueUrl=queue.physical_id, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        depth = int(attributes["ApproximateNumberOfMessages"])
        facts["queues"][queue.logical_id[:-8]] = depth
        print(f"  {queue.logical_id[:-8]:<24} {depth} message(s)")
    ran = journal.outcomes["SUCCEEDED"]
    ticks = sum(1 for _ in store.heads())
    print(
        f"\nA poison event stays in its dead-letter queue for a person to read; function logs "
        f"(JSON, with EMF metrics) are in {log_dir}/."
    )
    print(
        f"\nDynamoDB requests: {account.requests.total('dynamodb')} "
        f"({fault.hits} refused by the injected throttling), for {sum(journal.outcomes.values())} "
        f"deliveries; {ran} bodies ran, none twice, across {ticks} jobs."
    )
    facts["dynamodb_requests"] = account.requests.total("dynamodb")
    return facts


if __name__ == "__main__":
    sys.exit(main())
