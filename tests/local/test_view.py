"""``vigil local up``'s live view clears the screen on every refresh: the ``export`` lines are drawn
again at its top, so they stay on screen to be copied."""

from __future__ import annotations

import io
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.conftest import REGION
from tests.helpers.tables import create_pk_sk_table
from tests.helpers.tasks import ORDERED, PLAIN, build_stack
from vigil.clock import ManualClock
from vigil.tasks.catalog import Catalog
from vigil_tools.local import view
from vigil_tools.local.up import _Running, exports, pointer_lines
from vigil_tools.local.view import CLEAR

URL = "http://127.0.0.1:4580"
SERVICES = ("sqs", "events", "scheduler")


class Clock:
    def __call__(self) -> datetime:
        return datetime(2026, 11, 23, 6, 0, tzinfo=UTC)

    def elapsed(self) -> float:
        return 60.0  # a refresh is due


class Stub:
    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


def test_the_export_lines_stay_on_screen_after_a_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[tuple[Any, ...]] = []
    monkeypatch.setattr(view, "render", lambda *a: shown.append(a) or "JOBS AND OBSERVERS")
    tasks = Catalog({})
    stop = threading.Event()
    out = io.StringIO()
    env = exports(URL, URL + "/vigil-api")
    running = _Running(
        session=None,
        live=Stub(tick=lambda: None),
        containers=Stub(sync=stop.set),  # one round of the loop
        fleet=Stub(registry_table="registry", hosts_table=""),
        catalog=None,
        clock=Clock(),
        endpoint=Stub(url=URL),
        speed=1.0,
        out=out,
        pointers=pointer_lines(env),
        tasks=tasks,
    )

    running.loop(stop, quiet=False)
    assert shown[0][-2] is tasks  # the stack's tasks reach the view (then the hosts table)

    refreshed = out.getvalue().split(CLEAR)[-1].splitlines()
    assert [line for line in refreshed if line.startswith("export ")] == [
        f"export {name}={value}" for name, value in env.items()
    ]
    assert f"aws --endpoint-url {URL} sqs list-queues" in refreshed
    assert refreshed[-1] == "JOBS AND OBSERVERS"


def test_the_local_guide_shows_the_lines_local_up_prints() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "local.md").read_text()
    env = exports("http://127.0.0.1:4580", "http://127.0.0.1:4580/vigil-api")

    printed = "\n".join(pointer_lines(env))

    assert f"```bash\n{printed}\n```" in guide


def test_the_view_shows_each_tasks_counts_by_status_and_its_queue(
    dynamodb: Any, clock: ManualClock
) -> None:
    """The view showed jobs and observers only: a task's backlog, failures and dead letters
    could not be seen while ``vigil local up`` ran."""
    sqs, events, scheduler = (boto3.client(kind, region_name=REGION) for kind in SERVICES)
    table = create_pk_sk_table(dynamodb, "vigil-tasks")
    stack = build_stack(dynamodb, sqs, events, scheduler, clock, table)
    client = stack.client()
    for key in ("o-1", "o-2"):
        client.enqueue(PLAIN, {}, key=key)
    client.enqueue(PLAIN, {}, key="o-3", delay=60)
    client.cancel(PLAIN, "o-2")
    sqs.send_message(QueueUrl=stack.catalog.spec(PLAIN).dead_letter_url, MessageBody="{}")

    lines = view.render_tasks(sqs, dynamodb, stack.catalog, clock()).splitlines()

    assert lines[0].split() == [
        "TASK", "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNCERTAIN",
        "SLEEPING", "WAITING", "COMPENSATED", "STUCK", "IN-QUEUE", "DELAYED", "IN-FLIGHT",
        "DEAD-LETTERS",
    ]  # fmt: skip
    assert lines[1].split() == [ORDERED, *"0" * 9, "-", *"0" * 4]  # "-": no max_duration
    assert lines[2].split() == [
        PLAIN,
        "2",
        "0",
        "0",
        "0",
        "1",
        "0",
        "0",
        "0",
        "0",
        "-",
        "2",
        "1",
        "0",
        "1",
    ]
