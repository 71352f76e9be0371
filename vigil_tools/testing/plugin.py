"""The pytest plugin: the ``vigil_stack`` fixture (entry point ``pytest11: vigil``).

The app is synthesized and deployed on the emulator once per session; each test gets the same
deployment with its state emptied (tables, queues, tasks, containers) and a fresh simulated clock
starting at :data:`START`, and its own Lambda runtime, so every test imports the team's code anew.

moto's data lives in module globals. Between tests the emulator's mock is switched off without
removing that data, so other tests of the session (which start moto with a reset) see a clean
account; when one did reset it, the next ``vigil_stack`` puts the deployed account's data back
(:mod:`vigil_tools.testing.kept`) rather than deploying again, then empties it as always.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from vigil_tools.testing.kept import KeptAccount

START = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)
"""Every test's clock starts here (a Monday, 07:00 in Prague)."""


class _Session:
    """The synthesized app and, once deployed, the emulator's account."""

    def __init__(self) -> None:
        # The process's one synth of the app, shared with the session's other users of it.
        from vigil_tools.emulator.template import synthesized_app

        self.synth = synthesized_app()
        self.account: Any = None

    kept: KeptAccount | None = None
    """moto's data of the deployed account, put back after another test's reset (:mod:`.kept`)."""

    def account_for_test(self) -> Any:
        import boto3

        from vigil_tools.emulator.account import REGION, deploy_account
        from vigil_tools.emulator.deploy import DeployFailed

        boto3.setup_default_session(
            region_name=REGION, aws_access_key_id="local", aws_secret_access_key="local"
        )
        session = boto3.DEFAULT_SESSION
        deployed = self.account is not None and self._still_deployed(session)
        if not deployed and self.kept is not None:
            self.kept.restore()  # another test reset moto: the account back, not a new deploy
            deployed = self._still_deployed(session)
        if deployed:
            self.account.session = session
            _empty(self.account)
            self.kept = KeptAccount.take()
            return self.account
        try:
            self.account = deploy_account(self.synth, session)
        except DeployFailed as refused:  # the resource and moto's reason, not moto's stack
            pytest.fail(str(refused), pytrace=False)
        self.kept = KeptAccount.take()
        return self.account

    def _still_deployed(self, session: Any) -> bool:
        stacks = session.client("cloudformation").list_stacks()["StackSummaries"]
        return any(s["StackName"] == self.account.deployed.stack_name for s in stacks)


def _empty(account: Any) -> None:
    """Every table and queue of the template emptied, every task stopped, every one-time
    schedule and captured event gone."""
    from vigil_tools.emulator.event_log import forget_events
    from vigil_tools.emulator.scheduler import one_time_schedules

    dynamodb, sqs, ecs = (account.session.client(s) for s in ("dynamodb", "sqs", "ecs"))
    for logical_id, resource in account.synth.resources("AWS::DynamoDB::Table").items():
        table = account.physical_id(logical_id)
        keys = [k["AttributeName"] for k in resource["Properties"]["KeySchema"]]
        for page in dynamodb.get_paginator("scan").paginate(TableName=table):
            for item in page["Items"]:
                dynamodb.delete_item(TableName=table, Key={k: item[k] for k in keys})
    for queue in account.everywhere("AWS::SQS::Queue"):
        sqs.purge_queue(QueueUrl=queue.physical_id)
    forget_events(account.session)
    scheduler = account.session.client("scheduler")
    for once in one_time_schedules(scheduler):  # what a test's enqueue(delay=...) left
        scheduler.delete_schedule(Name=once.name, GroupName=once.group)
    for logical_id in account.synth.resources("AWS::ECS::Cluster"):
        cluster = account.physical_id(logical_id)
        for arn in ecs.list_tasks(cluster=cluster, desiredStatus="RUNNING")["taskArns"]:
            ecs.stop_task(cluster=cluster, task=arn, reason="vigil_stack: next test")
    _forget_history(account)


def _forget_history(account: Any) -> None:
    """What moto would otherwise keep of every earlier test, for the rest of the session: the
    tables' stream records and shard iterators (the next test's stream mapping starts at LATEST)
    and the stopped ECS tasks (AWS forgets them within the hour). Each look of the next test
    (its stream mapping's start, every ``ListTasks``) would read all of them again."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodbstreams.models import dynamodbstreams_backends
    from moto.ecs.models import ecs_backends

    from vigil_tools.emulator.moto_memory import trim_shard

    region, account_id = account.session.region_name, account.resolver.account_id()
    for table in dynamodb_backends[account_id][region].tables.values():
        if table.stream_shard is not None:
            shard = table.stream_shard
            trim_shard(shard, shard.starting_sequence_number + len(shard.items) - 1)
    dynamodbstreams_backends[account_id][region].shard_iterators.clear()
    for tasks in ecs_backends[account_id][region].tasks.values():
        for arn in [arn for arn, task in tasks.items() if task.desired_status == "STOPPED"]:
            del tasks[arn]


@pytest.fixture(scope="session")
def _vigil_session() -> _Session:
    return _Session()


@pytest.fixture
def vigil_stack(_vigil_session: _Session) -> Iterator[Any]:
    """The app deployed on the emulator, empty, on a simulated clock (see ``VigilStack``)."""
    with deployed_stack(_vigil_session) as stack:
        yield stack


@contextmanager
def deployed_stack(vigil_session: _Session) -> Iterator[Any]:
    """One test's ``vigil_stack``; boto3's default session is the test's own until it ends."""
    import boto3
    from freezegun import freeze_time
    from moto import mock_aws
    from moto.moto_api import state_manager

    from vigil_tools.testing.stack import VigilStack

    mock = mock_aws()
    default_session = boto3.DEFAULT_SESSION
    with freeze_time(START) as frozen:
        mock.start(reset=False)
        # moto advances a task's status on every DescribeTasks unless told not to (NOTES.md).
        state_manager.set_transition(
            model_name="ecs::task", transition={"progression": "manual", "times": 10**9}
        )
        stack: VigilStack | None = None
        try:
            account = vigil_session.account_for_test()
            stack = VigilStack(
                account,
                now=lambda: datetime.now(UTC),
                move_to=frozen.move_to,
            )
            yield stack
        finally:
            if stack is not None:
                stack.close()
                stack.fleet.kill_all()
            state_manager.unset_transition(model_name="ecs::task")
            mock.stop(remove_data=False)
            boto3.DEFAULT_SESSION = default_session
