"""The tasks guide's whole example of a web app in another CDK stack synthesizes, and its role
gets what ``vigil.tasks`` needs there and nothing more: the catalog's parameters, the task's
queue, its own records (read and put), its results, its schedules. (One synth of Vigil's stack
and the web stack: about 20 s.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.templates import actions

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "tasks.md"
MARKED = re.compile(r"<!-- example: synth -->\s*```python\n(.*?)```", re.DOTALL)


def test_the_web_app_example_synthesizes_with_its_grants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (code,) = MARKED.findall(GUIDE.read_text())
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "checkout.py").write_text("def handler(event, context): ...\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "cdk.out"))
    scope: dict[str, Any] = {"__name__": "web_example"}
    exec(compile(code, "tasks.md (web app)", "exec"), scope)

    assembly = scope["app"].synth()
    web = json.loads(Path(assembly.get_stack_by_name("Web").template_full_path).read_text())
    (function,) = [r for r in web["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert function["Properties"]["Environment"]["Variables"] == {"VIGIL_STACK": "Vigil"}
    (policy,) = [r for r in web["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(a for s in statements for a in actions(s)) == [
        "dynamodb:BatchGetItem",  # enqueue_many's keys
        "dynamodb:GetItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "iam:PassRole",
        "s3:GetObject",
        "scheduler:CreateSchedule",
        "sqs:SendMessage",
        "ssm:GetParameter",
        "ssm:GetParameters",
        "ssm:GetParametersByPath",
    ]
    records = [s for s in statements if "dynamodb:GetItem" in actions(s)]
    assert all(
        s["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"] == ["TASK#send-receipt"]
        for s in records
    )
    (journal,) = [s for s in statements if "dynamodb:Query" in actions(s)]
    assert journal["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == [
        "TASK#send-receipt/*"
    ]  # get reads a flow's step timeline from its journal
    assert "/vigil/Vigil/tasks" in json.dumps(statements)


def test_an_unknown_task_name_is_refused_naming_the_tasks() -> None:
    from aws_cdk import App

    from app import declare_jobs, declare_tasks
    from infra.stack import VigilStack

    vigil = VigilStack(App(), "Vigil", declare_jobs=declare_jobs, declare_tasks=declare_tasks)
    with pytest.raises(
        ValueError, match="no task 'send-reciept'; the tasks are: onboard-tenant, provision-tenant"
    ):
        vigil.task("send-reciept")
