"""Every IAM grant on a wildcard, one statement and one action at a time, against an allow-list.

cdk-nag names an IAM5 finding by its resource only (``IAM5[Resource::*]``), so acknowledging it
once for a policy used to accept every ``*`` statement of that policy: ``iam:CreateUser`` on ``*``
added to the reconciler's policy synthesized with zero findings. ``infra.nag.WILDCARDS`` now
accepts a grant by policy, action and resource; these tests read the synthesized template the same
way, and the deploying guide's list (docs/guides/deploying.md) is that allow-list.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from infra.errors import ConfigurationError
from infra.nag import (
    WILDCARDS,
    Grant,
    policy_grants,
    refuse_unaccepted_grants,
    suppress_accepted_findings,
    unexplained,
    wildcard_grants,
)
from infra.nag import wildcards_markdown as rendered
from vigil_tools.emulator.template import Synthesized

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "deploying.md"
START, END = "<!-- iam-wildcards:start -->", "<!-- iam-wildcards:end -->"


def template_grants(template: dict[str, Any]) -> list[Grant]:
    """Wildcard grants of every policy in a template: policies, roles' inline policies, managed."""
    grants = []
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            grants += wildcard_grants(logical_id, props["PolicyDocument"])
        elif resource["Type"] == "AWS::IAM::Role":
            for inline in props.get("Policies", []):
                grants += wildcard_grants(logical_id, inline["PolicyDocument"])
    return grants


def enqueue_grants() -> list[Grant]:
    """What ``grant_enqueue`` gives an application's role (the example app has none)."""
    from infra.background_task import BackgroundTask

    stack = Stack(App(), "App")
    task = BackgroundTask(stack, "SendReceipt", handler="tasks.send_receipt.handler")
    application = iam.Role(stack, "Application", assumed_by=iam.AccountRootPrincipal())
    task.grant_enqueue(application)
    document = stack.resolve(application.node.find_child("DefaultPolicy").document.to_json())
    return wildcard_grants("ApplicationDefaultPolicy", document)


def test_every_wildcard_grant_is_allow_listed_with_its_reason(synthesized: Synthesized) -> None:
    grants = [g for _, stack in synthesized.stacks() for g in template_grants(stack.template)]
    grants += enqueue_grants()
    assert unexplained(grants) == []
    # Every entry is still needed (a stale one would accept a future grant nobody reviewed).
    for wildcard in WILDCARDS:
        assert any(wildcard.accepts(grant) for grant in grants), wildcard
        assert len(wildcard.reason) >= 40, wildcard
    # The scheduler roles invoke their function's unqualified ARN, not ``<arn>:*``; only the jobs
    # control and the console's operate function (run now, a redrive) invoke by a prefix, the
    # stack's jobs' functions (``<stack>_job_*``).
    invoking = sorted(
        (g for g in grants if g.action == "lambda:InvokeFunction"), key=lambda g: g.policy
    )
    assert [g.resource.rsplit(":", 1)[-1] for g in invoking] == ["Vigil_job_*", "Vigil_job_*"]
    assert invoking[0].policy.startswith("ConsoleOperateFunctionRoleDefaultPolicy")
    assert invoking[1].policy.startswith("JobsControlFunctionRoleDefaultPolicy")


def test_a_new_action_on_an_accepted_wildcard_fails_the_check(synthesized: Synthesized) -> None:
    """Merged into the reconciler's statement on ``*``, as ``minimizePolicies`` would merge it."""
    template = copy.deepcopy(synthesized.template)
    (policy_id,) = [
        key
        for key, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::Policy" and key.startswith("ObserversReconcilerRole")
    ]
    statements = template["Resources"][policy_id]["Properties"]["PolicyDocument"]["Statement"]
    (on_star,) = [s for s in statements if s["Resource"] == "*" and "Condition" not in s]
    on_star["Action"] = [*on_star["Action"], "iam:CreateUser"]
    assert unexplained(template_grants(template)) == [Grant(policy_id, "iam:CreateUser", "*")]


