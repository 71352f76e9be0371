"""The emulator keeps the events Vigil puts on the default bus, and a PutEvents reaches only the
rules with an event pattern (moto would also hand it to schedule-only rules, and fail on a
function target)."""

from __future__ import annotations

import json
from typing import Any

import boto3

from vigil_tools.emulator.event_log import capture_events, captured_events, forget_events


def test_vigil_events_are_kept_and_schedule_rules_get_none(aws: None) -> None:
    session: Any = boto3.session.Session(region_name="us-east-1")
    events = session.client("events")
    events.put_rule(Name="every-minute", ScheduleExpression="rate(1 minute)")
    events.put_targets(  # a function target: moto cannot deliver to it
        Rule="every-minute",
        Targets=[{"Id": "f", "Arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}],
    )
    capture_events(session)
    capture_events(session)  # idempotent

    answer = events.put_events(
        Entries=[
            {
                "Source": "vigil",
                "DetailType": "Vigil Task Succeeded",
                "Detail": json.dumps({"id": "a"}),
            },
            {"Source": "shop", "DetailType": "Order Placed", "Detail": json.dumps({"id": "b"})},
        ]
    )

    assert answer["FailedEntryCount"] == 0
    captured = captured_events(session)
    assert [(e["source"], e["detail-type"], e["detail"]) for e in captured] == [
        ("vigil", "Vigil Task Succeeded", {"id": "a"})
    ]
    forget_events(session)
    assert captured_events(session) == []
