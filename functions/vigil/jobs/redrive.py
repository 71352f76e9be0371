"""Redrive a job's dead-lettered events: hand each destination record back to the job's function.

The whole record goes back (the guard reads the original event from ``requestPayload``), so the
guard knows it is a deliberate redrive and runs it even past the job's lateness limit. Safe to
repeat: the guard keys every run on the tick's scheduled time, so an event that already ran is a
suppressed duplicate.

How the events go back depends on the job's overlap policy:

- ``skip`` (the default): one at a time, oldest tick first, each invocation answered before the
  next starts. Handed back all at once, the ticks of a skip job meet each other's leases: each
  redrive that finds another tick running is refused (the guard never skips a redrive, it fails
  it), so a burst of dead letters went back to the queue as a burst. One at a time nothing
  overlaps but a run the scheduler started meanwhile, and a tick that fails again stays in the
  queue (visible at once) for the next redrive, with the error printed: nothing is lost.
- ``allow``: all at once, asynchronously, as Lambda delivered them the first time; an event that
  fails again returns to the queue through Lambda's on-failure destination.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from vigil.events import MalformedEvent
from vigil.jobs.events import parse_tick

# A job's catalog entry without an overlap policy (a stack deployed before it was published)
# is redriven one at a time: safe whatever the policy is.
SAFE_OVERLAP = "skip"


class Answer(Protocol):
    """A synchronous invocation's answer (the emulator's ``Invocation`` is one)."""

    @property
    def ok(self) -> bool: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def error_message(self) -> str | None: ...


@dataclass(frozen=True)
class Answered:
    """An Invoke (RequestResponse) answer as :class:`Answer`: the CLI's and the console's."""

    ok: bool
    error_type: str | None = None
    error_message: str | None = None

    @classmethod
    def of(cls, response: Mapping[str, Any]) -> Answered:
        if "FunctionError" not in response:
            return cls(True)
        try:
            payload = json.loads(response["Payload"].read() or b"{}")
        except ValueError:
            payload = {}
        if not isinstance(payload, dict):
            payload = {}
        return cls(
            False,
            str(payload.get("errorType", response["FunctionError"])),
            str(payload.get("errorMessage", "")),
        )


@dataclass(frozen=True)
class Redriven:
    message_id: str
    event: Any
    result: Any
    kept: bool = False
    """It failed again and stays in the queue for the next redrive (a one-at-a-time redrive)."""


def redrive(
    sqs: Any,
    queue_url: str,
    invoke: Callable[[Any], Any],
    *,
    limit: int = 100,
) -> list[Redriven]:
    """All at once: invoke (asynchronously) with each of up to ``limit`` records, delete it.

    The messages are taken first and invoked after, so an event that fails again and returns to
    the queue waits for the next redrive instead of looping.
    """
    done: list[Redriven] = []
    for message, event in _take(sqs, queue_url, limit):
        result = invoke(event)
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        done.append(Redriven(message["MessageId"], event, result))
    return done


def redrive_in_order(
    sqs: Any,
    queue_url: str,
    call: Callable[[Any], Answer],
    *,
    limit: int = 100,
) -> list[Redriven]:
    """One at a time, oldest tick first: each record is invoked and answered before the next.

    A record whose invocation succeeded is deleted; one that failed is made visible again at
    once (it is still in the queue, for the next redrive) and the rest go on: the ticks are
    independent, and one tick's failure must not hold the others back.
    """
    taken = sorted(_take(sqs, queue_url, limit), key=lambda pair: _tick_order(pair[1]))
    done: list[Redriven] = []
    for message, event in taken:
        answer = call(event)
        if answer.ok:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        else:
            sqs.change_message_visibility(
                QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        done.append(Redriven(message["MessageId"], event, answer, kept=not answer.ok))
    return done


def redrive_job(
    sqs: Any,
    job: Mapping[str, str],
    *,
    send: Callable[[Any], Any],
    call: Callable[[Any], Answer],
    limit: int = 100,
) -> list[Redriven]:
    """A job's dead letters back, the way its overlap policy (in its catalog entry) allows:
    ``send`` invokes asynchronously, ``call`` synchronously."""
    if one_at_a_time(job):
        return redrive_in_order(sqs, job["failed_runs"], call, limit=limit)
    return redrive(sqs, job["failed_runs"], send, limit=limit)


def one_at_a_time(job: Mapping[str, str]) -> bool:
    """Whether a job's redrive must go one tick at a time (every policy but ``allow``)."""
    return job.get("overlap", SAFE_OVERLAP) != "allow"


def _take(sqs: Any, queue_url: str, limit: int) -> list[tuple[dict[str, Any], Any]]:
    """Up to ``limit`` destination records, received (hidden) before any is invoked. A message
    whose body is not a Lambda destination record is left in the queue, untouched."""
    taken: list[tuple[dict[str, Any], Any]] = []
    while len(taken) < limit:
        response = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=min(10, limit - len(taken)),
            WaitTimeSeconds=0,
            VisibilityTimeout=300,
        )
        messages = response.get("Messages", [])
        if not messages:
            break
        for message in messages:
            try:
                record = json.loads(message["Body"])
                record["requestPayload"]
                taken.append((message, record))
            except (ValueError, KeyError, TypeError):
                continue
    return taken


def _tick_order(record: Any) -> tuple[int, datetime | None]:
    """Oldest tick first; a record with no readable tick last (the guard refuses it anyway)."""
    try:
        return (0, parse_tick(record).scheduled_at)
    except MalformedEvent:
        return (1, None)
