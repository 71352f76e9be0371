"""Every deploy quota is checked at synth, and a template past one fails naming the quota, the limit,
its AWS source and the construct (``infra.quotas``; issue 29). Templates written by hand here, at
the size that passes each limit: what a declaration can grow is counted as CloudFormation fills it
in at its longest (a queue's URL, a role's ARN), not as the token the template holds.

Cost: no synth; each test well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.quotas import (
    ATTACHED_POLICIES,
    DASHBOARD_WIDGETS,
    ENVIRONMENT,
    INLINE_POLICIES,
    INSIGHTS_SERIES,
    QUEUE_URL,
    RESOURCES,
    QuotaExceeded,
    Template,
    check_assembly,
    problems,
)


def template(resources: dict[str, Any], name: str = "Vigil") -> Template:
    body = {"Resources": resources}
    return Template(name, body, len(json.dumps(body)), {})


def at(path: str, resource: dict[str, Any]) -> dict[str, Any]:
    return {**resource, "Metadata": {"aws:cdk:path": path}}


def queue() -> dict[str, Any]:
    return {"Type": "AWS::SQS::Queue", "Properties": {}}


def function(name: str = "Vigil_job_x", **variables: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {"FunctionName": name, "Environment": {"Variables": variables}},
    }


def test_an_environment_that_resolves_past_4_kb_is_refused_though_its_tokens_are_short() -> None:
    # 40 queue URLs: ~60 characters as tokens, each up to QUEUE_URL once deployed.
    refs = {f"QUEUE_{i}": {"Ref": f"Queue{i}"} for i in range(40)}
    resources = {f"Queue{i}": queue() for i in range(40)}
    resources["Fn"] = at("Vigil/Api/Function/Resource", function(**refs))
    assert len(json.dumps(refs)) < ENVIRONMENT.limit < 40 * QUEUE_URL
    (problem,) = problems([template(resources)])
    assert problem.quota is ENVIRONMENT
    message = str(problem)
    assert message.startswith("Vigil/Api/Function/Resource: ")
    assert "bytes of a Lambda function's environment variables" in message
    assert "over the limit of 4096" in message
    assert "https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html" in message


def test_a_roles_inline_policies_are_counted_together_with_the_policies_that_name_it() -> None:
    statement = {
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Resource": [{"Fn::GetAtt": [f"Queue{i}", "Arn"]} for i in range(90)],
    }
    role = {
        "Type": "AWS::IAM::Role",
        "Properties": {"Policies": [{"PolicyName": "own", "PolicyDocument": {"Statement": []}}]},
    }
    policy = {
        "Type": "AWS::IAM::Policy",
        "Properties": {"Roles": [{"Ref": "Role"}], "PolicyDocument": {"Statement": [statement]}},
    }
    resources = {f"Queue{i}": queue() for i in range(90)}
    resources |= {"Role": at("Vigil/Job/Role/Resource", role), "Policy": policy}
    (problem,) = problems([template(resources)])
    assert (problem.quota, problem.where) == (INLINE_POLICIES, "Vigil/Job/Role/Resource")
    assert problem.size > INLINE_POLICIES.limit


def test_a_shard_past_500_resources_is_named() -> None:
    shard = template({f"Queue{i}": queue() for i in range(501)}, "Vigil/Jobs3")
    (problem,) = problems([template({}), shard])
    assert (problem.quota, problem.where, problem.size) == (RESOURCES, "Vigil/Jobs3", 501)
    assert "resources in a stack, over the limit of 500" in str(problem)


def test_more_jobs_than_a_grouped_alarm_watches_are_refused() -> None:
    def functions(prefix: str, start: int, stop: int) -> dict[str, Any]:
        return {f"F{i}": function(f"{prefix}{i}") for i in range(start, stop)}

    other = {"Api": function("Vigil-api"), "Staged": function("Vigil-staging_job_x")}
    found = problems(
        [
            template(other),
            template(functions("Vigil_job_j", 0, 250), "Vigil/Jobs0"),
            template(functions("Vigil_job_j", 250, 501), "Vigil/Jobs1"),
            template(functions("Vigil_task_t", 0, 250), "Vigil/Tasks0"),
            template(functions("Vigil_task_t", 250, 500), "Vigil/Tasks1"),
        ]
    )
    assert [(p.quota, p.where, p.size) for p in found] == [(INSIGHTS_SERIES, "Vigil (jobs)", 501)]
    assert "time series a Metrics Insights query returns" in str(found[0])


def test_a_dashboard_past_500_widgets_is_refused() -> None:
    widgets = [{"type": "metric", "properties": {}} for _ in range(501)]
    body = json.dumps({"widgets": widgets}, separators=(",", ":"))
    dashboard = {"Type": "AWS::CloudWatch::Dashboard", "Properties": {"DashboardBody": body}}
    (problem,) = problems([template({"Board": at("Vigil/Board/Resource", dashboard)})])
    assert (problem.quota, problem.size) == (DASHBOARD_WIDGETS, 501)


def test_check_assembly_fails_listing_every_problem(tmp_path: Path) -> None:
    resources = {f"Queue{i}": queue() for i in range(501)}
    resources["Fn"] = at("Vigil/Fn/Resource", function(BIG="x" * 5000))
    (tmp_path / "Vigil.template.json").write_text(json.dumps({"Resources": resources}))
    (tmp_path / "Vigil.assets.json").write_text(json.dumps({"files": {}}))
    with pytest.raises(QuotaExceeded) as raised:
        check_assembly(tmp_path, "Vigil")
    lines = str(raised.value).splitlines()
    assert lines[0] == "stack Vigil would fail to deploy:"
    assert any(line.startswith("  Vigil: 502 resources in a stack") for line in lines)
    assert any(line.startswith("  Vigil/Fn/Resource: 50") and "4096" in line for line in lines)


def test_a_role_with_more_managed_policies_than_it_may_have_is_refused() -> None:
    def managed(role: str) -> dict[str, Any]:
        statement = {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}
        document = {"Statement": [statement]}
        return {
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {"PolicyDocument": document, "Roles": [{"Ref": role}]},
        }

    role = {
        "Type": "AWS::IAM::Role",
        "Properties": {"ManagedPolicyArns": ["arn:aws:iam::aws:policy/ReadOnlyAccess"]},
    }
    resources = {"Role": at("Vigil/Fleet/Role/Resource", role)}
    resources |= {f"Grants{i}": managed("Role") for i in range(10)}
    (problem,) = problems([template(resources)])
    assert (problem.quota, problem.where, problem.size) == (
        ATTACHED_POLICIES,
        "Vigil/Fleet/Role/Resource",
        11,
    )
