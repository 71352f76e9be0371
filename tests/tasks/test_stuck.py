"""A task (a flow, most often) stuck past its declared ``max_duration`` is found by the tasks
audit, named in its log, counted by task (``TaskStuck``, the task-stuck alarm's metric) and
listed by ``vigil tasks stuck``; one that ended is never. The audit reads the sparse
``deadlines`` index: a record is in it from its first claim to its final finish only."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from handlers.tasks_api import run_audit
from tests.helpers.tasks import PLAIN, Stack
from tests.tasks.conftest import HandlerFactory
from tests.tasks.test_examples import emf
from vigil.clock import iso
from vigil.contract.tasks import (
    DEADLINE_ATTRIBUTE,
    DEADLINES_INDEX,
    CatalogField,
    TaskEnv,
    TaskStatus,
)
from vigil.settings import SettingsError
from vigil.tasks import TaskRun
from vigil.tasks.audit import is_stuck
from vigil.tasks.catalog import Catalog
from vigil.tasks.enqueue import TaskClient
from vigil.tasks.flows.errors import Abort
from vigil.tasks.settings import TaskSettings
from vigil_tools import tasks_cli
from vigil_tools.local import view
from vigil_tools.testing.flow_queue import FlowQueue

MAX = timedelta(hours=1)
NOW = datetime.fromisoformat("2026-11-22T12:00:00+00:00")


@pytest.mark.parametrize(
    ("item", "stuck"),
    [
        ({"status": "SLEEPING", DEADLINE_ATTRIBUTE: "2026-11-22T11:59:59.000Z"}, True),
        ({"status": "WAITING", DEADLINE_ATTRIBUTE: "2026-11-22T11:00:00.000Z"}, True),
        ({"status": "RUNNING", DEADLINE_ATTRIBUTE: "2026-11-22T11:00:00.000Z"}, True),
        ({"status": "QUEUED", DEADLINE_ATTRIBUTE: "2026-11-22T11:00:00.000Z"}, True),  # a retry
        ({"status": "SLEEPING", DEADLINE_ATTRIBUTE: "2026-11-22T12:00:01.000Z"}, False),
        ({"status": "SUCCEEDED", DEADLINE_ATTRIBUTE: "2026-11-22T11:00:00.000Z"}, False),
        ({"status": "COMPENSATED", DEADLINE_ATTRIBUTE: "2026-11-22T11:00:00.000Z"}, False),
        ({"status": "SLEEPING"}, False),  # no max_duration when it started
        (None, False),
    ],
)
def test_a_record_is_stuck_when_it_has_not_ended_by_its_deadline(
    item: dict[str, Any] | None, stuck: bool
) -> None:
    assert is_stuck(item, NOW) is stuck


def test_max_duration_reaches_the_runtime_from_the_environment_and_the_catalog() -> None:
    env = {
        "VIGIL_TASK_NAME": PLAIN,
        "VIGIL_TASKS_TABLE": "t",
        "VIGIL_TASK_QUEUE_URL": "q",
        "VIGIL_TASK_DEAD_LETTER_URL": "d",
    }
    assert TaskSettings.from_env(env).max_duration is None
    declared = env | {TaskEnv.MAX_DURATION_SECONDS: "604800"}
    assert TaskSettings.from_env(declared).max_duration == timedelta(days=7)
    with pytest.raises(SettingsError, match=TaskEnv.MAX_DURATION_SECONDS):
        TaskSettings.from_env(env | {TaskEnv.MAX_DURATION_SECONDS: "a week"})
    entry = {"queue_url": "q", "table": "t", CatalogField.MAX_DURATION_SECONDS: 3600}
    catalog = Catalog.parse(json.dumps({PLAIN: entry}))
    assert catalog[PLAIN].max_duration == timedelta(hours=1)
    assert Catalog.parse(catalog.to_json())[PLAIN] == catalog[PLAIN]
    with pytest.raises(SettingsError, match="max_duration_seconds must be a positive integer"):
        Catalog.parse(json.dumps({PLAIN: entry | {CatalogField.MAX_DURATION_SECONDS: "1h"}}))


@pytest.fixture
def declared(stack: Stack) -> Stack:
    """The stack's ``send-receipt`` declares ``max_duration`` (its catalog entry says so)."""
    spec = stack.catalog.spec(PLAIN)
    stack.catalog = Catalog(
        {**dict(stack.catalog), PLAIN: dataclasses.replace(spec, max_duration=MAX)}
    )
    return stack


