"""The one shape of a Vigil management API: IAM on every method, JSON access logs, stage throttling.

The observers' API and, in a stack without a fleet, the jobs' own API are built from these options,
so a security property added to one cannot be missing from the other.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.stage import owns_api_gateway_account

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
    ``cloud_watch_role``): only the stage that owns it declares it (``infra.stage``).
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
