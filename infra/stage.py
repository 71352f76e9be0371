"""The stage a construct is synthesized for, read from the app's context (``-c stage=NAME``).

Constructs read it here rather than taking it as a parameter, so each one that names a metric, an
alarm's metric or a function's environment gets it the same way; outside a staged app (the
constructs' own tests) there is none and everything is as before stages.
"""

from __future__ import annotations

from typing import Any

from constructs import Construct

from vigil.contract.metrics import powertools_environment
from vigil.contract.stages import InvalidStage, check_stage

STAGE_CONTEXT = "stage"
"""A named stage: the stack ``Vigil-NAME`` with its own resources, metrics and alarms (none: the
stack ``Vigil``, as before stages)."""
API_GATEWAY_ACCOUNT_CONTEXT = "apiGatewayAccount"
"""Whether this stack sets the account's API Gateway CloudWatch Logs role (``AWS::ApiGateway::Account``,
one setting per account and region, which every API's access logging needs) before its API's
stage: every stage does (the default), so whichever stack is deployed first in a fresh account
works. ``false``: the account's role is set and kept by something else (another team, a landing
zone); a stack told so in an account without the role fails at its API's stage.

Two stacks that both set it each point the setting at their own role, the last deploy winning:
each role has the same AWS-managed policy and is kept when its stack is deleted (or its first
create rolls back), so the setting always names a role that works. Delete such a role by hand
only once ``aws apigateway get-account`` names another (docs/guides/deploying.md)."""


def stage_of(scope: Construct) -> str | None:
    """The stage's name, checked (CloudFormation's characters, room in every derived name)."""
    stage = scope.node.try_get_context(STAGE_CONTEXT)
    if stage is None:
        return None
    if not isinstance(stage, str):
        raise InvalidStage(f"stage {stage!r}: a name, not {type(stage).__name__}")
    return check_stage(stage)


def stage_environment(scope: Construct) -> dict[str, str]:
    """Powertools' names and the stage: the environment every function and container gets."""
    return powertools_environment(stage_of(scope))


def owns_api_gateway_account(scope: Construct) -> bool:
    """Whether this stack declares ``AWS::ApiGateway::Account`` (see API_GATEWAY_ACCOUNT_CONTEXT)."""
    value: Any = scope.node.try_get_context(API_GATEWAY_ACCOUNT_CONTEXT)
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"context {API_GATEWAY_ACCOUNT_CONTEXT}={value!r}: true or false")
