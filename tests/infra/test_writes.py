"""``writes=[...]`` on jobs and tasks: exactly those resources granted and named in the
environment; anything else fails the synth naming the construct and the parameter."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from infra.background_task import BackgroundTask
from infra.errors import ConfigurationError
from infra.observer_fleet import ObserverFleet, ObserverKind
from infra.scheduled_job import ScheduledJob
from tests.helpers.templates import Stacks, actions
from vigil.contract.effects import WRITES_ENV, WriteKind
from vigil.contract.tasks import TaskEnv
from vigil.effects.fence import Grants

JOB = {"handler": "jobs.cleanup.handler", "schedule": "rate(5 minutes)"}


def resources(stack: Stack) -> list[Any]:
    table = dynamodb.Table(
        stack,
        "Sessions",
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
    )
    return [
        table,
        s3.Bucket(stack, "Reports"),
        sqs.Queue(stack, "Mail", fifo=True),
        events.EventBus(stack, "Bus"),
    ]


def resolved(value: Any) -> Any:
    """A template value with ``Fn::Join`` joined and each ``Ref`` as ``<logical id>``."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolved(part)) for part in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return value


def statements(template: Stacks, role_prefix: str) -> list[dict[str, Any]]:
    found = template.role_statements(role_prefix)
    assert found, role_prefix
    return found


@pytest.fixture(scope="module")
def template() -> Stacks:
    """One stack for the synthesizing tests (a synth costs tens of seconds here): a job declaring
    all four kinds, a job declaring nothing, a task and an observer kind declaring a table."""
    stack = Stack(App(), "Test", env=Environment(account="123456789012", region="us-east-1"))
    declared = resources(stack)
    kinds = {
        "ticker": ObserverKind("observers.ticker.run", writes=(declared[0],)),
        "quiet": ObserverKind("observers.ticker.run"),
    }
    ObserverFleet(stack, "Observers", kinds=kinds, heartbeat_interval=Duration.seconds(20))
    ScheduledJob(stack, "Cleanup", writes=declared, **JOB)
    ScheduledJob(stack, "Quiet", **JOB)
    BackgroundTask(stack, "SendReceipt", handler="tasks.send_receipt.handler", writes=declared[:1])
    ScheduledJob(stack, "Encrypted", writes=encrypted(stack), **JOB)
    return Stacks(stack)


def encrypted(stack: Stack) -> list[Any]:
    """A table and a bucket under one customer-managed key (construct id ``Key``)."""
    key = kms.Key(stack, "Key")
    table = dynamodb.Table(
        stack,
        "EncryptedSessions",
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
        encryption_key=key,
    )
    return [table, s3.Bucket(stack, "EncryptedReports", encryption_key=key)]


def variables_of(template: Stacks) -> list[dict[str, str]]:
    return [
        f["Properties"]["Environment"]["Variables"]
        for f in template.find_resources("AWS::Lambda::Function").values()
    ]


def test_a_job_gets_exactly_the_declared_writes_and_their_names(template: Stacks) -> None:
    function = next(
        f
        for f in template.find_resources("AWS::Lambda::Function").values()
        if f["Properties"]["Environment"]["Variables"].get("VIGIL_JOB_NAME") == "cleanup"
    )
    granted = template.in_parent(function["Properties"]["Environment"]["Variables"][WRITES_ENV])
    # What the runtime reads once CloudFormation has resolved it (each Ref -> "<logical id>").
    grants = Grants.from_env({WRITES_ENV: resolved(granted)}, "job:cleanup")
    for kind, alias in zip(WriteKind, ("Sessions", "Reports", "Mail", "Bus"), strict=True):
        assert grants.resolve(kind, alias).startswith(f"<{alias}")
    policy = statements(template, "CleanupFunctionRole")
    actions = [s["Action"] for s in policy]
    assert ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"] in actions
    objects = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"]
    assert objects in actions and "s3:ListBucket" in actions
    assert "events:PutEvents" in actions
    for statement in policy:  # the writes' grants: no wildcard action, no "*" resource
        listed = statement["Action"]
        listed = listed if isinstance(listed, list) else [listed]
        if any(a.startswith(("dynamodb:", "s3:", "sqs:", "events:")) for a in listed):
            assert not any(a.endswith("*") for a in listed), statement
            assert statement["Resource"] != "*", statement


def test_a_job_without_writes_has_no_grants_environment(template: Stacks) -> None:
    (quiet,) = [v for v in variables_of(template) if v.get("VIGIL_JOB_NAME") == "quiet"]
    assert WRITES_ENV not in quiet