@pytest.fixture
def queue(declared: Stack) -> FlowQueue:
    spec = declared.catalog.spec(PLAIN)
    return FlowQueue(declared.sqs, declared.scheduler, spec.queue_url, declared.clock)


@pytest.fixture
def flows(declared: Stack, make_handler: HandlerFactory, queue: FlowQueue) -> Any:
    """The flow below, as its function runs it with ``max_duration`` in its environment."""

    def body(run: TaskRun, payload: dict[str, Any]) -> Any:
        if payload.get("fail"):
            raise RuntimeError("first attempt fails")
        if payload.get("sleep"):
            run.sleep("cool-off", timedelta(days=payload["sleep"]))
        if payload.get("wait"):
            run.wait_for("approval", timeout=timedelta(days=payload["wait"]))
        if payload.get("abort"):
            run.step("reserve", lambda: 1, compensate=lambda reserved: None)
            raise Abort("no stock")
        return run.step("done", lambda: "ok")

    return make_handler(
        body,
        sqs=queue,
        scheduler=queue.scheduler,
        scheduler_role_arn="arn:aws:iam::123456789012:role/vigil-tasks-scheduler",
        schedule_group="vigil-tasks",
        max_duration=MAX,
        backoff=timedelta(minutes=10),
    )


def _index(stack: Stack) -> dict[str, str]:
    items = stack.dynamodb.scan(TableName=stack.table, IndexName=DEADLINES_INDEX)["Items"]
    return {item["sk"]["S"]: item[DEADLINE_ATTRIBUTE]["S"] for item in items}


