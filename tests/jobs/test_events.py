"""Which deliveries name a tick, and which are rejected before anything is written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from vigil.events import MalformedEvent
from vigil.jobs.events import parse_tick

SCHEDULER_EVENT = {
    "vigil": {
        "job": "cleanup",
        "scheduled_time": "2026-11-22T12:05:00Z",
        "execution_id": "a1b2",
        "attempt": "2",
    }
}


def test_scheduler_input_gives_the_scheduled_time_as_the_tick() -> None:
    tick = parse_tick(SCHEDULER_EVENT)
    assert tick.scheduled_at == datetime(2026, 11, 22, 12, 5, tzinfo=UTC)
    assert (tick.job, tick.key, tick.execution_id, tick.delivery_attempt) == (
        "cleanup",
        "2026-11-22T12:05:00Z",
        "a1b2",
        2,
    )


def test_every_delivery_attempt_of_one_occurrence_maps_to_the_same_tick() -> None:
    retry = json.loads(json.dumps(SCHEDULER_EVENT))
    retry["vigil"]["execution_id"] = "different-on-every-attempt"
    retry["vigil"]["attempt"] = "3"
    assert parse_tick(retry).key == parse_tick(SCHEDULER_EVENT).key


def test_eventbridge_scheduled_rule_events_are_accepted() -> None:
    event = {
        "version": "0",
        "id": "89d1a02d-5ec7-412e-82f5-13505f849b41",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "time": "2026-11-22T12:00:00Z",
        "detail": {},
    }
    tick = parse_tick(event)
    assert (tick.key, tick.job, tick.source) == ("2026-11-22T12:00:00Z", None, "rule")


def test_a_dead_lettered_record_redrives_as_its_original_tick() -> None:
    record = {
        "version": "1.0",
        "timestamp": "2026-11-22T12:07:00.000Z",
        "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": SCHEDULER_EVENT,
        "responsePayload": {"errorMessage": "boom"},
    }
    tick = parse_tick(record)
    assert tick.key == "2026-11-22T12:05:00Z"
    assert tick.source == "redrive:scheduler"


def test_offsets_are_normalised_to_utc() -> None:
    event = {"vigil": {"scheduled_time": "2026-11-22T13:05:00+01:00"}}
    assert parse_tick(event).key == "2026-11-22T12:05:00Z"


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({}, "no scheduled time"),
        ({"foo": "bar"}, "no scheduled time"),
        ([1, 2], "must be a JSON object"),
        (None, "must be a JSON object"),
        ("not json", "not JSON"),
        ({"vigil": "x"}, "must be an object"),
        ({"vigil": {}}, "'scheduled_time' is missing"),
        ({"vigil": {"scheduled_time": "yesterday"}}, "not an ISO 8601"),
        ({"vigil": {"scheduled_time": "2026-11-22T12:00:00"}}, "no time zone"),
        ({"vigil": {"scheduled_time": "<aws.scheduler.scheduled-time>"}}, "unexpanded"),
        ({"vigil": {"scheduled_time": "2026-11-22T12:00:00Z", "attempt": "x"}}, "'attempt'"),
        ({"vigil": {"scheduled_time": "2026-11-22T12:00:00Z", "job": 5}}, "'job'"),
        ({"detail-type": "Scheduled Event"}, "'time' is missing"),
    ],
)
def test_malformed_events_are_rejected_with_a_clear_message(event: Any, message: str) -> None:
    with pytest.raises(MalformedEvent, match=message):
        parse_tick(event)
