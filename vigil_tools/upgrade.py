"""``vigil upgrade drain``: after the deploy that moved jobs and tasks into their shards, hand what the
old queues hold to the new ones, and point pending one-time schedules at the new ones.

The deploy keeps the one-stack layout's queues (``DeletionPolicy: Retain``: CloudFormation forgets
them and leaves them in the account) and creates each job's and task's queues in its shard. What
the old ones hold is work in flight: a job's dead letters (``<Job>FailedRuns``, ``<Job>Undelivered``),
a task's queued or delayed messages (``<Task>Queue``) and dead letters (``<Task>DeadLetters``).
Each old queue is found by the logical id the old layout gave it, from the construct id the new
catalogs keep (``<construct><Role><8 hex digits of md5("<construct>/<Role>/Resource")>``, the CDK's
rule): CloudFormation named it ``<stack>-<logical id>-<suffix>``. Its messages are sent on
(body, attributes, a FIFO message's group and deduplication id) and then deleted: safe to repeat,
and to run again for messages still delayed or in flight. An old queue left empty is reported
(``delete`` removes it then).

A one-time schedule (``at`` beyond 15 minutes) sends to its task's queue with its task's scheduler
role: both replaced by the deploy, so each pending schedule of the stack's group is updated to the
new ones (its name carries its task: ``_<task>_<digest>``).
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass, field
from typing import Any, TextIO

from vigil.catalog import read_catalog
from vigil.contract.layout import CONSTRUCT_FIELD, Catalogued
from vigil.contract.tasks import SCHEDULE_NAME_DELIMITER, CatalogField
from vigil.tasks.enqueue import queue_arn
from vigil_tools.direct_cli import add_group
from vigil_tools.stacks import stack_of
from vigil_tools.tables import render_table

BATCH = 10
JOB_QUEUES = {"FailedRuns": "failed_runs", "Undelivered": "undelivered"}
TASK_QUEUES = {
    "Queue": CatalogField.QUEUE_URL.value,
    "DeadLetters": CatalogField.DEAD_LETTER_URL.value,
}
UNDELIVERED_PREFIX = "JobsUndelivered"
"""The stack's one queue of undelivered ticks (its logical id starts so)."""


def old_logical_id(construct: str, role: str) -> str:
    """The logical id the one-stack layout gave a job's or task's queue (the CDK's rule)."""
    digest = hashlib.md5(f"{construct}/{role}/Resource".encode()).hexdigest()[:8].upper()
    return f"{construct}{role}{digest}"


@dataclass
class Moved:
    """One old queue: where its messages went, how many, what is left in it."""

    old: str
    new: str
    moved: int = 0
    left: int = 0
    """Messages it still holds (delayed or in flight): run ``drain`` again once they are due."""


@dataclass
class Drained:
    queues: list[Moved] = field(default_factory=list)
    schedules: list[str] = field(default_factory=list)
    """The one-time schedules pointed at their task's new queue and role."""
    deleted: list[str] = field(default_factory=list)


class UpgradeError(Exception):
    """The stack is not one this drain can read (exit code 1)."""


def add_parser(groups: Any) -> None:
    commands = add_group(groups, "upgrade", help="after a deploy of a new layout")
    command = commands.add_parser(
        "drain", help="hand what the one-stack layout's queues hold to the shards' queues"
    )
    command.add_argument(
        "--delete", action="store_true", help="delete each old queue once it is empty"
    )


def run(args: argparse.Namespace, session: Any, out: TextIO) -> int:
    """``vigil upgrade drain``: a line per old queue found, and the schedules pointed anew."""
    report = drain(session, stack_of(args), delete=args.delete)
    rows = [
        [
            q.old.rsplit("/", 1)[-1],
            q.new.rsplit("/", 1)[-1],
            q.moved,
            q.left,
            q.old in report.deleted,
        ]
        for q in report.queues
    ]
    out.write(render_table(["OLD QUEUE", "NEW QUEUE", "MOVED", "LEFT", "DELETED"], rows) + "\n")
    out.write(f"one-time schedules pointed at their new queue: {len(report.schedules)}\n")
    if any(q.left for q in report.queues):
        out.write("messages still delayed or in flight: run `vigil upgrade drain` again later\n")
    return 0


def drain(session: Any, stack: str, *, delete: bool = False) -> Drained:
    """Move every retained old queue's messages to its new queue (see the module)."""
    sqs = session.client("sqs")
    ssm = session.client("ssm")
    report = Drained()
    targets = _targets(session, stack, ssm)
    if not targets:
        raise UpgradeError(
            f"stack {stack!r} has no jobs or tasks catalog under /vigil/{stack}/: deploy this "
            "version over it first (the catalogs name each job's and task's new queues)"
        )
    for logical_id, new_url in targets.items():
        for old_url in _old_queues(sqs, stack, logical_id):
            moved = _move(sqs, old_url, new_url)
            report.queues.append(moved)
            if delete and moved.left == 0:
                sqs.delete_queue(QueueUrl=old_url)
                report.deleted.append(old_url)
    report.schedules = _retarget(session, stack, ssm)
    return report


