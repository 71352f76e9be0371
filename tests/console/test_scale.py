"""The pages at 200 jobs, 200 tasks and 10,000 observers, on fakes of the stores (the requests
each store call would send are counted): counts first, one page of rows, a next-page button,
and the reads bounded by the page, not by the fleet. About 1 s.

The same sizes on the emulator, with wall and CPU time, are ``benchmarks/console_requests.py``.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.console.markup_check import assert_inert
from vigil.console import widget
from vigil.console.controls import CwdbControls
from vigil.console.services import ConsoleServices
from vigil.contract.console import Role
from vigil.contract.tasks import TaskStatus
from vigil.jobs.control import JobSpec
from vigil.jobs.model import JobHead, RunStatus
from vigil.observers.model import Desired, Observer, Status
from vigil.observers.registry import Page
from vigil.tasks.catalog import Catalog, TaskSpec

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
JOBS, TASKS, OBSERVERS = 200, 200, 10_000
CONTROLS = CwdbControls("arn:view", "arn:operate")


class Calls(Counter[str]):
    def __call__(self, name: str) -> None:
        self[name] += 1


class Runs:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def heads_of(self, jobs: Any) -> list[JobHead]:
        names = list(jobs)
        self.calls.update({"dynamodb:BatchGetItem": -(-len(names) // 100)})
        return [
            JobHead(
                n,
                1,
                None,
                None,
                (NOW - timedelta(minutes=1)).isoformat(),
                RunStatus.FAILED if i % 10 == 1 else RunStatus.SUCCEEDED,
                None,
                "Boom",
            )
            for i, n in enumerate(names)
        ]

    def history(self, job: str, limit: int) -> list[Any]:
        self.calls("dynamodb:Query")
        return []


class Sqs:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def get_queue_attributes(self, **_: Any) -> dict[str, Any]:
        self.calls("sqs:GetQueueAttributes")
        return {"Attributes": {"ApproximateNumberOfMessages": "1"}}


class Store:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def count_by_status(self, task: str) -> Counter[TaskStatus]:
        self.calls("dynamodb:Query")
        return Counter({TaskStatus.SUCCEEDED: 40, TaskStatus.FAILED: 1})


class Tasks:
    def __init__(self, calls: Calls) -> None:
        self.catalog = Catalog(
            {
                f"task-{i:03d}": TaskSpec(f"task-{i:03d}", f"https://q/{i}", "t", f"https://d/{i}")
                for i in range(TASKS)
            }
        )
        self._store = Store(calls)

    def store(self, spec: TaskSpec) -> Store:
        return self._store


class Registry:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.names = [f"obs-{i:05d}" for i in range(OBSERVERS)]

    def list_page(
        self, *, status: Status | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page:
        self.calls("dynamodb:Query")
        self.calls("dynamodb:BatchGetItem")
        start = int(cursor or 0)
        shown = self.names[start : start + limit]
        observers = [
            Observer(
                n,
                "ticker",
                {},
                Desired.RUNNING,
                status or Status.RUNNING,
                NOW,
                NOW,
                generation=3,
                heartbeat_at=NOW,
            )
            for n in shown
        ]
        following = start + limit
        return Page(observers, str(following) if following < len(self.names) else None)

    def active_count(self) -> int:
        self.calls("dynamodb:GetItem")
        return OBSERVERS


class Alarms:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def describe_alarms(self, **_: Any) -> dict[str, Any]:
        self.calls("cloudwatch:DescribeAlarms")
        return {"MetricAlarms": []}


def services(calls: Calls) -> ConsoleServices:
    jobs = {
        f"job-{i:03d}": JobSpec.from_json(
            f"job-{i:03d}", {"function": "f", "schedule": "rate(5 minutes)"}
        )
        for i in range(JOBS)
    }
    return ConsoleServices(
        stack="Vigil",
        jobs=jobs,
        dead_letters={name: f"https://dlq/{name}" for name in jobs},
        job_entries={},
        control=None,  # type: ignore[arg-type]  # no action here
        runs=Runs(calls),  # type: ignore[arg-type]
        invoke=lambda *_: None,
        call=lambda *_: None,  # type: ignore[arg-type,return-value]
        sqs=Sqs(calls),
        cloudwatch=Alarms(calls),
        tasks=Tasks(calls),  # type: ignore[arg-type]
        observers=Registry(calls),  # type: ignore[arg-type]
        clock=lambda: NOW,
    )


def view(page: str, **params: Any) -> tuple[str, Calls]:
    calls = Calls()
    html = widget.answer({"page": page, **params}, services(calls), CONTROLS, Role.VIEW, "r-1")
    assert_inert(html)
    return html, calls


def test_the_jobs_page_counts_all_200_then_shows_one_page_of_25() -> None:
    html, calls = view("jobs")

    assert "jobs: <b>200</b>" in html and "failing: <b>20</b>" in html
    assert html.count("<b>job-") == 25  # failing first: the 20 failed, then 5 others
    assert "&quot;next&quot;:" in html  # the next page's button
    # the heads of all 200 (2 BatchGetItem), each shown job's dead letters
    assert calls == {"dynamodb:BatchGetItem": 2, "sqs:GetQueueAttributes": 25}


def test_the_tasks_page_reads_a_page_of_tasks_not_all_200() -> None:
    html, calls = view("tasks")

    assert "tasks: <b>200</b>" in html
    assert html.count("<b>task-") == 25
    assert calls == {"dynamodb:Query": 25, "sqs:GetQueueAttributes": 50}
    _, following = view("tasks", next=175)
    assert following == calls  # the last page costs the same


def test_the_observers_page_at_10000_reads_one_page_of_50() -> None:
    html, calls = view("observers")

    assert "active (desired running): <b>10000</b>" in html
    assert html.count("<b>obs-") == 50
    assert calls == {"dynamodb:Query": 1, "dynamodb:BatchGetItem": 1, "dynamodb:GetItem": 1}


def test_what_is_wrong_now_reads_the_heads_each_dead_letter_queue_and_one_page() -> None:
    html, calls = view("now")

    assert "failing or late jobs: <b>20</b>" in html
    # the heads (2) and the FAILED observers' page (1); every task's dead letters: this page's
    # reads grow with the tasks declared (200 here), the one page that does
    assert calls == {
        "dynamodb:BatchGetItem": 3,
        "sqs:GetQueueAttributes": 200,
        "dynamodb:Query": 1,
        "cloudwatch:DescribeAlarms": 1,
    }
