"""The one shape of a Vigil management API: IAM on every method, JSON access logs, stage throttling.

The observers' API and, in a stack without a fleet, the jobs' own API are built from these options,
so a security property added to one cannot be missing from the other.

Who may call it: IAM decides. Without context ``operators``, any principal of the account whose
IAM policies allow ``execute-api:Invoke`` on it; with ``-c operators=ARN,ARN`` (or a JSON list in
``cdk.json``), a resource policy allows those roles and users and denies everyone else, even a
principal granted ``execute-api:Invoke`` on ``*``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.errors import ConfigurationError
from infra.stage import owns_api_gateway_account

OPERATORS_CONTEXT = "operators"
"""The IAM role and user ARNs allowed to call the management API (a list, or one
comma-separated string); none: only principals the account's own policies allow."""
OPERATOR_ARN = re.compile(r"arn:aws(-[a-z]+)*:iam::\d{12}:(role|user)/[\w+=,.@/-]{1,512}")
"""An IAM role or user (a path allowed): what ``aws:PrincipalArn`` holds for its requests."""
INVOKE_ANY_METHOD = "execute-api:/*"
API_GATEWAY_TIMEOUT_SECONDS = 29
"""API Gateway's integration timeout: a REST API answers 504 after it, whatever the function does."""

ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "extendedRequestId": "$context.extendedRequestId",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "path": "$context.path",
    "resourcePath": "$context.resourcePath",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integration.error",
    "sourceIp": "$context.identity.sourceIp",
    "userAgent": "$context.identity.userAgent",
    # Who called: the SigV4 identity API Gateway authorized (IAM authorization on every method).
    "caller": "$context.identity.caller",
    "user": "$context.identity.user",
    "userArn": "$context.identity.userArn",
    "accountId": "$context.identity.accountId",
}
"""The API's JSON access log line (``$context`` variables API Gateway fills in per request)."""


def access_log_group(scope: Construct, retention: logs.RetentionDays) -> logs.LogGroup:
    return logs.LogGroup(
        scope, "ApiAccessLogs", retention=retention, removal_policy=RemovalPolicy.DESTROY
    )


def management_api_options(
    scope: Construct, access_logs: logs.ILogGroup, purpose: str
) -> dict[str, Any]:
    """RestApi keyword arguments: SigV4 (IAM) on every method, the root included; every request
    access-logged as JSON with the caller's IAM identity; the stage throttled.

    Its name is the stack's and ``purpose``: unique in the account and region, as it must be, since
    API Gateway's metrics (and so the 5XX alarm and the dashboard row) are keyed by the API's name.
    API Gateway writes logs through one role per account and region (``AWS::ApiGateway::Account``,
    ``cloud_watch_role``): every stack sets it before its stage, unless told the account's role is
    set elsewhere (``infra.stage.API_GATEWAY_ACCOUNT_CONTEXT``).
    """
    return {
        "rest_api_name": f"{Stack.of(scope).stack_name}-{purpose}",
        "cloud_watch_role": owns_api_gateway_account(scope),
        "default_method_options": apigateway.MethodOptions(
            authorization_type=apigateway.AuthorizationType.IAM
        ),
        "deploy_options": apigateway.StageOptions(
            stage_name="v1",
            tracing_enabled=True,
            throttling_rate_limit=50,
            throttling_burst_limit=100,
            access_log_destination=apigateway.LogGroupLogDestination(access_logs),
            access_log_format=apigateway.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS)),
        ),
    }


def api_backed(function: lambda_.Function) -> lambda_.Function:
    """``function``, once its timeout is checked to fit API Gateway's 29 s: a longer one would
    answer the caller 504 while it carries on (a caller that retries then runs the work twice).
    Every function the management API integrates goes through here (:func:`api_integration`)."""
    cfn = function.node.default_child
    seconds = cfn.timeout if isinstance(cfn, lambda_.CfnFunction) else None
    if isinstance(seconds, int | float) and seconds > API_GATEWAY_TIMEOUT_SECONDS:
        raise ConfigurationError(
            function.node.path,
            "timeout",
            f"{seconds} s behind the management API: API Gateway answers 504 after "
            f"{API_GATEWAY_TIMEOUT_SECONDS} s, so the function must time out first",
        )
    return function


def api_integration(function: lambda_.Function) -> apigateway.LambdaIntegration:
    """The management API's integration of a function whose timeout fits API Gateway's."""
    return apigateway.LambdaIntegration(api_backed(function))


def operators(scope: Construct) -> list[str]:
    """The role and user ARNs of context ``operators``: a list, or one comma-separated string (as
    ``cdk deploy -c operators=...`` passes it). Any other ARN fails the synth, naming it."""
    value = scope.node.try_get_context(OPERATORS_CONTEXT)
    if value is None:
        return []
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("[") else value.split(",")
    if not isinstance(value, list) or not all(isinstance(arn, str) for arn in value):
        raise ConfigurationError(
            "ManagementApi", f"context {OPERATORS_CONTEXT}", f"{value!r} is not a list of ARNs"
        )
    arns = [arn.strip() for arn in value if arn.strip()]
    for arn in arns:
        if not OPERATOR_ARN.fullmatch(arn):
            raise ConfigurationError(
                "ManagementApi",
                f"context {OPERATORS_CONTEXT}",
                f"{arn!r} is not an IAM role or user ARN (arn:aws:iam::ACCOUNT:role/NAME or "
                "arn:aws:iam::ACCOUNT:user/NAME)",
            )
    return sorted(set(arns))


def restrict_to_operators(api: apigateway.RestApi) -> None:
    """With context ``operators``: the API's resource policy allows only them and explicitly
    denies every other principal (an explicit deny beats any IAM allow). Without it, nothing:
    IAM authorization lets in whoever the account's policies allow.

    API Gateway applies a changed resource policy at the next deployment, so the operators are
    part of the deployment's identity: changing them deploys the stage again.
    """
    arns = operators(api)
    if not arns:
        return
    api.add_to_resource_policy(
        iam.PolicyStatement(
            sid="OperatorsOnly",
            principals=[iam.ArnPrincipal(arn) for arn in arns],
            actions=["execute-api:Invoke"],
            resources=[INVOKE_ANY_METHOD],
        )
    )
    api.add_to_resource_policy(
        iam.PolicyStatement(
            sid="NobodyElse",
            effect=iam.Effect.DENY,
            principals=[iam.AnyPrincipal()],
            actions=["execute-api:Invoke"],
            resources=[INVOKE_ANY_METHOD],
            conditions={"StringNotEquals": {"aws:PrincipalArn": arns}},
        )
    )
    if api.latest_deployment is not None:
        api.latest_deployment.add_to_logical_id({OPERATORS_CONTEXT: arns})