def _targets(session: Any, stack: str, ssm: Any) -> dict[str, str]:
    """Old logical id -> the new queue its messages go to."""
    targets: dict[str, str] = {}
    jobs = read_catalog(ssm, stack, Catalogued.JOBS).entries
    undelivered = _undelivered(session, stack) if jobs else None
    for entry in jobs.values():
        construct = entry.get(CONSTRUCT_FIELD)
        if not construct:
            continue
        targets[old_logical_id(construct, "FailedRuns")] = entry["failed_runs"]
        if undelivered:
            targets[old_logical_id(construct, "Undelivered")] = undelivered
    for entry in read_catalog(ssm, stack, Catalogued.TASKS).entries.values():
        construct = entry.get(CONSTRUCT_FIELD)
        if not construct:
            continue
        for role, field_name in TASK_QUEUES.items():
            targets[old_logical_id(construct, role)] = entry[field_name]
    return targets


def _undelivered(session: Any, stack: str) -> str | None:
    cloudformation = session.client("cloudformation")
    paginator = cloudformation.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=stack):
        for resource in page["StackResourceSummaries"]:
            if resource["LogicalResourceId"].startswith(UNDELIVERED_PREFIX):
                return str(resource["PhysicalResourceId"])
    return None


def _old_queues(sqs: Any, stack: str, logical_id: str) -> list[str]:
    """The old layout's queue of that logical id, by the name CloudFormation gave it."""
    prefix = f"{stack}-{logical_id}"[:80]
    found = sqs.list_queues(QueueNamePrefix=prefix).get("QueueUrls", [])
    return [url for url in found if url.rsplit("/", 1)[-1].startswith(f"{stack}-{logical_id}")]


def _move(sqs: Any, old: str, new: str) -> Moved:
    moved = Moved(old, new)
    fifo = new.endswith(".fifo")
    while True:
        messages = sqs.receive_message(
            QueueUrl=old,
            MaxNumberOfMessages=BATCH,
            WaitTimeSeconds=0,
            VisibilityTimeout=60,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            break
        for message in messages:
            sent: dict[str, Any] = {"QueueUrl": new, "MessageBody": message["Body"]}
            if message.get("MessageAttributes"):
                sent["MessageAttributes"] = message["MessageAttributes"]
            if fifo:
                attributes = message.get("Attributes", {})
                sent["MessageGroupId"] = attributes.get("MessageGroupId", "vigil-upgrade")
                sent["MessageDeduplicationId"] = attributes.get(
                    "MessageDeduplicationId", message["MessageId"]
                )
            sqs.send_message(**sent)
            sqs.delete_message(QueueUrl=old, ReceiptHandle=message["ReceiptHandle"])
            moved.moved += 1
    attributes = sqs.get_queue_attributes(
        QueueUrl=old,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    moved.left = sum(int(value) for value in attributes.values())
    return moved


def _retarget(session: Any, stack: str, ssm: Any) -> list[str]:
    """Each pending one-time schedule of the stack's group, sending to its task's new queue with
    its new scheduler role (and dead-lettering to its new dead-letter queue)."""
    parts = read_catalog(ssm, stack, Catalogued.TASKS)
    group = parts.shared.get(CatalogField.SCHEDULE_GROUP.value)
    if not group:
        return []
    scheduler = session.client("scheduler")
    region = session.region_name
    updated = []
    for page in scheduler.get_paginator("list_schedules").paginate(GroupName=group):
        for summary in page["Schedules"]:
            name = summary["Name"]
            task = name.split(SCHEDULE_NAME_DELIMITER)[1] if name.startswith("_") else ""
            entry = parts.entries.get(task)
            if entry is None:
                continue
            schedule = scheduler.get_schedule(Name=name, GroupName=group)
            target = dict(schedule["Target"])
            new_queue = queue_arn(entry[CatalogField.QUEUE_URL.value], region)
            if target["Arn"] == new_queue:
                continue
            target["Arn"] = new_queue
            target["RoleArn"] = entry[CatalogField.SCHEDULER_ROLE_ARN.value]
            if "DeadLetterConfig" in target:
                target["DeadLetterConfig"] = {
                    "Arn": queue_arn(entry[CatalogField.DEAD_LETTER_URL.value], region)
                }
            kept = {
                key: schedule[key]
                for key in (
                    "ScheduleExpression",
                    "ScheduleExpressionTimezone",
                    "FlexibleTimeWindow",
                    "State",
                    "ActionAfterCompletion",
                    "Description",
                    "StartDate",
                    "EndDate",
                )
                if key in schedule
            }
            scheduler.update_schedule(Name=name, GroupName=group, Target=target, **kept)
            updated.append(name)
    return updated
