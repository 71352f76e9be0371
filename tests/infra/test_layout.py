"""The shards' naming refuses, at synth, what it cannot hold apart (issue 29): two jobs (tasks)
whose names meet once derived from their construct ids, and two function names that meet once cut
to Lambda's 64 characters. The error names both constructs and the parameter to change.

Cost: constructs only, no synth: well under a second each.
"""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack

from infra.background_task import BackgroundTask
from infra.errors import ConfigurationError
from infra.scheduled_job import ScheduledJob
from vigil.contract.layout import FUNCTION_NAME_LIMIT, Entity, function_name, function_prefix

JOB = {"handler": "jobs.cleanup.handler", "schedule": "rate(5 minutes)"}
TASK = {"handler": "tasks.send_receipt.handler"}


def test_construct_ids_that_differ_only_in_case_are_one_job_name() -> None:
    stack = Stack(App(), "Vigil")
    ScheduledJob(stack, "Cleanup", **JOB)
    with pytest.raises(ConfigurationError) as raised:
        ScheduledJob(stack, "cleanup", **JOB)
    message = str(raised.value)
    assert "ScheduledJob 'cleanup'" in message and "invalid job_name" in message
    assert "'cleanup' is taken by ScheduledJob 'Cleanup'" in message
    assert "differ only in case" in message and "pass job_name=..." in message


def test_two_tasks_of_one_name_are_refused() -> None:
    stack = Stack(App(), "Vigil")
    BackgroundTask(stack, "SendReceipt", **TASK)
    with pytest.raises(ConfigurationError) as raised:
        BackgroundTask(stack, "Receipts", task_name="send-receipt", **TASK)
    assert "'send-receipt' is taken by BackgroundTask 'SendReceipt'" in str(raised.value)


def test_a_job_and_a_task_may_share_a_name() -> None:
    stack = Stack(App(), "Vigil")
    job = ScheduledJob(stack, "Cleanup", **JOB)
    task = BackgroundTask(stack, "CleanupTask", task_name="cleanup", **TASK)
    assert job.function_name != task.function_name


def test_a_name_that_spells_another_jobs_cut_function_name_is_refused() -> None:
    stack_name = "Vigil-staging"
    long = "a" * 47  # <stack>_job_<47 characters>: past 64, cut and ended with a digest
    cut = function_name(stack_name, Entity.JOB, long)
    assert (
        len(cut) == FUNCTION_NAME_LIMIT
        and cut != f"{function_prefix(stack_name, Entity.JOB)}{long}"
    )
    spelled = cut.removeprefix(function_prefix(stack_name, Entity.JOB))
    stack = Stack(App(), stack_name)
    ScheduledJob(stack, "Long", job_name=long, **JOB)
    with pytest.raises(ConfigurationError) as raised:
        ScheduledJob(stack, "Spelled", job_name=spelled, **JOB)
    message = str(raised.value)
    assert f"its function name {cut!r} is ScheduledJob 'Long''s as well" in message
    assert "64 characters" in message
