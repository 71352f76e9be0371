"""The events put on the default bus, kept where a test (or a look at the local stack) reads them.

moto routes PutEvents to the rules whose pattern matches and that target a queue (or a log group),
but keeps nothing it did not route: an event no rule takes is gone. :func:`capture_events` adds
one rule of the emulator's own on the default bus, for the events Vigil sends (source ``vigil``:
the tasks' completion events), with a queue of its own as target; :func:`captured_events` reads
that queue without receiving it. Neither is in the template: they are the emulator's, like its
copies of AWS's public parameters.

moto (5.2.1) also hands every PutEvents event to the rules that have no event pattern (a rule
that only runs on a schedule), and fails the PutEvents when such a rule targets a function
("Expr not defined"): on AWS those rules never see a put event. :func:`capture_events` makes
moto skip them (:func:`_schedule_rules_take_no_events`); ``tests/local/test_event_log.py`` fails
the day moto changes what this relies on.
"""

from __future__ import annotations

import json
from typing import Any

from vigil.contract.tasks import EVENT_SOURCE
from vigil_tools.emulator.queues import peek

RULE = "vigil-emulator-events"
QUEUE = "vigil-emulator-events"


_patched: list[Any] = []


def _schedule_rules_take_no_events() -> None:
    """Only rules with an event pattern get PutEvents' events, as on AWS (once; idempotent)."""
    if _patched:
        return
    from moto.events.models import Rule

    original = Rule.send_to_targets

    def send_to_targets(self: Any, event: Any, transform_input: bool = True) -> None:
        if not self.event_pattern.dump():
            return
        original(self, event, transform_input)

    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign, assignment]
    _patched.append(original)


def capture_events(session: Any) -> str:
    """Create (idempotent) the rule and its queue; the queue's URL."""
    _schedule_rules_take_no_events()
    sqs = session.client("sqs")
    url = str(sqs.create_queue(QueueName=QUEUE)["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = session.client("events")
    events.put_rule(Name=RULE, EventPattern=json.dumps({"source": [EVENT_SOURCE]}))
    events.put_targets(Rule=RULE, Targets=[{"Id": "queue", "Arn": arn}])
    return url


def captured_events(session: Any) -> list[dict[str, Any]]:
    """The events captured so far, oldest first, as EventBridge delivered them (``source``,
    ``detail-type``, ``detail``, ``time``...)."""
    url = session.client("sqs").get_queue_url(QueueName=QUEUE)["QueueUrl"]
    return [json.loads(message["Body"]) for message in peek(session, url)]


def forget_events(session: Any) -> None:
    url = session.client("sqs").get_queue_url(QueueName=QUEUE)["QueueUrl"]
    session.client("sqs").purge_queue(QueueUrl=url)
