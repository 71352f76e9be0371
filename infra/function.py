"""The single Lambda factory: every Vigil function gets the same runtime, layer, logs and tracing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.errors import ConfigurationError
from infra.handler_paths import validate_handler
from infra.pins import pinned
from infra.roles import InlineRole
from infra.stage import stage_environment

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "functions"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "observers/Dockerfile", "requirements.txt"]


Fail = Callable[[str, str], ConfigurationError]
"""``fail(parameter, problem)``: the error a construct raises, naming itself and the parameter."""


def whole_seconds(fail: Fail, parameter: str, duration: Duration) -> int:
    exact = duration.to_seconds(integral=False)
    if exact != int(exact):
        raise fail(parameter, f"{exact} s: must be whole seconds")
    return int(exact)


def check_function(fail: Fail, *, handler: str, timeout: Duration, memory_size: int) -> int:
    """What Lambda would refuse at deploy (and a handler that does not exist), refused at synth;
    the timeout in seconds."""
    if problem := validate_handler(handler, FUNCTIONS_DIR):
        raise fail("handler", problem)
    seconds = whole_seconds(fail, "timeout", timeout)
    if not 1 <= seconds <= 900:
        raise fail("timeout", f"{seconds} s is outside Lambda's 1 s to 15 minutes")
    if not 128 <= memory_size <= 10_240:
        raise fail("memory_size", f"{memory_size} MB is outside Lambda's 128-10240 MB")
    return seconds


def powertools_layer_parameter() -> str:
    """The public SSM parameter holding the layer ARN of the Powertools that requirements.txt pins.

    Powertools publishes one per release, architecture and runtime; CloudFormation resolves it at
    deploy time in the target region, so no layer number is written anywhere.
    """
    version = pinned("aws-lambda-powertools")
    return f"/aws/service/powertools/python/{ARCHITECTURE.name}/{RUNTIME.name}/{version}"


def powertools_layer(scope: Construct) -> lambda_.ILayerVersion:
    """The public Powertools layer (Powertools, pydantic, X-Ray SDK), one per stack."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child("PowertoolsLayer")
    if existing is not None:
        return existing  # type: ignore[return-value]
    arn = ssm.StringParameter.value_for_string_parameter(stack, powertools_layer_parameter())
    return lambda_.LayerVersion.from_layer_version_arn(stack, "PowertoolsLayer", arn)


def functions_code() -> lambda_.Code:
    return lambda_.Code.from_asset(str(FUNCTIONS_DIR), exclude=ASSET_EXCLUDES)


def vigil_function(
    scope: Construct,
    construct_id: str,
    *,
    handler: str,
    description: str,
    environment: dict[str, str],
    timeout: Duration,
    memory_size: int = 256,
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    shared_logs: SharedLogs | None = None,
) -> lambda_.Function:
    """A Vigil function. With ``shared_logs``, it has that fixed name and logs into that shared
    group, its role allowed its own streams only (its policy inline: ``InlineRole``); without, it
    gets a log group and role of its own, as the stack's own functions do."""
    if shared_logs is not None:
        role: iam.Role = InlineRole(
            scope,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Vigil function {shared_logs.function_name}: its log streams, and what "
            "its construct grants",
        )
        shared_logs.grant(role)
        log_group: logs.ILogGroup = shared_logs.log_group
    else:
        own = logs.LogGroup(
            scope,
            f"{construct_id}Logs",
            retention=log_retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        # Its own role, allowed to write its own log group only (no AWS-managed basic execution
        # policy, which lets a function write to every log group of the account).
        role = iam.Role(
            scope,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Vigil function {construct_id}: its log group, and what its construct "
            "grants",
        )
        own.grant_write(role)
        log_group = own
    return lambda_.Function(
        scope,
        construct_id,
        function_name=shared_logs.function_name if shared_logs else None,
        role=role,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        handler=handler,
        code=functions_code(),
        description=description,
        timeout=timeout,
        memory_size=memory_size,
        layers=[powertools_layer(scope)],
        tracing=lambda_.Tracing.ACTIVE,
        log_group=log_group,
        environment={
            **stage_environment(scope),
            "POWERTOOLS_LOG_LEVEL": "INFO",
            **environment,
        },
    )


@dataclass(frozen=True)
class SharedLogs:
    """A function's fixed name and the log group it shares with others of its shard.

    In a group that several functions share, Lambda names each stream
    ``YYYY/MM/DD/<function name>[<version>]<instance>``: a role may create streams in the group and
    put events into the streams of its own function's name only, so no function can write into
    another's logs (what its own log group gave it before).
    """

    function_name: str
    log_group: logs.ILogGroup

    def grant(self, role: iam.IRole) -> None:
        group = self.log_group.log_group_arn  # arn:...:log-group:NAME:*
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["logs:CreateLogStream"], resources=[group])
        )
        stream = Stack.of(self.log_group).format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{self.log_group.log_group_name}:log-stream:"
            f"{OWN_STREAMS.format(function=self.function_name)}",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["logs:PutLogEvents"], resources=[stream])
        )


OWN_STREAMS = "????/??/??/{function}[*"
"""The streams Lambda writes one function's logs to in a shared group (the date, then its name)."""


class InvokeTarget(targets.LambdaInvoke):
    """An EventBridge Scheduler target that may invoke the function it names and nothing else.

    CDK's ``LambdaInvoke`` grants its role the function *and* ``<arn>:*`` (every version and
    alias), a wildcard a schedule that invokes the unqualified ARN never uses.
    """

    def __init__(self, function: lambda_.IFunction, **props: Any) -> None:
        super().__init__(function, **props)
        self._function = function

    def _add_target_action_to_role(self, role: iam.IRole) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"], resources=[self._function.function_arn]
            )
        )
