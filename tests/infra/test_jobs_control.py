"""The jobs-control construct: its routes, its least-privilege grants and its audit schedule."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import App, Duration

from infra.runs_table import JobRunsTable
from infra.scheduled_job import ScheduledJob
from infra.stack import VigilStack
from vigil_tools.emulator.template import Synthesized


def _policies_of(synthesized: Synthesized, path: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesized.resources("AWS::IAM::Policy").values()
        if path in policy["Metadata"]["aws:cdk:path"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_jobs_routes_join_the_observers_api_with_iam_on_every_method(
    synthesized: Synthesized,
) -> None:
    apis = synthesized.resources("AWS::ApiGateway::RestApi")
    assert len(apis) == 1, "one endpoint for observers and jobs"
    paths = {
        r["Properties"]["PathPart"]
        for r in synthesized.resources("AWS::ApiGateway::Resource").values()
    }
    assert {"jobs", "{proxy+}"} <= paths
    methods = synthesized.resources("AWS::ApiGateway::Method").values()
    assert all(m["Properties"]["AuthorizationType"] == "AWS_IAM" for m in methods)


def test_the_control_function_touches_only_the_stacks_jobs_items_and_functions(
    synthesized: Synthesized,
) -> None:
    """One statement each at any number of jobs (listing them passed IAM's 10,240 characters
    near a hundred jobs): the jobs' key prefix, their functions' name prefix, their catalog."""
    statements = _policies_of(synthesized, "JobsControl/Function")
    dynamodb = next(s for s in statements if "dynamodb:UpdateItem" in s["Action"])
    keys = dynamodb["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert keys == ["JOB#*"]
    invoke = next(s for s in statements if s["Action"] == "lambda:InvokeFunction")
    assert json.dumps(invoke["Resource"]).endswith(':function:Vigil_job_*"]]}')
    catalog = json.dumps([s["Resource"] for s in statements if "ssm:" in json.dumps(s["Action"])])
    assert catalog.count("parameter/vigil/Vigil/jobs") == 2, "the path, and its parts"
    assert "/tasks" not in catalog
    assert not any("ecs:" in str(s["Action"]) for s in statements)
    (function,) = [
        f
        for f in synthesized.resources("AWS::Lambda::Function").values()
        if "JobsControl/Function" in f["Metadata"]["aws:cdk:path"]
    ]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["VIGIL_STACK"] == "Vigil" and "VIGIL_JOBS" not in variables


def test_the_audit_runs_on_its_own_schedule(synthesized: Synthesized) -> None:
    audit = next(
        s
        for s in synthesized.resources("AWS::Scheduler::Schedule").values()
        if "/JobsControl/" in s["Metadata"]["aws:cdk:path"]
    )
    assert audit["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    assert json.loads(audit["Properties"]["Target"]["Input"]) == {"vigil-audit": True}


def test_without_a_fleet_the_jobs_get_an_api_of_their_own(tmp_path: Any) -> None:
    app = App(outdir=str(tmp_path))

    def jobs(scope: Any, runs: JobRunsTable) -> list[ScheduledJob]:
        return [
            ScheduledJob(
                scope,
                "Cleanup",
                handler="jobs.cleanup.handler",
                schedule="rate(5 minutes)",
                runs_table=runs.table,
                max_duration=Duration.seconds(30),
            )
        ]

    stack = VigilStack(app, "JobsOnly", declare_jobs=jobs)
    template = app.synth().get_stack_by_name(stack.stack_name).template
    resources = template["Resources"].values()
    assert sum(r["Type"] == "AWS::ApiGateway::RestApi" for r in resources) == 1
    assert "JobsApiEndpoint" in template["Outputs"]
    alarms = [r for r in resources if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert any("JobRunTooLong" in json.dumps(a["Properties"].get("Metrics")) for a in alarms)
    # The same security baseline as the observers' API: access logs with the caller, throttling.
    (stage,) = [r for r in resources if r["Type"] == "AWS::ApiGateway::Stage"]
    assert "caller" in stage["Properties"]["AccessLogSetting"]["Format"]
    assert stage["Properties"]["MethodSettings"][0]["ThrottlingRateLimit"] == 50
