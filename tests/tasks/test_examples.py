"""The example tasks as Lambda runs them: settings from the environment ``BackgroundTask`` sets,
boto3 clients of their own, metrics per task."""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any

import pytest

from tests.helpers.tasks import ORDERED, PLAIN, Stack, invoke, records
from vigil.contract.tasks import TaskEnv, TaskStatus


def load(module: str, stack: Stack, task: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh import: a new container, reading this test's environment."""
    spec = stack.catalog.spec(task)
    for name, value in {
        TaskEnv.NAME: task,
        TaskEnv.TABLE: spec.table,
        TaskEnv.QUEUE_URL: spec.queue_url,
        TaskEnv.DEAD_LETTER_URL: spec.dead_letter_url,
        TaskEnv.ORDERED: str(spec.ordered).lower(),
        TaskEnv.RETRIES: "0",
    }.items():
        monkeypatch.setenv(name, value)
    return importlib.reload(importlib.import_module(module))


def emf(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if '"_aws"' in line]


def test_send_receipt_returns_its_receipt_and_counts_per_task(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load("tasks.send_receipt", stack, PLAIN, monkeypatch)
    client = stack.client()
    client.enqueue(PLAIN, {"order": "o-1", "email": "a@example.com", "total": 12}, key="o-1")
    client.enqueue(PLAIN, {"order": "o-2"}, key="o-2")
    assert (
        invoke(module.handler, records(stack.messages(stack.catalog.spec(PLAIN).queue_url))) == []
    )

    done, bad = client.get(PLAIN, "o-1"), client.get(PLAIN, "o-2")
    assert done.status is TaskStatus.SUCCEEDED and done.result["receipt"].startswith("R-")
    assert (bad.status, bad.error_type) == (TaskStatus.FAILED, "InvalidOrder")
    # The success counts for the stack, the failure for its task (a series only while it fails)
    blobs = emf(capsys.readouterr().out)
    (stack_wide,) = [m for m in blobs if "TaskSucceeded" in m]
    assert "task" not in stack_wide and stack_wide["TaskSucceeded"] == [1.0]
    (failed,) = [m for m in blobs if "TaskFailed" in m]
    assert failed["task"] == PLAIN and failed["TaskFailed"] == [1.0]


def test_provision_tenant_runs_a_tenants_steps_in_order_with_progress(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = load("tasks.provision_tenant", stack, ORDERED, monkeypatch)
    client = stack.client()
    for action in ("create", "resize", "delete"):
        client.enqueue(
            ORDERED, {"tenant": "t-1", "action": action}, key=f"t-1-{action}", group="t-1"
        )
    batch = records(stack.messages(stack.catalog.spec(ORDERED).queue_url))
    assert invoke(module.handler, batch) == []
    records_ = {r.id: r for r in client.list(ORDERED)[0]}
    assert [records_[f"t-1-{a}"].progress for a in ("create", "resize", "delete")] == [100] * 3
    assert records_["t-1-delete"].result == {
        "tenant": "t-1",
        "action": "delete",
        "steps": ["dns", "bucket", "database"],
    }
    started = sorted(records_.values(), key=lambda r: r.token or 0)  # claim time, in µs
    assert [r.id for r in started] == ["t-1-create", "t-1-resize", "t-1-delete"]