@pytest.mark.parametrize(
    ("statement", "grant"),
    [
        (
            {"Action": "iam:CreateUser", "NotResource": "arn:aws:iam::1:user/admin"},
            ("iam:CreateUser", "NotResource[arn:aws:iam::1:user/admin]"),
        ),
        (
            {"NotAction": ["iam:*", "sts:*"], "Resource": "arn:aws:s3:::b/k"},
            ("NotAction[iam:*,sts:*]", "arn:aws:s3:::b/k"),
        ),
        (
            {"Action": "iam:CreateUse?", "Resource": "arn:aws:iam::1:user/u"},
            ("iam:CreateUse?", "arn:aws:iam::1:user/u"),
        ),
        (
            {"Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/?"},
            ("s3:GetObject", "arn:aws:s3:::b/?"),
        ),
    ],
    ids=["NotResource", "NotAction", "?-action", "?-resource"],
)
def test_a_not_element_or_a_question_mark_is_a_wildcard_in_the_template(
    synthesized: Synthesized, statement: dict[str, Any], grant: tuple[str, str]
) -> None:
    """cdk-nag, checkov and cfn-lint passed each of these (issue 33, item 14); so did this check,
    which read only ``Action`` and ``Resource`` for a ``*``."""
    template = copy.deepcopy(synthesized.template)
    (policy_id,) = [
        key
        for key, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::Policy" and key.startswith("ObserversReconcilerRole")
    ]
    document = template["Resources"][policy_id]["Properties"]["PolicyDocument"]
    document["Statement"].append({"Effect": "Allow", **statement})
    assert unexplained(template_grants(template)) == [Grant(policy_id, *grant)]
    # A Deny of the same shape narrows, it grants nothing
    document["Statement"][-1]["Effect"] = "Deny"
    assert unexplained(template_grants(template)) == []


BROAD = {
    "NotResource": lambda: iam.PolicyStatement(
        actions=["iam:CreateUser"], not_resources=["arn:aws:iam::1:user/admin"]
    ),
    "NotAction": lambda: iam.PolicyStatement(not_actions=["iam:*"], resources=["arn:aws:s3:::b/k"]),
    # (the CDK refuses a ? in an action; an L1 CfnPolicy would take one, as the template test shows)
    "?": lambda: iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::b/?"]),
}
"""A statement of each broad kind, built in the test (no construct at collection)."""


@pytest.mark.parametrize("kind", list(BROAD))
@pytest.mark.parametrize("holder", ["policy", "inline", "managed"])
def test_a_broad_grant_fails_the_synth_naming_its_construct(
    tmp_path: Path, kind: str, holder: str
) -> None:
    """What cdk-nag's IAM5 cannot see stops the app's synth here (app.py calls the check)."""
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Nagged")
    role = iam.Role(stack, "Worker", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    statement = BROAD[kind]()
    document = iam.PolicyDocument(statements=[statement])
    if holder == "policy":
        role.add_to_policy(statement)
        path = "Nagged/Worker/DefaultPolicy/Resource"
    elif holder == "inline":
        iam.Role(
            stack,
            "Inline",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            inline_policies={"broad": document},
        )
        path = "Nagged/Inline/Resource"
    else:
        iam.ManagedPolicy(stack, "Managed", document=document, roles=[role])
        path = "Nagged/Managed/Resource"
    with pytest.raises(ConfigurationError) as refused:
        refuse_unaccepted_grants(stack)
    message = str(refused.value)
    assert message.startswith(f"{path}: invalid IAM policy: a broad grant"), message
    assert (kind in message) if kind != "?" else ("arn:aws:s3:::b/?" in message), message


def test_a_narrow_policy_passes_the_broad_grant_check(tmp_path: Path) -> None:
    """Only grants an entry of WILDCARDS accepts (a narrow statement is no grant at all)."""
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Narrow")
    role = iam.Role(stack, "Worker", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=["arn:q"]))
    refuse_unaccepted_grants(stack)
    assert policy_grants(stack) == {}


class Observers(Construct):
    """Just enough of the fleet for the reconciler role's logical id."""

    def __init__(self, scope: Construct, extra: iam.PolicyStatement | None) -> None:
        super().__init__(scope, "Observers")
        role = iam.Role(
            self, "ReconcilerRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com")
        )
        role.add_to_policy(iam.PolicyStatement(actions=["dynamodb:ListStreams"], resources=["*"]))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecs:ListTasks"],
                resources=["*"],
                conditions={"ArnEquals": {"ecs:cluster": "arn:aws:ecs:us-east-1:1:cluster/c"}},
            )
        )
        if extra is not None:
            role.add_to_policy(extra)


@pytest.mark.parametrize("extra", [None, "iam:CreateUser"])
def test_cdk_nag_refuses_a_new_action_beside_an_accepted_wildcard(
    tmp_path: Path, extra: str | None
) -> None:
    """The same policy id, the same ``IAM5[Resource::*]`` finding: before, acknowledged for both."""
    app = App(outdir=str(tmp_path), context={"@aws-cdk/aws-iam:minimizePolicies": True})
    stack = Stack(app, "Nagged")
    Observers(stack, iam.PolicyStatement(actions=[extra], resources=["*"]) if extra else None)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    suppress_accepted_findings(stack)
    if extra is None:
        app.synth()
        return
    with pytest.raises(Exception, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    violations = [v for p in report["pluginReports"] for v in p["violations"]]
    assert [v["ruleName"] for v in violations] == ["AwsSolutions-IAM5[Resource::*]"]


def test_the_deploying_guide_lists_the_allow_list() -> None:
    text = GUIDE.read_text()
    assert START in text and END in text
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == rendered(), f"paste between the markers:\n{rendered()}"