def test_a_task_gets_its_declared_writes(template: Stacks) -> None:
    (task,) = [v for v in variables_of(template) if v.get(TaskEnv.NAME) == "send-receipt"]
    assert WRITES_ENV in task


@pytest.mark.parametrize(
    ("writes", "fragment"),
    [
        ("sessions", "must be a list"),
        (["sessions"], "item 0 (str) is not a DynamoDB table"),
        (None, "must be a list"),
    ],
)
def test_bad_writes_fail_the_synth_naming_the_construct_and_the_parameter(
    writes: Any, fragment: str
) -> None:
    stack = Stack(App(), "Test")
    with pytest.raises(ConfigurationError, match="ScheduledJob 'Cleanup': invalid writes") as job:
        ScheduledJob(stack, "Cleanup", writes=writes, **JOB)
    assert fragment in str(job.value)
    with pytest.raises(ConfigurationError, match=r"BackgroundTask 'Send'.*invalid writes"):
        BackgroundTask(stack, "Send", handler="tasks.send_receipt.handler", writes=writes)


def test_the_same_resource_declared_twice_fails_the_synth() -> None:
    stack = Stack(App(), "Test")
    table = resources(stack)[0]
    with pytest.raises(ConfigurationError, match="tables 'Sessions' is declared twice"):
        ScheduledJob(stack, "Cleanup", writes=[table, table], **JOB)


def test_an_observer_kind_gets_its_declared_writes_in_its_containers_environment(
    template: Stacks,
) -> None:
    environments = {}
    for definition in template.find_resources("AWS::ECS::TaskDefinition").values():
        container = definition["Properties"]["ContainerDefinitions"][0]
        names = {e["Name"]: e["Value"] for e in container["Environment"]}
        environments[container["LogConfiguration"]["Options"]["awslogs-stream-prefix"]] = names
    assert "Sessions" in str(environments["ticker"][WRITES_ENV])
    assert WRITES_ENV not in environments["quiet"]
    # On the kind's own task role only: the other kind's containers cannot write the table.
    fenced = ["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"]
    assert fenced in [s["Action"] for s in statements(template, "ObserversTaskRoleTicker")]
    assert fenced not in [s["Action"] for s in statements(template, "ObserversTaskRoleQuiet")]


def test_bad_observer_writes_fail_the_synth_naming_the_kind() -> None:
    stack = Stack(App(), "Fleet")
    kinds = {"ticker": ObserverKind("observers.ticker.run", writes=("sessions",))}
    with pytest.raises(ConfigurationError, match=r"invalid kinds\['ticker'\]\.writes: item 0"):
        ObserverFleet(stack, "Observers", kinds=kinds, heartbeat_interval=Duration.seconds(20))


def test_a_kms_encrypted_table_or_bucket_also_grants_its_key(template: Stacks) -> None:
    """A table or bucket under a customer-managed key refuses a write without the key's grant
    (AccessDenied at the first fenced put, in production only: moto has no IAM)."""
    found = statements(template, "EncryptedFunctionRole")
    on_key = [s for s in found if str(s["Resource"]).startswith("{'Fn::GetAtt': ['Key")]
    actions = {a for s in on_key for a in s["Action"]}
    assert {"kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey*"} <= actions, found


def test_strict_writes_may_read_the_runs_own_claim_and_only_its_own(template: Stacks) -> None:
    """``run.fenced.strict`` reads the run's claim (GetItem) or checks it in the write's
    transaction (ConditionCheckItem): granted on the run's own items only, and only to a run
    that declares writes."""
    check = ["dynamodb:ConditionCheckItem", "dynamodb:GetItem"]

    def claim_grants(role_prefix: str) -> list[dict[str, Any]]:
        found = statements(template, role_prefix)
        return [s for s in found if sorted(actions(s)) == check]

    (job,) = claim_grants("CleanupFunctionRole")
    assert job["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["JOB#cleanup"]}
    }
    (task,) = claim_grants("SendReceiptFunctionRole")
    assert task["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"] == [
        "TASK#send-receipt"
    ]
    assert claim_grants("QuietFunctionRole") == []
    (observer,) = claim_grants("ObserversTaskRoleTicker")  # the registry, keyed by kind
    assert observer["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == ["ticker"]
    assert observer["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}
    assert claim_grants("ObserversTaskRoleQuiet") == []
