"""The console functions' IAM grants in the synthesized template (the shared ``synthesized``
fixture): the view function holds no write of any kind, and the operate function's writes are
exactly those its buttons' library calls send. Reads the template only: about 0.01 s after the
shared synth."""

from __future__ import annotations

from typing import Any

WRITES = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "sqs:SendMessage",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "lambda:InvokeFunction",
    "scheduler:DeleteSchedule",
    "scheduler:CreateSchedule",
    "s3:PutObject",
)
OPERATE_DYNAMODB_WRITES = {"dynamodb:UpdateItem"}
"""Pause, resume, settle (a tick, a task), cancel, restart, stop and an observer's settle are
conditional updates (alone or in a transaction of updates): no PutItem, no DeleteItem."""


def actions(template: dict[str, Any], role: str) -> set[str]:
    found: set[str] = set()
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::IAM::Policy" or not logical_id.startswith(role):
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            action = statement["Action"]
            found.update(action if isinstance(action, list) else [action])
    assert found, role
    return found


def test_the_view_function_holds_no_write(synthesized: Any) -> None:
    held = actions(synthesized.template, "ConsoleViewFunctionRole")

    assert held & set(WRITES) == set()
    assert not any(a.endswith("*") for a in held)


def test_the_operate_function_writes_only_what_its_buttons_send(synthesized: Any) -> None:
    held = actions(synthesized.template, "ConsoleOperateFunctionRole")

    dynamodb_writes = {a for a in held & set(WRITES) if a.startswith("dynamodb:")}
    assert dynamodb_writes == OPERATE_DYNAMODB_WRITES
    assert not any(a.endswith("*") for a in held)