def test_a_flow_sleeping_past_its_max_duration_is_found_named_and_counted(
    declared: Stack,
    queue: FlowQueue,
    flows: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = declared.client(sqs=queue, scheduler=queue.scheduler)
    start = declared.clock()
    client.enqueue(PLAIN, {"sleep": 3}, key="sleeper")  # sleeps three days: stuck after 1 h
    client.enqueue(PLAIN, {}, key="quick")  # ends at once: never in the index after
    client.enqueue(PLAIN, {"fail": True}, key="retrying")  # fails, waits for its retry...
    queue.run(flows)
    assert client.get(PLAIN, "sleeper").status is TaskStatus.SLEEPING
    assert client.get(PLAIN, "quick").status is TaskStatus.SUCCEEDED
    deadline = iso(start + MAX)
    assert _index(declared) == {"sleeper": deadline, "retrying": deadline}
    client.cancel(PLAIN, "retrying")  # ...and is cancelled while QUEUED: ended, not by a finish
    assert client.get(PLAIN, "retrying").status is TaskStatus.CANCELLED

    declared.clock.advance(MAX - timedelta(seconds=1))
    capsys.readouterr()
    assert run_audit(client, declared.clock) == {"stranded": [], "stuck": []}
    assert not [m for m in emf(capsys.readouterr().out) if "TaskStuck" in m]

    declared.clock.advance(timedelta(seconds=2))
    assert run_audit(client, declared.clock) == {"stranded": [], "stuck": [f"{PLAIN} sleeper"]}
    output = capsys.readouterr().out
    (metric,) = [m for m in emf(output) if "TaskStuck" in m]
    assert metric["TaskStuck"] == [1.0] and metric["task"] == PLAIN
    (logged,) = [r.__dict__ for r in caplog.records if r.getMessage().startswith("task stuck")]
    assert (logged["task"], logged["id"], logged["status"]) == (PLAIN, "sleeper", "SLEEPING")
    assert logged["deadline"] == deadline and logged["wake_at"] == iso(start + timedelta(days=3))
    assert _index(declared) == {"sleeper": deadline}  # the cancelled one was taken out, once

    # The flow resumes after its sleep and ends: out of the index, no longer stuck.
    queue.run(flows, until=start + timedelta(days=3, minutes=1))
    assert client.get(PLAIN, "sleeper").status is TaskStatus.SUCCEEDED
    assert _index(declared) == {}
    assert run_audit(client, declared.clock)["stuck"] == []


def test_the_deadline_counts_from_the_first_start_through_every_resume(
    declared: Stack, queue: FlowQueue, flows: Any
) -> None:
    client = declared.client(sqs=queue, scheduler=queue.scheduler)
    client.enqueue(PLAIN, {"sleep": 1}, key="f", delay=600)  # asked to run in 10 minutes
    start = declared.clock()
    queue.run(flows, until=start + timedelta(minutes=10))
    assert _index(declared) == {"f": iso(start + timedelta(minutes=10) + MAX)}  # its first start
    queue.run(flows, until=start + timedelta(days=1, minutes=15))  # resumes, and ends
    assert client.get(PLAIN, "f").status is TaskStatus.SUCCEEDED and _index(declared) == {}


def test_the_live_view_and_the_metrics_count_flows_by_state_and_the_stuck_ones(
    declared: Stack, queue: FlowQueue, flows: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The live view (``vigil local up``) counts each task's records by status, flows' states
    included, and those stuck; each flow that goes to sleep or waits counts once for the
    stack's dashboard (``FlowSlept``, ``FlowWaited``: no ``task`` dimension)."""
    client = declared.client(sqs=queue, scheduler=queue.scheduler)
    for key, payload in (
        ("s-1", {"sleep": 3}),
        ("s-2", {"sleep": 3}),
        ("w-1", {"wait": 2}),
        ("c-1", {"abort": True}),
        ("ok", {}),
    ):
        client.enqueue(PLAIN, payload, key=key)
    capsys.readouterr()
    queue.run(flows)
    emitted = emf(capsys.readouterr().out)
    assert sum(sum(m.get("FlowSlept", [])) for m in emitted) == 2
    assert sum(sum(m.get("FlowWaited", [])) for m in emitted) == 1
    assert all("task" not in m for m in emitted if "FlowSlept" in m or "FlowWaited" in m)

    declared.clock.advance(MAX + timedelta(minutes=1))
    lines = view.render_tasks(declared.sqs, declared.dynamodb, declared.catalog, declared.clock())
    header, *rows = lines.splitlines()
    by_task = {row.split()[0]: dict(zip(header.split(), row.split(), strict=True)) for row in rows}
    counts = by_task[PLAIN]
    assert (counts["SLEEPING"], counts["WAITING"], counts["COMPENSATED"]) == ("2", "1", "1")
    assert (counts["SUCCEEDED"], counts["STUCK"]) == ("1", "3")  # the sleepers and the waiter
    assert {row["STUCK"] for task, row in by_task.items() if task != PLAIN} == {"-"}


def test_vigil_tasks_stuck_lists_them_and_a_task_without_max_duration_is_refused(
    declared: Stack, queue: FlowQueue, flows: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = declared.client(sqs=queue, scheduler=queue.scheduler)
    client.enqueue(PLAIN, {"sleep": 2}, key="sleeper")
    queue.run(flows)
    declared.clock.advance(MAX * 2)
    monkeypatch.setattr(tasks_cli, "datetime", _Frozen(declared.clock()))
    listed = _stuck_cli(client, PLAIN, as_json=True)
    assert [(s["task"], s["id"], s["status"]) for s in json.loads(listed)] == [
        (PLAIN, "sleeper", "SLEEPING")
    ]
    table = _stuck_cli(client, None, as_json=False)
    assert "sleeper" in table and "SLEEPING" in table and "DEADLINE" in table
    other = next(name for name in declared.catalog if name != PLAIN)
    with pytest.raises(tasks_cli.TasksError, match="declares no max_duration"):
        _stuck_cli(client, other, as_json=False)


def _stuck_cli(client: TaskClient, task: str | None, *, as_json: bool) -> str:
    out = io.StringIO()
    tasks_cli._stuck(client.catalog, client, task, out, as_json=as_json)
    return out.getvalue()


class _Frozen:
    """``datetime`` as the CLI reads it, at the test's clock."""

    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self, tz: Any = None) -> datetime:
        return self._now
