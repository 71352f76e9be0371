"""The management API: its resource policy (named operators only, or without them the account's
IAM), and every function behind it answering within API Gateway's 29 s.

Given context ``operators``, when the app synthesizes, then the REST API's policy allows them and
denies every other principal, whatever IAM grants it; without it there is no resource policy.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from app import declare_observers
from infra.errors import ConfigurationError
from infra.management_api import (
    API_GATEWAY_TIMEOUT_SECONDS,
    api_integration,
    operators,
    restrict_to_operators,
)
from infra.stack import VigilStack
from vigil_tools.emulator.template import Synthesized

OPERATOR = "arn:aws:iam::123456789012:role/vigil-operator"
ONCALL = "arn:aws:iam::123456789012:user/ops/oncall"


@pytest.fixture(scope="module")
def with_operators() -> dict[str, Any]:
    """The stack with a fleet (the observers' API, the jobs and tasks routes on it), synthesized
    once for this module with two operators named."""
    app = App(context={"operators": f"{OPERATOR}, {ONCALL}"})
    stack = VigilStack(
        app, "Guarded", declare_jobs=lambda *_: [], declare_observers=declare_observers
    )
    return Template.from_stack(stack).to_json()


def rest_apis(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::ApiGateway::RestApi"
    ]


def test_operators_alone_may_invoke_and_everyone_else_is_denied(
    with_operators: dict[str, Any],
) -> None:
    (api,) = rest_apis(with_operators)
    allow, deny = api["Policy"]["Statement"]
    assert allow["Effect"] == "Allow" and allow["Action"] == "execute-api:Invoke"
    assert sorted(allow["Principal"]["AWS"]) == sorted([OPERATOR, ONCALL])
    assert allow["Resource"] == deny["Resource"] == "execute-api:/*"
    # An explicit deny: it beats an execute-api:Invoke grant on * in anyone's IAM policy.
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert deny["Action"] == "execute-api:Invoke"
    assert deny["Condition"] == {
        "StringNotEquals": {"aws:PrincipalArn": sorted([OPERATOR, ONCALL])}
    }


def test_without_operators_the_accounts_iam_decides(synthesized: Synthesized) -> None:
    (api,) = rest_apis(synthesized.template)
    assert "Policy" not in api


def deployment_id(context: dict[str, Any]) -> str:
    stack = Stack(App(context=context), "Api")
    api = apigateway.RestApi(stack, "Api")
    api.root.add_method("GET", apigateway.MockIntegration())
    restrict_to_operators(api)
    (found,) = Template.from_stack(stack).find_resources("AWS::ApiGateway::Deployment")
    return str(found)


def test_changing_the_operators_deploys_the_stage_again() -> None:
    """API Gateway applies a resource policy at the next deployment, not when it changes."""
    ids = {
        deployment_id({}),
        deployment_id({"operators": [OPERATOR]}),
        deployment_id({"operators": [OPERATOR, ONCALL]}),
    }
    assert len(ids) == 3


@pytest.mark.parametrize(
    "bad",
    [
        "arn:aws:iam::123456789012:group/admins",
        "arn:aws:iam::12345:role/short-account",
        "vigil-operator",
        "arn:aws:sts::123456789012:assumed-role/vigil-operator/session",
    ],
)
def test_a_bad_operator_arn_fails_the_synth_naming_it(bad: str) -> None:
    scope = Stack(App(context={"operators": [OPERATOR, bad]}), "Bad")
    with pytest.raises(ConfigurationError, match="context operators") as error:
        operators(scope)
    assert repr(bad) in str(error.value)


def test_operators_from_the_command_line_or_cdk_json() -> None:
    for value in (f"{OPERATOR},{ONCALL}", f'["{OPERATOR}", "{ONCALL}"]', [ONCALL, OPERATOR]):
        assert operators(Stack(App(context={"operators": value}), "S")) == sorted(
            [OPERATOR, ONCALL]
        )
    assert operators(Stack(App(), "None")) == []


def api_function_timeouts(template: dict[str, Any]) -> dict[str, int]:
    """Each function an API method integrates, and its timeout (s; Lambda's default is 3)."""
    resources = template["Resources"]
    integrated = json.dumps(
        [
            r["Properties"].get("Integration", {})
            for r in resources.values()
            if r["Type"] == "AWS::ApiGateway::Method"
        ]
    )
    return {
        logical_id: r["Properties"].get("Timeout", 3)
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function" and f'"{logical_id}"' in integrated
    }


def test_every_function_behind_the_api_times_out_before_api_gateway(
    synthesized: Synthesized,
) -> None:
    """Before: the jobs-control function ran 60 s and the tasks API's 30 s behind a 29 s 504."""
    timeouts = api_function_timeouts(synthesized.template)
    assert len(timeouts) == 3, timeouts  # the observers', jobs-control and tasks API functions
    assert all(seconds <= API_GATEWAY_TIMEOUT_SECONDS for seconds in timeouts.values()), timeouts


def test_a_function_slower_than_api_gateway_fails_the_synth_naming_it() -> None:
    stack = Stack(App(), "Slow")
    function = lambda_.Function(
        stack,
        "Slow",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
        timeout=Duration.seconds(30),
    )
    with pytest.raises(ConfigurationError, match=r"Slow/Slow: invalid timeout: 30 s behind"):
        api_integration(function)
